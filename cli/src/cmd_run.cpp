// actsim run: each configuration simulated in order and printed as a table (human units), CSV
// rows or a JSON array. Unlike sweep, a configuration that cannot be simulated is bad input: the
// first one ends the command with its one-line error (exit status 2) and no output.
#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "commands.hpp"
#include "error_bands.hpp"
#include "format.hpp"
#include "sim/error.hpp"
#include "sim/impl.hpp"
#include "sim/pipeline.hpp"
#include "sim/planner.hpp"
#include "sim/planner_pipeline.hpp"  // pplan
#include "sim/simulate.hpp"
#include "sweep.hpp"

namespace actsim_cli {
namespace {

using cli_common::Format;

constexpr int kExplainItems = 8;

// Graphs of the configurations seen so far, so that strategies of one (model, device, setup)
// share one graph. Bounded: cleared when it grows past kCapacity.
class GraphCache {
 public:
  const sim::Graph& get(const cli_common::Inputs& in, const cli_common::Point& p) {
    const Key key{p.model, p.device, p.setup_index};
    auto it = graphs_.find(key);
    if (it != graphs_.end()) return it->second;
    if (graphs_.size() >= kCapacity) graphs_.clear();
    sim::Graph g = sim::build_graph(in.models[static_cast<std::size_t>(p.model)], p.setup,
                                    in.devices[static_cast<std::size_t>(p.device)]);
    return graphs_.emplace(key, std::move(g)).first->second;
  }

