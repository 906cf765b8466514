// What a code base's own checkpointing settings run on a pipeline (sim/planner_native.hpp;
// planner6, issue 15): every setting as a stage-local strategy on every stage, each stage's peak
// with its in-flight stash as plan_pipeline counts it.
#include <map>
#include <memory>
#include <optional>

#include "sim/error.hpp"
#include "sim/pipeline.hpp"
#include "sim/planner_native.hpp"

namespace sim {

NativePipelineChoice best_native_pipeline(const ModelConfig& model, const TrainSetup& setup,
                                          const Device& device, int64_t budget,
                                          std::span<const NativeAc> options,
                                          const SimOptions& sim_options) {
  NativePipelineChoice out;
  const int64_t p = setup.pp;
  // The distinct stage graphs, as simulate_pipeline builds them: 0 first, 1 inner, 2 last.
  std::map<int, std::unique_ptr<Graph>> graphs;
  const auto key_of = [p](int64_t stage) { return stage == 0 ? 0 : stage == p - 1 ? 2 : 1; };
  const auto graph_of = [&](int64_t stage) -> const Graph& {
    std::unique_ptr<Graph>& g = graphs[key_of(stage)];
    if (!g) {
      g = std::make_unique<Graph>();
      build_stage_graph(model, setup, device, stage, *g);
    }
    return *g;
  };
  const int64_t nb = graph_of(0).n_blocks;
  out.stages.resize(static_cast<size_t>(p));
  for (int64_t i = 0; i < p; ++i) {
    out.stages[static_cast<size_t>(i)].stage = i;
    out.stages[static_cast<size_t>(i)].in_flight = in_flight(i, p, setup.vpp, setup.microbatches);
  }
  if (nb > kNativeSearchBlocks || options.empty()) return out;
  out.searched = true;
  Workspace ws;
  for (NativeCandidate& cand : native_candidates(options, nb)) {
    // One simulation per distinct stage graph; nullopt where the graph refuses the strategy.
    std::map<int, std::optional<Result>> sims;
    const auto result_at = [&](int64_t stage) -> const std::optional<Result>& {
      const int key = key_of(stage);
      auto it = sims.find(key);
      if (it != sims.end()) return it->second;
      std::optional<Result> r;
      const Graph& g = graph_of(stage);
      try {
        r = simulate_plan(g, resolve(cand.strategy, g.n_blocks), device, sim_options, ws);
      } catch (const ConfigError&) {
        // not simulable on this stage (as best_native skips it)
      }
      return sims.emplace(key, std::move(r)).first->second;
    };
    ++out.candidates;
    Cost total;
    int64_t worst = 0;
    bool every = true;
    for (int64_t i = 0; i < p; ++i) {
      const std::optional<Result>& r = result_at(i);
      if (!r) {
        every = false;
        continue;
      }
      // The stage peak as plan_pipeline's Planner::stage_peak counts it.
      const int64_t peak = budget_peak_bytes(*r) +
                           in_flight_bytes(*r, i, p, setup.vpp, setup.microbatches) - r->stash_bytes;
      if (peak > budget) {
        every = false;
        continue;
      }
      const Cost c = cost_of(*r);
      total = {total.time_ns + c.time_ns, total.flops + c.flops};
      worst = std::max(worst, peak);
      NativeStageChoice& s = out.stages[static_cast<size_t>(i)];
      if (!s.found || c < s.cost) {  // ties: the first in listing order
        s.found = true;
        s.strategy = cand.strategy;
        s.config = cand.config;
        s.cost = c;
        s.peak_bytes = peak;
      }
    }
    if (!every || (out.found && !(total < out.cost))) continue;
    out.found = true;
    out.strategy = cand.strategy;
    out.config = cand.config;
    out.cost = total;
    out.worst_peak_bytes = worst;
    for (int64_t i = 0; i < p; ++i) {
      const Result& r = *result_at(i);
      NativeStageChoice& s = out.stages[static_cast<size_t>(i)];
      s.uniform_cost = cost_of(r);
      s.uniform_peak_bytes =
          budget_peak_bytes(r) + in_flight_bytes(r, i, p, setup.vpp, setup.microbatches) - r.stash_bytes;
    }
  }
  return out;
}

}  // namespace sim
