#include "sim/pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "comm.hpp"
#include "utilization.hpp"  // cpfp8
#include "sim/error.hpp"
#include "sim/planner.hpp"           // pplan
#include "sim/planner_pipeline.hpp"  // pplan
#include "workspace.hpp"

namespace sim {

int64_t in_flight(int64_t stage, int64_t p, int64_t m, int64_t n) {
  if (m <= 1) return std::min(n, p - stage);
  return std::min(n * m, 2 * (p - stage - 1) + (m - 1) * p + 1);
}

namespace {

// Adds `extra` stashed bytes (other micro-batches' activations) to a stage's steady-state
// result: they are live during the whole of this micro-batch's forward and backward.
void add_stash(Result& r, int64_t extra) {
  const char* f = "in-flight activation bytes";
  r.peak_allocated_bytes = checked_add(r.peak_allocated_bytes, extra, f);
  r.peak_requested_bytes = checked_add(r.peak_requested_bytes, extra, f);
  r.allocator_allocated_peak_bytes = checked_add(r.allocator_allocated_peak_bytes, extra, f);
  r.peak_reserved_bytes = checked_add(r.peak_reserved_bytes, extra, f);
  r.activation_peak_bytes = checked_add(r.activation_peak_bytes, extra, f);
  r.peak_breakdown[static_cast<int>(Category::kActivations)] += extra;
  r.headroom_bytes -= extra;
  r.fits = r.headroom_bytes >= 0;
}

}  // namespace

int64_t in_flight_bytes(const Result& one, int64_t stage, int64_t p, int64_t m, int64_t n) {
  const int64_t f = in_flight(stage, p, m, n);
  const char* what = "in-flight activation bytes";
  if (m <= 1) return checked_mul(f, one.stash_bytes, what);
  // Interleaved: the stage's blocks form m chunks of equal stash; the non-block part (the
  // embedding's or the head's) is held per micro-batch as in 1F1B.
  const int64_t chunk = one.stash_block_bytes / m;
  return checked_add(checked_mul(f, chunk, what),
                     checked_mul(std::min(n, p - stage), one.stash_bytes - one.stash_block_bytes,
                                 what),
                     what);
}

PipelineResult simulate_pipeline(const ModelConfig& model, const TrainSetup& setup,
                                 const Device& device, const Strategy& strategy,
                                 const SimOptions& options) {
  validate(device);
  validate(model);
  validate(model, setup);
  // pplan (issue 15): budget: is planned per stage (sim/planner_pipeline.hpp); a custom: spec
  // over all the model's blocks is split per stage (stage_strategies).
  if (strategy.kind == StrategyKind::kBudget)
    return plan_pipeline(model, setup, device, strategy.k, options).result;
  return simulate_pipeline(model, setup, device,
                           stage_strategies(strategy, model.layers, setup.pp), options);
}

PipelineResult simulate_pipeline(const ModelConfig& model, const TrainSetup& setup,
                                 const Device& device, const std::vector<Strategy>& per_stage,
                                 const SimOptions& options) {
  validate(device);
  validate(model);
  validate(model, setup);
  const int64_t p = setup.pp, m = setup.vpp, n = setup.microbatches;
  if (static_cast<int64_t>(per_stage.size()) != p)
    throw std::logic_error("simulate_pipeline: one strategy per stage expected");
  for (const Strategy& s : per_stage)
    if (s.kind == StrategyKind::kBudget)
      throw Unsupported("--strategy", "strategy", "budget: as one stage's strategy");
  PipelineResult out;
  Workspace ws;
  int64_t slowest_ns = 0, optimizer_ns = 0, dp_tail_ns = 0;
  int64_t fwd = 0, bwd = 0, rec = 0, fp8 = 0;  // cpfp8: fp8
  // A stage's graph depends only on whether it has the embedding (stage 0) and the head (stage
  // p - 1): the middle stages are one simulation, reused (their in-flight counts differ).
  // pplan: middle results are reused per strategy (stages may run different plans).
  std::vector<std::pair<std::string, Result>> middle;
  std::optional<Graph> inner_graph;
  for (int64_t i = 0; i < p; ++i) {
    StageResult st;
    st.stage = i;
    st.blocks = model.layers / p;
    const bool inner = i > 0 && i < p - 1;
    const Strategy& strategy = per_stage[static_cast<size_t>(i)];
    const std::string key = strategy.canonical();
    const auto hit = std::find_if(middle.begin(), middle.end(),
                                  [&](const auto& e) { return e.first == key; });
    if (inner && hit != middle.end()) {
      st.result = hit->second;
    } else if (inner && inner_graph) {
      st.result = simulate_plan(*inner_graph, resolve(strategy, inner_graph->n_blocks), device,
                                options, ws);
      middle.emplace_back(key, st.result);
    } else {
      Graph g;
      build_stage_graph(model, setup, device, i, g);
      st.result = simulate_plan(g, resolve(strategy, g.n_blocks), device, options, ws);
      if (inner) {
        middle.emplace_back(key, st.result);
        inner_graph = std::move(g);
      }
    }
    st.in_flight = in_flight(i, p, m, n);
    st.stash_bytes = st.result.stash_bytes;
    st.in_flight_bytes = in_flight_bytes(st.result, i, p, m, n);
    add_stash(st.result, st.in_flight_bytes - st.stash_bytes);
    const Result& r = st.result;
    // Per micro-batch: the step less the optimizer and the once-per-step data-parallel tail.
    slowest_ns = std::max(slowest_ns, r.step_time_ns - r.optimizer_time_ns - r.dp_comm_exposed_ns);
    dp_tail_ns = std::max(dp_tail_ns, r.dp_comm_exposed_ns);
    optimizer_ns = std::max(optimizer_ns, r.optimizer_time_ns);
    fwd = checked_add(fwd, checked_mul(r.fwd_flops, n, "fwd_flops"), "fwd_flops");
    bwd = checked_add(bwd, checked_mul(r.bwd_flops, n, "bwd_flops"), "bwd_flops");
    rec = checked_add(rec, checked_mul(r.recompute_flops, n, "recompute_flops"), "recompute_flops");
    fp8 = checked_add(fp8, checked_mul(r.fp8_model_flops, n, "fp8_model_flops"), "fp8_model_flops");
    out.stages.push_back(std::move(st));
  }
  for (size_t i = 1; i < out.stages.size(); ++i)
    if (out.stages[i].result.peak_reserved_bytes >
        out.stages[static_cast<size_t>(out.worst)].result.peak_reserved_bytes)
      out.worst = static_cast<int64_t>(i);

  // The whole step: N micro-batches through the slowest stage plus the pipeline bubble of
  // (p - 1) / m micro-batch times (Narayanan et al. 2021 §2.2: bubble fraction (p - 1) / (m N)),
  // then the slowest stage's optimizer step. Each micro-batch also sends its activations
  // [s, b, h] forward and their gradient back between stages (Megatron's p2p send/recv on the
  // critical path of 1F1B): per micro-batch two transfers, over NVLink when the stages share a
  // node, else the network (stages are the outermost rank dimension).
  if (p > 1) {
    const int64_t act = checked_mul(checked_mul(setup.seq, setup.micro_batch, "p2p bytes"),
                                    checked_mul(model.hidden, 2, "p2p bytes"), "p2p bytes") /
                        (setup.sp ? setup.tp : 1) / setup.cp;  // feat: a cp rank's share
    const int64_t stride = setup.tp * setup.cp * setup.dp;
    const CommGroup pair = comm_group(2, stride, options.gpus_per_node);
    const double sec = 2 * collective_seconds(Collective::kSendRecv, act, pair, device);
    slowest_ns = checked_add(slowest_ns, static_cast<int64_t>(std::llround(sec * 1e9)),
                             "step_time_ns");
  }
  Result s = out.stages[static_cast<size_t>(out.worst)].result;
  s.pp_stage = out.worst;
  s.pp_in_flight = out.stages[static_cast<size_t>(out.worst)].in_flight;
  const double micro = static_cast<double>(n) + static_cast<double>(p - 1) / static_cast<double>(m);
  s.step_time_ns = static_cast<int64_t>(std::llround(micro * static_cast<double>(slowest_ns))) +
                   dp_tail_ns + optimizer_ns;
  s.fwd_flops = fwd;
  s.bwd_flops = bwd;
  s.recompute_flops = rec;
  s.model_flops = checked_add(fwd, bwd, "model_flops");
  s.fp8_model_flops = fp8;  // cpfp8
  for (int64_t* t : {&s.fwd_time_ns, &s.bwd_time_ns, &s.recompute_time_ns, &s.comm_time_ns,
                     &s.offload_stall_ns})
    *t = checked_mul(*t, n, "step time");  // the worst stage's, over its N micro-batches
  if (s.step_time_ns > 0) {
    const double step_s = static_cast<double>(s.step_time_ns) * 1e-9;
    const double gpus = static_cast<double>(p);  // FLOPs are summed over the p stages
    s.tokens_per_s = static_cast<double>(n * setup.micro_batch * setup.seq) / step_s;
    s.tokens_per_s_per_gpu = s.tokens_per_s / static_cast<double>(setup.tp * setup.cp * p);
    detail::set_utilization(s, step_s, gpus, device, resolved_precision(setup));  // cpfp8
  }
  out.summary = std::move(s);
  return out;
}

}  // namespace sim