 private:
  static constexpr std::size_t kCapacity = 16;
  using Key = std::tuple<int32_t, int32_t, int64_t>;
  std::map<Key, sim::Graph> graphs_;
};

std::string setup_line(const sim::TrainSetup& s, std::string_view family) {
  const std::string dropout =
      s.dropout ? fmt::format("dropout {}", *s.dropout) : std::string("dropout from config");
  // The implementation first: it decides the op list and every default after it.
  // implver: the release (--impl NAME@VERSION) and, per family, the modeling file read
  const sim::ImplSpec* sp = s.impl ? &sim::spec(*s.impl, s.impl_version) : nullptr;
  const std::string impl =
      sp ? fmt::format("{}@{} ({} {}); ", sp->name, sp->version_key, sp->code,
                       sim::release_name(*sp, family))
         : std::string();
  // implver: the optimizer, and whose default it is when it is the release's
  const sim::Optimizer opt = sim::resolved_optimizer(s);
  const bool eager = sim::resolved_attention(s) == sim::AttentionKind::kStandard;
  const std::string optimizer =
      sp && opt == (eager ? sp->optimizer_eager : sp->optimizer)
          ? fmt::format("optimizer {} ({} default: {})", sim::name(opt), sp->name,
                        sp->optimizer_source)
          : fmt::format("optimizer {}", sim::name(opt));
  // exec10: zero_grad's set_to_none, and whose default it is when the release's
  const bool stn = sim::resolved_set_to_none(s);
  const std::string set_to_none =
      sp && stn == sp->set_to_none && !sp->set_to_none_source.empty()
          ? fmt::format("; set-to-none {} ({} default: {})", stn ? "on" : "off", sp->name,
                        sp->set_to_none_source)
          : fmt::format("; set-to-none {}", stn ? "on" : "off");
  return fmt::format(
      "{}{} profile, {}, {} attention, {}; micro-batch {}, seq {}; tp {}, sp {}, dp {}, ZeRO {}; "
      "{}, {} allocator{}",
      impl, sim::name(s.profile), sim::name(sim::resolved_precision(s)), sim::name(sim::resolved_attention(s)),
      dropout, s.micro_batch, s.seq, s.tp, s.sp ? "on" : "off", s.dp, s.zero,
      optimizer, sim::name(s.allocator),
      s.pp > 1 || s.microbatches > 1
          ? fmt::format("; pp {}, vpp {}, {} micro-batches", s.pp, s.vpp, s.microbatches)
          : std::string()) +
         set_to_none +
         // issue 13's features, when used
         (s.cp > 1 ? fmt::format("; cp {}", s.cp) : std::string()) +
         (s.ep > 1 ? fmt::format("; ep {}", s.ep) : std::string()) +
         (s.fp8 != sim::Fp8Recipe::kOff ? fmt::format("; fp8 {}", sim::name(s.fp8)) : std::string()) +
         // time5: the norm kernel when not the model's own (torchtitan's fused Triton RMSNorm)
         (s.norm_kernel != sim::NormKernel::kDefault
              ? fmt::format("; norm kernel {} (fused RMSNorm, norms.py)", sim::name(s.norm_kernel))
              : std::string()) +
         // fp8sac (issue 10): torch.compile of the blocks, and what of it is modeled
         (s.compile ? std::string("; torch.compile (modeled: SAC region saves, fused amax, per-block min-cut partition)")
                    : std::string()) +
         // time6: Megatron's --no-gradient-accumulation-fusion
         (!s.grad_accum_fusion ? std::string("; no gradient-accumulation fusion (wgrad, then add)")
                               : std::string()) +
         // te_norm (issue 10): Megatron's fused (torch.compile'd) cross entropy
         (s.cross_entropy_loss_fusion
              ? std::string("; fused cross entropy (fused_cross_entropy.py, compiled)")
              : std::string()) +
         // time7: Megatron's --deterministic-mode
         (s.deterministic ? std::string("; deterministic mode (NaN fill of TE's new tensors)")
                          : std::string()) +
         // moetp (issue 13): Megatron's --moe-shared-expert-overlap
         (s.moe_shared_expert_overlap ? std::string("; shared experts overlapped with the dispatcher")
                                      : std::string()) +
         // tece (issue 10): Megatron's --transformer-impl local
         (s.local_spec ? std::string("; local layer spec (no Transformer Engine)") : std::string()) +
         (s.lora_rank > 0 ? fmt::format("; LoRA rank {} on {}{}{}", s.lora_rank,
                                        sim::lora_targets_name(s.lora_targets),
                                        s.qlora ? ", QLoRA (NF4 base)" : "",
                                        // feat13: PEFT's lora_dropout
                                        s.lora_dropout > 0.0
                                            ? fmt::format(", lora_dropout {}", s.lora_dropout)
                                            : std::string())
                          : std::string());
}

// Per-stage figures of a pipeline run (the summary above them is the worst stage's memory).
std::string render_stages(const sim::PipelineResult& pr, const sim::TrainSetup& s) {
  TextTable t({"stage", "blocks", "in flight", "stash per micro-batch", "in-flight stash",
               "peak", "fits"},
              "rrrrrrl");
  for (const sim::StageResult& st : pr.stages) {
    t.add({fmt::format("{}{}", st.stage, st.stage == pr.worst ? " (worst)" : ""),
           fmt::format("{}", st.blocks), fmt::format("{}", st.in_flight),
           fmt::format("{}", Bytes{st.stash_bytes}), fmt::format("{}", Bytes{st.in_flight_bytes}),
           fmt::format("{}", Bytes{st.result.peak_reserved_bytes}),
           st.result.fits ? "fits" : "DOES NOT FIT"});
  }
  const std::string schedule =
      s.vpp > 1 ? fmt::format("interleaved, {} chunks per stage (in flight counts chunk "
                              "micro-batches)", s.vpp)
                : std::string("1F1B");
  return fmt::format("\nPipeline: {} stages, {} micro-batches, {}\n", s.pp, s.microbatches,
                     schedule) +
         t.render("  ");
}

std::string render_table(const sim_io::Row& row, const sim::ModelConfig& model,
                         const sim::Device& device, const std::vector<sim::PeakItem>& items,
                         const std::vector<ErrorBand>& bands) {
  const sim::Result& r = *row.result;
  const auto ms = [](int64_t ns) { return human_time_ns(ns); };
  std::string out;
  out += fmt::format("== {} on {}, strategy {} ==\n", row.key.model, row.key.device,
                     row.key.strategy);
  out += fmt::format("   {}\n", setup_line(row.key.setup, model.family));
  if (row.key.setup.impl && row.key.setup.dp > 1)  // what data parallelism means in that code
    out += fmt::format("   --dp {} --zero {}: {}{}\n", row.key.setup.dp, row.key.setup.zero,
                       sim::spec(*row.key.setup.impl, row.key.setup.impl_version).zero_means,
                       // feat3: resolve_setup's default under fsdp2-bf16
                       row.key.setup.zero_default && row.key.setup.zero == 3
                           ? " (--zero 3 by default: FSDP2 always shards)"
                           : "");
  if (row.key.setup.impl) {  // hfds: the regime the code base runs under --dp, and why
    const sim::ImplSpec& sp = sim::spec(*row.key.setup.impl, row.key.setup.impl_version);
    if (sp.dp_precision && row.key.setup.precision == sp.dp_precision)
      out += fmt::format("   precision {}: {}\n", sim::name(*sp.dp_precision),
                         sp.dp_precision_source);
  }
  // implhf: a classification head (from the config's architectures) is named; LM heads are the
  // family's default
  const std::string head =
      sim::classification_head(model)
          ? fmt::format(", {} head ({} labels)", sim::head_name(model.head), model.num_labels)
          : std::string();
  // Under LoRA the base is frozen: params_per_rank counts what trains (the adapters).
  out += fmt::format("   {} parameters ({} per rank{}), {} blocks, {} model{}\n",
                     human_count(r.params), human_count(r.params_per_rank),
                     row.key.setup.lora_rank > 0 ? " trainable: the LoRA adapters" : "", r.layers,
                     model.family.empty() ? std::string("?") : model.family, head);
  if (sim::is_moe(model)) {  // moe: the routing assumed, stated
    const sim::TrainSetup& s = row.key.setup;
    const std::string routing =
        s.moe_imbalance == 1.0
            ? std::string("balanced routing (--moe-imbalance 1)")
            : fmt::format("the hottest expert at {:.2f}x the mean tokens, its rank simulated",
                          s.moe_imbalance);
    out += fmt::format("   MoE: {} experts ({} per rank, --ep {}), top-{}, {}, {}\n",
                       model.experts, model.experts / s.ep, s.ep, model.experts_per_token, routing,
                       s.moe_capacity ? fmt::format("capacity factor {:.2f} (drop and pad)",
                                                    *s.moe_capacity)
                                      : std::string("dropless"));
    // mla5: Megatron's load-balancing loss, stated where the code base has the knob
    if (s.impl && sim::spec(*s.impl, s.impl_version).moe == sim::MoeDispatch::kAllToAll)
      out += s.moe_aux_loss_coeff > 0.0
                 ? fmt::format("   MoE aux loss: coefficient {} (--moe-aux-loss-coeff; "
                               "router.py aux_loss)\n", s.moe_aux_loss_coeff)
                 : std::string("   MoE aux loss: none (--moe-aux-loss-coeff 0, Megatron's "
                               "default)\n");
    // etp (issue 13): expert tensor parallelism, stated where it splits the experts
    if (sim::resolved_etp(s) > 1)
      out += fmt::format("   MoE expert TP: --etp {}{}: each expert's width {} -> {} per rank, the "
                         "received tokens all-gathered and the outputs reduce-scattered over it\n",
                         sim::resolved_etp(s), s.etp > 0 ? "" : " (--tp, Megatron's default)",
                         model.expert_ffn, model.expert_ffn / sim::resolved_etp(s));
  }

  const std::string when =
      fmt::format("at {} ({} phase), t = {}", r.peak_op.empty() ? "?" : r.peak_op,
                  sim::phase_name(r.peak_phase), ms(r.peak_t_ns));
  const bool caching = row.key.setup.allocator != sim::AllocatorKind::kExact;
  TextTable memory({}, "lrl");
  if (caching) {
    // DESIGN.md §3: under the caching allocator the peak is its allocated blocks; the exact
    // ledger's peak (and its time, op and breakdown) is the requested one.
    memory.add({"peak reserved", fmt::format("{}", Bytes{r.peak_reserved_bytes}),
                "segments the caching allocator holds (max_memory_reserved)"});
    memory.add({"peak allocated", fmt::format("{}", Bytes{r.peak_allocated_bytes}),
                "blocks in use, rounded and unsplit (max_memory_allocated)"});
    memory.add({"fragmentation", fmt::format("{}", Bytes{r.peak_reserved_bytes -
                                                         r.peak_allocated_bytes}),
                "peak reserved - peak allocated"});
    memory.add({"peak requested", fmt::format("{}", Bytes{r.peak_requested_bytes}), when});
  } else {
    memory.add({"peak allocated", fmt::format("{}", Bytes{r.peak_allocated_bytes}), when});
  }
  // The error the simulator showed against measurements of this implementation and family
  // (models/error-bands.csv, from validation/).
  memory.add({"validated", row.key.setup.impl ? "" : "-",
              row.key.setup.impl
                  ? describe_band(bands, sim::name(*row.key.setup.impl), model.family)
                  : std::string("the paper profile: Korthikanti et al.'s closed form")});
  memory.add({"peak less persistent", fmt::format("{}", Bytes{r.activation_peak_bytes}),
              "activations, grads of activations, casts and temporaries at the peak"});
  memory.add({"activations per layer", fmt::format("{}", Bytes{r.activation_bytes_per_layer}),
              fmt::format("largest of {} blocks, live at the end of forward",
                          r.activation_bytes_per_block.size())});
  memory.add({"weights", fmt::format("{}", Bytes{r.weights_bytes}), ""});
  memory.add({"gradients", fmt::format("{}", Bytes{r.grads_bytes}), ""});
  memory.add({"optimizer state", fmt::format("{}", Bytes{r.optimizer_bytes}), ""});
  memory.add({"workspace", fmt::format("{}", Bytes{r.workspace_bytes}), ""});
  out += "\nMemory per GPU\n" + memory.render("  ");

  TextTable breakdown({}, "lrr");
  for (int i = 0; i < sim::kCategoryCount; ++i) {
    const int64_t bytes = r.peak_breakdown[static_cast<std::size_t>(i)];
    if (bytes == 0) continue;
    const double share =
        r.peak_requested_bytes > 0
            ? static_cast<double>(bytes) / static_cast<double>(r.peak_requested_bytes)
            : 0.0;
    breakdown.add({std::string(sim::category_name(static_cast<sim::Category>(i))),
                   fmt::format("{}", Bytes{bytes}), percent(share)});
  }
  out += "\nBreakdown at the peak (categories with bytes)\n" + breakdown.render("  ");

  const int64_t step_flops = r.fwd_flops + r.bwd_flops + r.recompute_flops;
  const double recompute_share =
      step_flops > 0 ? static_cast<double>(r.recompute_flops) / static_cast<double>(step_flops)
                     : 0.0;
  TextTable work({"", "matmul FLOPs", "time", ""}, "lrrl");
  work.add({"forward", human_flops(r.fwd_flops), ms(r.fwd_time_ns), ""});
  work.add({"backward", human_flops(r.bwd_flops), ms(r.bwd_time_ns), ""});
  work.add({"recompute", human_flops(r.recompute_flops), ms(r.recompute_time_ns),
            percent(recompute_share) + " of step FLOPs"});
  work.add({"optimizer", "", ms(r.optimizer_time_ns), ""});
  work.add({"tensor-parallel comm", "", ms(r.comm_time_ns), "on the critical path"});
  if (r.dp_comm_ns > 0)
    work.add({"data-parallel comm", "", ms(r.dp_comm_ns),
              fmt::format("{}, {} collectives; compute waited {} for it",
                          // ds3c: DeepSpeed ZeRO-3's all-gathers and reduce-scatters
                          r.ds3_gather_bytes > 0 ? "two NCCL streams" : "own stream",
                          r.dp_buckets, ms(r.comm_wait_ns))});
  if (r.ds3_gather_bytes > 0)  // ds3c (issue 10): DeepSpeed ZeRO-3's coordinator, replayed
    work.add({"  ZeRO-3 all-gathers", "", "",
              fmt::format("{} gathered in the step, {} of it by the recompute; at most {} "
                          "gathered at once",
                          human_bytes(r.ds3_gather_bytes), human_bytes(r.ds3_recompute_gather_bytes),
                          human_bytes(r.ds3_gathered_peak_bytes))});
  if (r.host_wait_ns > 0)
    work.add({"host-bound wait", "", ms(r.host_wait_ns),
              "GPU idle while eager PyTorch issues ops (host lane)"});
  if (r.offload_bytes > 0)
    work.add({"offload stall", "", ms(r.offload_stall_ns),
              fmt::format("compute waiting for copies back; {} each way over the host link, "
                          "pinned host peak {}",
                          human_bytes(r.offload_bytes), human_bytes(r.pinned_host_bytes))});
  work.add({"step", human_flops(step_flops), ms(r.step_time_ns),
            fmt::format("{} tokens/s ({} per GPU), MFU {}, HFU {}",
                        grouped(static_cast<int64_t>(r.tokens_per_s + 0.5)),
                        grouped(static_cast<int64_t>(r.tokens_per_s_per_gpu + 0.5)),
                        percent(r.mfu), percent(r.hfu))});
  // cpfp8 (issues 11/13): which peak MFU and HFU divide by (sim/src/utilization.cpp)
  work.add({"MFU, HFU peak", "", "",
            fmt::format("{:.1f} TFLOP/s per GPU, the device's dense {} peak (torchtitan's "
                        "get_peak_flops convention)",
                        r.mfu_peak_flops_per_s * 1e-12,
                        sim::resolved_precision(row.key.setup) == sim::Precision::kFp32 ? "fp32"
                                                                              : "16-bit")});
  if (r.fp8_model_flops > 0)
    work.add({"MFU, fp8 mixed peak", human_flops(r.fp8_model_flops), "",
              fmt::format("{}: these fp8 GEMM FLOPs at the dense fp8 peak {:.1f} TFLOP/s, the "
                          "rest at the 16-bit one",
                          percent(r.mfu_fp8_mixed), device.peak_fp8_flops_per_s * 1e-12)});
  out += "\nWork and time\n" + work.render("  ");

  // The fit is judged on reserved bytes under caching (equal to allocated under exact).
  const int64_t need = r.peak_reserved_bytes + r.cuda_context_bytes + r.comm_buffer_bytes;
  out += fmt::format("\nFit on {} ({} usable)\n", device.label.empty() ? device.name : device.label,
                     Bytes{r.device_bytes});
  out += fmt::format("  peak {}{} + CUDA context {} + comm buffers {} = {}: {}, headroom {}\n",
                     caching ? "reserved " : "", Bytes{r.peak_reserved_bytes},
                     Bytes{r.cuda_context_bytes},
                     Bytes{r.comm_buffer_bytes}, Bytes{need},
                     r.fits ? "fits" : "DOES NOT FIT", Bytes{r.headroom_bytes});

  if (!items.empty()) {
    TextTable explained({"bytes", "category", "what", "why"}, "rlll");
    for (const sim::PeakItem& item : items) {
      explained.add({fmt::format("{}", Bytes{item.bytes}),
                     std::string(sim::category_name(item.category)), item.what, item.why});
    }
    out += "\nThe peak explained: the largest storages live at the peak (persistent state is in "
           "the breakdown)\n";
    out += explained.render("  ");
  }
  return out;
}

}  // namespace

int cmd_run(const Invocation& inv) {
  const Format format =
      cli_common::parse_format(inv.flags.format, "table|csv|json", Format::kTable);
  const cli_common::Axes axes = cli_common::parse_axes(inv.flags);
  const int64_t total = cli_common::point_count(axes);
  const cli_common::Inputs inputs = cli_common::load_inputs(axes, cli_common::search_dirs());
  const std::vector<ErrorBand> bands =
      format == Format::kTable ? load_error_bands(cli_common::search_dirs())
                               : std::vector<ErrorBand>{};

  // Everything is rendered before the output is opened: an error leaves no file behind.
  std::string text;
  if (format == Format::kCsv) text += sim_io::csv_header();
  if (format == Format::kJson) text += "[\n";
  GraphCache graphs;
  std::vector<std::string> not_modeled;
  for (int64_t i = 0; i < total; ++i) {
    const cli_common::Point p = cli_common::point_at(axes, i);
    const sim::ModelConfig& model = inputs.models[static_cast<std::size_t>(p.model)];
    const sim::Device& device = inputs.devices[static_cast<std::size_t>(p.device)];
    const sim::Strategy& strategy = axes.strategies[static_cast<std::size_t>(p.strategy)];
    sim_io::Row row;
    row.row_index = i;
    row.key = cli_common::row_key(axes, inputs, p);
    // What each implementation's op lists leave out (ImplSpec::not_modeled), once per impl.
    if (const std::optional<sim::Impl> im = sim::resolve_setup(model, p.setup).impl) {
      const std::string line = fmt::format("under --impl {}: {}", sim::name(*im),
                                           sim::spec(*im).not_modeled);
      if (std::find(not_modeled.begin(), not_modeled.end(), line) == not_modeled.end())
        not_modeled.push_back(line);
    }
    std::vector<sim::PeakItem> items;
    std::string stages;
    if (p.setup.pp > 1 || p.setup.microbatches > 1) {
      // Pipeline: every stage simulated; the worst one's peak explained.
      // pplan (issue 15): budget: is planned per stage and the row shows the plan's custom:
      // spec (global block indices); a custom: spec over all blocks is split per stage.
      std::vector<sim::Strategy> per_stage;
      if (strategy.kind == sim::StrategyKind::kBudget) {
        sim::PipelinePlan planned = sim::plan_pipeline(model, p.setup, device, strategy.k,
                                                       cli_common::sim_options(axes));
        per_stage = std::move(planned.per_stage);
        row.key.strategy = planned.strategy.canonical();
      } else {
        per_stage = sim::stage_strategies(strategy, model.layers, p.setup.pp);
      }
      const sim::PipelineResult pr = sim::simulate_pipeline(model, p.setup, device, per_stage,
                                                             cli_common::sim_options(axes));
      row.result = pr.summary;
      const sim::StageResult& w = pr.stages[static_cast<std::size_t>(pr.worst)];
      if (format == Format::kTable) {
        sim::Graph g;
        sim::build_stage_graph(model, p.setup, device, pr.worst, g);
        const sim::Plan plan =
            sim::resolve(per_stage[static_cast<std::size_t>(pr.worst)], g.n_blocks);  // pplan
        items = sim::explain_peak(g, plan, w.result, kExplainItems);
        if (w.in_flight_bytes > w.stash_bytes) {
          sim::PeakItem extra;
          extra.bytes = w.in_flight_bytes - w.stash_bytes;
          extra.count = w.in_flight - 1;
          extra.what = "the other micro-batches in flight";
          extra.why = fmt::format("stashed for their backward ({} in flight on stage {})",
                                  w.in_flight, pr.worst);
          items.insert(items.begin(), extra);
        }
        stages = render_stages(pr, p.setup);
      }
    } else {
      const sim::Graph& graph = graphs.get(inputs, p);
      sim::Plan plan;
      if (strategy.kind == sim::StrategyKind::kBudget) {  // the row shows the planner's plan
        sim::BudgetPlan planned = sim::plan_budget(graph, device, strategy.k);
        plan = std::move(planned.plan);
        row.key.strategy = planned.strategy.canonical();
        row.result = std::move(planned.result);
      } else {
        plan = sim::resolve(strategy, graph.n_blocks);
        row.result = sim::simulate_plan(graph, plan, device, cli_common::sim_options(axes));
      }
      if (format == Format::kTable) items = sim::explain_peak(graph, plan, *row.result, kExplainItems);
    }
    switch (format) {
      case Format::kTable:
        if (i > 0) text += '\n';
        text += render_table(row, model, device, items, bands);
        text += stages;
        break;
      case Format::kCsv: text += sim_io::csv_row(row); break;
      case Format::kJson:
        if (i > 0) text += ",\n";
        text += sim_io::result_json(row);
        break;
    }
  }
  if (format == Format::kJson) text += "\n]\n";
  if (format == Format::kTable) {
    // Issue 11 (time2): overlapped compute is slowed by an average 18.9 % (sim/src/comm.hpp,
    // arXiv 2507.03114); what varies with kernel and collective beyond that is not modeled.
    text += "\nNot modeled: communication contending with compute for SMs and HBM beyond an "
            "average slowdown, NCCL's tree and NVLS algorithms (ring only), CPU-side optimizer "
            "work beyond op dispatch";
    for (const std::string& line : not_modeled) text += "; " + line;
    text += ".\n";
  }

  Output out(inv.flags.output);
  out.write(text);
  out.commit();
  return 0;
}

}  // namespace actsim_cli
