// actsim plan with --pp > 1 or --num-microbatches > 1 (issue 15; pplan): the plan per pipeline
// stage (sim/planner_pipeline.hpp), each stage's peak with its in-flight micro-batches, beside the
// best fixed strategy that fits every stage. The plan is printed as one custom: spec over the
// model's blocks, stage-major, which `run --strategy` splits back per stage.
#include <string>

#include "commands.hpp"
#include "format.hpp"
#include "sim/error.hpp"
#include "sim/impl.hpp"
#include "sim/planner_native.hpp"
#include "sim/planner_pipeline.hpp"
#include "sim/simulate.hpp"
#include "sweep.hpp"

namespace actsim_cli {
namespace {

using cli_common::Format;

// planner6 (issue 15): what the code base's own settings run, on every stage alike (one setting
// for the run) and the best setting of each stage alone.
std::string native_text(const NativeSummary& n, const sim::NativePipelineChoice& c,
                        const sim::PipelinePlan& plan, const std::string& options) {
  std::string out = fmt::format("\nWhat {}'s own settings run ({}; stage-local, every stage alike)\n",
                                n.impl, options);
  if (!c.searched) {
    out += fmt::format("  not searched: more than {} blocks per stage\n", sim::kNativeSearchBlocks);
    return out;
  }
  if (!c.found) {
    out += fmt::format("  none of the {} settings fits every stage: the plan above needs "
                       "checkpointing code of your own\n",
                       c.candidates);
  } else {
    out += fmt::format("  {}: worst stage peak {}, recompute {} over the step (plan: {})\n",
                       n.strategy, Bytes{n.peak_bytes}, human_time_ns(n.recompute_time_ns),
                       human_time_ns(plan.result.summary.recompute_time_ns));
    out += fmt::format("  setting: {}\n", n.setting);
  }
  TextTable t({"", "in flight", "best setting for the stage alone", "peak", "added time",
               "plan's added time"},
              "lrlrrr");
  for (size_t i = 0; i < c.stages.size(); ++i) {
    const sim::NativeStageChoice& st = c.stages[i];
    t.add({fmt::format("stage {}", st.stage), std::to_string(st.in_flight),
           st.found ? st.strategy.canonical() : std::string("none fits"),
           st.found ? fmt::format("{}", Bytes{st.peak_bytes}) : std::string("-"),
           st.found ? human_time_ns(st.cost.time_ns) : std::string("-"),
           human_time_ns(plan.stages[i].cost.time_ns)});
  }
  out += t.render("  ");
  out += "  (added time: recompute plus offload stall of one micro-batch on the stage; a code base "
         "sets one value for every stage)\n";
  return out;
}

std::string render(const std::string& model, const sim::Device& device, const sim::TrainSetup& setup,
                   int64_t layers, const sim::PipelinePlan& plan) {
  const sim::Result& s = plan.result.summary;
  const bool caching = setup.allocator != sim::AllocatorKind::kExact;
  const int64_t nb = layers / setup.pp;
  std::string out = fmt::format(
      "Plan for {} on {} under a budget of {} ({} peak per GPU, every pipeline stage)\n", model,
      device.name, Bytes{plan.budget_bytes}, caching ? "reserved" : "allocated");
  out += fmt::format(
      "  micro-batch {}, seq {}, {} micro-batches, pp {} ({}), {} blocks per stage, tp {}, dp {}, "
      "ZeRO {}\n\n",
      setup.micro_batch, setup.seq, setup.microbatches, setup.pp,
      setup.vpp > 1 ? fmt::format("interleaved, {} chunks per stage", setup.vpp)
                    : std::string("1F1B"),
      nb, setup.tp, setup.dp, setup.zero);
  out += fmt::format("  {}\n", plan.strategy.canonical());
  out += fmt::format("  (global block indices, stage-major: stage i runs blocks {}i to {}i + {})\n\n",
                     nb, nb, nb - 1);
  TextTable t({"stage", "in flight", "plan (stage-local blocks)", "peak", "headroom",
               "recompute time", "from"},
              "rrlrrrl");
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    const sim::StagePlan& sp = plan.stages[i];
    const sim::Result& r = plan.result.stages[i].result;
    t.add({std::to_string(sp.stage), std::to_string(sp.in_flight), sp.strategy.canonical(),
           fmt::format("{}", Bytes{sim::budget_peak_bytes(r)}),
           fmt::format("{}", Bytes{plan.budget_bytes - sim::budget_peak_bytes(r)}),
           human_time_ns(r.recompute_time_ns), sp.source});
  }
  out += t.render("  ");
  const int64_t step_flops = s.fwd_flops + s.bwd_flops + s.recompute_flops;
  const double share = step_flops > 0 ? static_cast<double>(s.recompute_flops) /
                                            static_cast<double>(step_flops)
                                      : 0.0;
  out += fmt::format(
      "\n  step {}; recompute {} ({} of step FLOPs, all stages); worst stage {} peaks at {}\n",
      human_time_ns(s.step_time_ns), human_flops(s.recompute_flops), percent(share),
      plan.result.worst, Bytes{sim::budget_peak_bytes(s)});
  out += fmt::format(
      "  model: per stage, the chain DP under a bound on the held bytes, branch and bound over the "
      "bound (the other in-flight micro-batches' stash taken off the budget); {} stage "
      "simulations, {} DP solves\n",
      plan.simulations, plan.dp_solves);
  if (plan.proven) {
    out += "  on every stage the DP's best plan is the chain model's optimum (its cost equals the "
           "lower bound proven over every option); the fixed strategies were candidates beside "
           "it\n";
  } else {
    for (const sim::StagePlan& sp : plan.stages)
      if (!(sp.model_cost == sp.lower_bound))
        out += fmt::format("  stage {}: the DP's best plan adds {} under the model, no more than "
                           "the optimum under a budget {} lower; no plan adds less than {} "
                           "(proven)\n",
                           sp.stage, human_time_ns(sp.model_cost.time_ns), Bytes{sp.gap_bytes},
                           human_time_ns(sp.lower_bound.time_ns));
  }
  out += "\nBest fixed strategy that fits every stage (none, full, every:k, sqrt, selective, "
         "sac:mm, offload, offload+full, block:k; the same on each stage)\n";
  if (!plan.fixed_found) {
    out += "  none fits this budget\n";
    return out;
  }
  const sim::Result& f = plan.fixed_result.summary;
  TextTable c({"", "worst stage peak", "recompute", "recompute time"}, "lrrr");
  c.add({plan.fixed.canonical(), fmt::format("{}", Bytes{sim::budget_peak_bytes(f)}),
         human_flops(f.recompute_flops), human_time_ns(f.recompute_time_ns)});
  c.add({"plan", fmt::format("{}", Bytes{sim::budget_peak_bytes(s)}), human_flops(s.recompute_flops),
         human_time_ns(s.recompute_time_ns)});
  out += c.render("  ");
  out += fmt::format("  (recompute: all stages' FLOPs over the step; time: the worst-memory "
                     "stage's over its {} micro-batches)\n",
                     setup.microbatches);
  out += fmt::format("  the plan's step takes {} against {} for {}\n", human_time_ns(s.step_time_ns),
                     human_time_ns(f.step_time_ns), plan.fixed.canonical());
  return out;
}

}  // namespace

