// actsim plan --budget 60GiB: the plan with the least recompute time whose simulated peak fits
// the budget (sim/planner.hpp), printed per block as a custom: spec with its peak, recompute and
// the DP's model line, beside the best fixed strategy that fits. A budget no plan meets is an
// error naming the smallest feasible peak (exit 2, no output).
#include <string>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "format.hpp"
#include "sim/error.hpp"
#include "sim/planner.hpp"
#include "sim/planner_native.hpp"
#include "sim/simulate.hpp"
#include "sweep.hpp"

namespace actsim_cli {
namespace {

using cli_common::Format;

std::string clause_text(const sim::Clause& c) {
  switch (c.mode) {
    case sim::ClauseMode::kNone: return "store (nothing recomputed)";
    case sim::ClauseMode::kSelective: return "selective (core attention recomputed)";
    case sim::ClauseMode::kSacMm: return "sac:mm (matmul outputs kept, the rest recomputed)";
    case sim::ClauseMode::kFull: return "full (each block checkpointed alone)";
    case sim::ClauseMode::kSeg:
      return fmt::format("segments of {} blocks, each checkpointed at its input", c.group);
    case sim::ClauseMode::kOffload: return "offload (saved tensors on the host)";
    case sim::ClauseMode::kOffloadFull: return "offload+full (checkpointed inputs on the host)";
  }
  return "?";
}

std::string blocks_text(const sim::Clause& c) {
  return c.first == c.last ? fmt::format("block {}", c.first)
                           : fmt::format("blocks {}-{}", c.first, c.last);
}

// native (plan): the best of what the code base's own settings run (sim/planner_native.hpp),
// beside the per-block plan, which needs checkpointing code of the user's own unless it is one
// of those settings itself.
std::string native_text(const sim::ImplSpec& impl, const sim::BudgetPlan& plan,
                        const sim::NativeChoice& native) {
  const std::string who = fmt::format("{}@{}", impl.name, impl.version_key);
  std::string options;
  for (const sim::NativeAc& o : impl.native_ac) options += (options.empty() ? "" : ", ") + std::string(o.strategy);
  std::string out = fmt::format("\nWhat {}'s own settings run ({})\n", who, options);
  if (!native.searched) {
    out += fmt::format("  not searched: more than {} blocks (no modeled code base has that many "
                       "layers)\n",
                       sim::kNativeSearchBlocks);
    return out;
  }
  if (!native.best.found) {
    out += fmt::format("  none of the {} settings fits this budget: the plan above needs "
                       "checkpointing code of your own\n",
                       native.candidates);
    return out;
  }
  const sim::Result& f = native.best.result;
  const sim::Result& r = plan.result;
  TextTable c({"", "peak", "recompute", "recompute time"}, "lrrr");
  c.add({native.best.strategy.canonical(), fmt::format("{}", Bytes{sim::budget_peak_bytes(f)}),
         human_flops(f.recompute_flops), human_time_ns(f.recompute_time_ns)});
  out += c.render("  ");
  out += fmt::format("  setting: {}\n", native.config);
  const sim::Plan resolved = sim::resolve(native.best.strategy, plan.plan.mode.size() > 0
                                                                    ? static_cast<int64_t>(plan.plan.mode.size())
                                                                    : 0);
  if (resolved.mode == plan.plan.mode && resolved.segments == plan.plan.segments) {
    out += "  the plan above is this setting\n";
  } else {
    const int64_t more = f.recompute_time_ns - r.recompute_time_ns;
    if (more > 0)
      out += fmt::format(
          "  the plan above recomputes {} less, block by block, which {}'s settings cannot say:\n"
          "  it needs checkpointing code of your own\n",
          human_time_ns(more), impl.name);
    else  // the setting is none of the planner's per-block options (sac:torchtitan, layer-sac:k)
      out += fmt::format(
          "  this setting recomputes {} less than the plan above, whose per-block options do not\n"
          "  include it\n",
          human_time_ns(-more));
  }
  return out;
}

std::string render_table(const std::string& model, const sim::Device& device,
                         const sim::TrainSetup& setup, const sim::BudgetPlan& plan,
                         const sim::FixedChoice& fixed, const sim::ImplSpec* impl,
                         const sim::NativeChoice& native) {
  const sim::Result& r = plan.result;
  const bool caching = setup.allocator != sim::AllocatorKind::kExact;
  std::string out = fmt::format(
      "Plan for {} on {} under a budget of {} ({} peak per GPU)\n", model, device.name,
      Bytes{plan.budget_bytes}, caching ? "reserved" : "allocated");
  out += fmt::format("  micro-batch {}, seq {}, {}{} profile, {}, {} attention, tp {}, dp {}, ZeRO {}\n\n",
                     setup.micro_batch, setup.seq,
                     setup.impl ? fmt::format("--impl {}, ", sim::name(*setup.impl)) : std::string(),
                     sim::name(setup.profile),
                     sim::name(sim::resolved_precision(setup)), sim::name(sim::resolved_attention(setup)),
                     setup.tp, setup.dp, setup.zero);
  out += fmt::format("  {}\n\n", plan.strategy.canonical());
  TextTable blocks({}, "ll");
  for (const sim::Clause& c : plan.strategy.clauses) blocks.add({blocks_text(c), clause_text(c)});
  out += blocks.render("  ");

  const int64_t step_flops = r.fwd_flops + r.bwd_flops + r.recompute_flops;
  const double share = step_flops > 0 ? static_cast<double>(r.recompute_flops) /
                                            static_cast<double>(step_flops)
                                      : 0.0;
  TextTable t({}, "lrl");
  t.add({"peak", fmt::format("{}", Bytes{sim::budget_peak_bytes(r)}),
         fmt::format("simulated; headroom under the budget {}",
                     Bytes{plan.budget_bytes - sim::budget_peak_bytes(r)})});
  t.add({"model's peak", fmt::format("{}", Bytes{plan.model_peak_bytes}),
         "the DP's memory model (exact bytes) for the same plan"});
  t.add({"recompute", human_flops(r.recompute_flops),
         fmt::format("{} of step FLOPs", percent(share))});
  t.add({"recompute time", human_time_ns(r.recompute_time_ns),
         fmt::format("step {}", human_time_ns(r.step_time_ns))});
  if (r.offload_bytes > 0)
    t.add({"offload stall", human_time_ns(r.offload_stall_ns),
           fmt::format("compute waiting for copies back; pinned host peak {} (the planner "
                       "minimises recompute time plus this)",
                       Bytes{r.pinned_host_bytes})});
  t.add({"fit on device", r.fits ? "fits" : "DOES NOT FIT",
         fmt::format("with CUDA context {}: headroom {} of {}", Bytes{r.cuda_context_bytes},
                     Bytes{r.headroom_bytes}, Bytes{r.device_bytes})});
  out += '\n';
  out += t.render("  ");
  out += fmt::format("\n  model: {}\n", plan.model_line);
  if (!plan.note.empty()) out += fmt::format("  note: {}\n", plan.note);

  out += "\nBest fixed strategy that fits (none, full, every:k, sqrt, selective, sac:mm, offload, "
         "offload+full, block:k)\n";
  if (!fixed.found) {
    out += "  none fits this budget\n";
  } else {
    const sim::Result& f = fixed.result;
    TextTable c({"", "peak", "recompute", "recompute time"}, "lrrr");
    c.add({fixed.strategy.canonical(), fmt::format("{}", Bytes{sim::budget_peak_bytes(f)}),
           human_flops(f.recompute_flops), human_time_ns(f.recompute_time_ns)});
    c.add({"plan", fmt::format("{}", Bytes{sim::budget_peak_bytes(r)}),
           human_flops(r.recompute_flops), human_time_ns(r.recompute_time_ns)});
    out += c.render("  ");
    const int64_t saved = f.recompute_time_ns - r.recompute_time_ns;
    if (saved == 0 && f.recompute_flops == r.recompute_flops) {
      out += fmt::format("  the plan recomputes as much as {}\n", fixed.strategy.canonical());
    } else {
      out += fmt::format("  the plan recomputes {} less than {}\n", human_time_ns(saved),
                         fixed.strategy.canonical());
    }
  }
  if (impl != nullptr) out += native_text(*impl, plan, native);
  return out;
}

}  // namespace

int64_t parse_budget(const std::string& text) {
  const std::optional<int64_t> bytes = sim::parse_bytes(text);
  if (text.empty()) throw sim::ConfigError("--budget", "budget", "a peak is required, e.g. --budget 60GiB");
  if (!bytes || *bytes < 1)
    throw sim::ConfigError("--budget", text,
                           "expected a positive byte count, e.g. 60GiB, 512MiB or 64424509440");
  return *bytes;
}

// planner6 (issue 15): the native section as CSV columns and a JSON object (commands.hpp).
namespace {
const char* const kNativeColumns[] = {"native_status", "native_impl", "native_strategy",
                                      "native_setting", "native_peak_bytes",
                                      "native_recompute_time_ns", "native_recompute_flops",
                                      "native_stage_strategies"};

std::string without_newline(std::string s) {
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}
}  // namespace

std::string plan_csv(const sim_io::Row& row, const NativeSummary& n) {
  std::string header = without_newline(sim_io::csv_header());
  for (const char* c : kNativeColumns) header += std::string(",") + c;
  const bool found = n.status == "found";
  const auto num = [&](int64_t v) { return found ? std::to_string(v) : std::string(); };
  std::string stages;
  for (const NativeSummary::Stage& st : n.stages)
    stages += (stages.empty() ? "" : ";") + (st.found ? st.strategy : std::string("-"));
  std::string line = without_newline(sim_io::csv_row(row));
  for (const std::string& f : {n.status, n.impl, n.strategy, n.setting, num(n.peak_bytes),
                               num(n.recompute_time_ns), num(n.recompute_flops), stages})
    line += "," + sim_io::csv_quote(f);
  return header + "\n" + line + "\n";
}

std::string plan_json(const sim_io::Row& row, const NativeSummary& n) {
  using Json = nlohmann::ordered_json;
  Json j = Json::parse(sim_io::result_json(row));
  Json nat;
  nat["status"] = n.status;
  nat["impl"] = n.impl.empty() ? Json(nullptr) : Json(n.impl);
  nat["candidates"] = n.candidates;
  const bool found = n.status == "found";
  nat["strategy"] = found ? Json(n.strategy) : Json(nullptr);
  nat["setting"] = found ? Json(n.setting) : Json(nullptr);
  nat["peak_bytes"] = found ? Json(n.peak_bytes) : Json(nullptr);
  nat["recompute_time_ns"] = found ? Json(n.recompute_time_ns) : Json(nullptr);
  nat["offload_stall_ns"] = found ? Json(n.offload_stall_ns) : Json(nullptr);
  nat["recompute_flops"] = found ? Json(n.recompute_flops) : Json(nullptr);
  if (!n.stages.empty()) {
    Json stages = Json::array();
    for (const NativeSummary::Stage& st : n.stages) {
      Json o;
      o["stage"] = st.stage;
      o["in_flight"] = st.in_flight;
      o["strategy"] = st.found ? Json(st.strategy) : Json(nullptr);
      o["setting"] = st.found ? Json(st.setting) : Json(nullptr);
      o["peak_bytes"] = st.found ? Json(st.peak_bytes) : Json(nullptr);
      o["added_time_ns"] = st.found ? Json(st.added_time_ns) : Json(nullptr);
      o["recompute_flops"] = st.found ? Json(st.recompute_flops) : Json(nullptr);
      stages.push_back(std::move(o));
    }
    nat["stages"] = std::move(stages);
  }
  j["native"] = std::move(nat);
  return j.dump(2) + "\n";
}

PlannedPoint plan_point(const Invocation& inv, const std::vector<std::filesystem::path>& dirs) {
  PlannedPoint pp;
  pp.budget = parse_budget(inv.budget);
  pp.axes = cli_common::parse_axes(inv.flags);
  cli_common::require_single(pp.axes, inv.flags, "plan");
  pp.inputs = cli_common::load_inputs(pp.axes, dirs);
  pp.point = cli_common::point_at(pp.axes, 0);
  const sim::Device& device = pp.inputs.devices.front();
  sim::validate(device);
  pp.graph = sim::build_graph(pp.inputs.models.front(), pp.point.setup, device);
  try {
    pp.plan = sim::plan_budget(pp.graph, device, pp.budget);
  } catch (const sim::ConfigError& e) {
    // Named after this verb's flag: "--budget: 60GiB: no plan fits ...".
    throw sim::ConfigError("--budget", inv.budget, e.message());
  }
  return pp;
}

sim_io::Row PlannedPoint::row() const {
  sim_io::Row r;
  r.key = cli_common::row_key(axes, inputs, point);
  r.key.strategy = plan.strategy.canonical();
  r.result = plan.result;
  return r;
}

std::string plan_output(const Invocation& inv, const std::vector<std::filesystem::path>& dirs,
                        Format format) {
  const PlannedPoint pp = plan_point(inv, dirs);
  const sim::Device& device = pp.inputs.devices.front();
  const sim::BudgetPlan& plan = pp.plan;
  const sim_io::Row row = pp.row();
  std::string text;
  const sim::TrainSetup setup = sim::resolve_setup(pp.inputs.models.front(), pp.point.setup);
  const sim::ImplSpec* impl = setup.impl ? &sim::spec(*setup.impl, setup.impl_version) : nullptr;
  const sim::NativeChoice native =
      impl ? sim::best_native(pp.graph, device, plan.budget_bytes, impl->native_ac)
           : sim::NativeChoice{};
  // planner6 (issue 15): the same section in CSV and JSON.
  NativeSummary summary;
  if (impl) {
    summary.impl = fmt::format("{}@{}", impl->name, impl->version_key);
    summary.candidates = native.candidates;
    summary.status = !native.searched ? "not searched" : native.best.found ? "found" : "none fits";
    if (native.best.found) {
      const sim::Result& f = native.best.result;
      summary.strategy = native.best.strategy.canonical();
      summary.setting = native.config;
      summary.peak_bytes = sim::budget_peak_bytes(f);
      summary.recompute_time_ns = f.recompute_time_ns;
      summary.offload_stall_ns = f.offload_stall_ns;
      summary.recompute_flops = f.recompute_flops;
    }
  }
  switch (format) {
    case Format::kTable:
      // plan_budget has found the best fixed strategy already (issue 15: BudgetPlan::fixed).
      text = render_table(pp.axes.models.front(), device, setup, plan, plan.fixed, impl, native);
      break;
    case Format::kCsv: text = plan_csv(row, summary); break;
    case Format::kJson: text = plan_json(row, summary); break;
  }
  return text;
}

int cmd_plan(const Invocation& inv) {
  // pplan (issue 15): pipelines and gradient accumulation are planned per stage.
  if (is_pipeline_plan(inv)) return cmd_plan_pipeline(inv);
  const Format format =
      cli_common::parse_format(inv.flags.format, "table|csv|json", Format::kTable);
  const std::string text = plan_output(inv, cli_common::search_dirs(), format);
  Output out(inv.flags.output);
  out.write(text);
  out.commit();
  return 0;
}

}  // namespace actsim_cli