bool is_pipeline_plan(const Invocation& inv) {
  const cli_common::Axes axes = cli_common::parse_axes(inv.flags);
  const cli_common::Point point = cli_common::point_at(axes, 0);
  return point.setup.pp > 1 || point.setup.microbatches > 1;
}

int cmd_plan_pipeline(const Invocation& inv) {
  const Format format =
      cli_common::parse_format(inv.flags.format, "table|csv|json", Format::kTable);
  const int64_t budget = parse_budget(inv.budget);
  const cli_common::Axes axes = cli_common::parse_axes(inv.flags);
  cli_common::require_single(axes, inv.flags, "plan");
  const cli_common::Inputs inputs = cli_common::load_inputs(axes, cli_common::search_dirs());
  const cli_common::Point point = cli_common::point_at(axes, 0);
  const sim::Device& device = inputs.devices.front();
  const sim::ModelConfig& model = inputs.models.front();
  sim::PipelinePlan plan;
  try {
    plan = sim::plan_pipeline(model, point.setup, device, budget);
  } catch (const sim::ConfigError& e) {
    if (e.where() != "--strategy" || e.field() != "budget") throw;
    throw sim::ConfigError("--budget", inv.budget, e.message());
  }
  sim_io::Row row;
  row.key = cli_common::row_key(axes, inputs, point);
  row.key.strategy = plan.strategy.canonical();
  row.result = plan.result.summary;
  // planner6 (issue 15): what the code base's own settings run on this pipeline.
  const sim::TrainSetup resolved = sim::resolve_setup(model, point.setup);
  const sim::ImplSpec* impl = resolved.impl ? &sim::spec(*resolved.impl, resolved.impl_version) : nullptr;
  sim::NativePipelineChoice choice;
  NativeSummary summary;
  std::string options;
  if (impl) {
    for (const sim::NativeAc& o : impl->native_ac)
      options += (options.empty() ? "" : ", ") + std::string(o.strategy);
    choice = sim::best_native_pipeline(model, point.setup, device, budget, impl->native_ac);
    summary.impl = fmt::format("{}@{}", impl->name, impl->version_key);
    summary.candidates = choice.candidates;
    summary.status = !choice.searched ? "not searched" : choice.found ? "found" : "none fits";
    if (choice.found) {
      // The setting on every stage, simulated as the plan is (simulate_pipeline's summary).
      const sim::PipelineResult pr = sim::simulate_pipeline(
          model, point.setup, device,
          std::vector<sim::Strategy>(static_cast<size_t>(point.setup.pp), choice.strategy));
      summary.strategy = choice.strategy.canonical();
      summary.setting = choice.config;
      summary.peak_bytes = sim::budget_peak_bytes(pr.summary);
      summary.recompute_time_ns = pr.summary.recompute_time_ns;
      summary.offload_stall_ns = pr.summary.offload_stall_ns;
      summary.recompute_flops = pr.summary.recompute_flops;
    }
    if (choice.searched)
      for (const sim::NativeStageChoice& st : choice.stages) {
        NativeSummary::Stage o;
        o.stage = st.stage;
        o.in_flight = st.in_flight;
        o.found = st.found;
        if (st.found) {
          o.strategy = st.strategy.canonical();
          o.setting = st.config;
          o.peak_bytes = st.peak_bytes;
          o.added_time_ns = st.cost.time_ns;
          o.recompute_flops = st.cost.flops;
        }
        summary.stages.push_back(std::move(o));
      }
  }
  std::string text;
  switch (format) {
    case Format::kTable:
      text = render(axes.models.front(), device, resolved, model.layers, plan);
      if (impl) text += native_text(summary, choice, plan, options);
      break;
    case Format::kCsv: text = plan_csv(row, summary); break;
    case Format::kJson: text = plan_json(row, summary); break;
  }
  Output out(inv.flags.output);
  out.write(text);
  out.commit();
  return 0;
}

}  // namespace actsim_cli
