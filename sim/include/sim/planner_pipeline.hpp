// The planner of `budget:<bytes>` for pipelines and gradient accumulation (issue 15; pplan):
// --pp p > 1 or --num-microbatches N > 1, simulated per stage by sim::simulate_pipeline.
//
// Stage i holds f_i micro-batches at once (sim::in_flight: 1F1B min(N, p - i)), so its peak is
// one micro-batch's peak plus (f_i - 1) stashes (sim::in_flight_bytes): a plan that keeps more per
// block costs f_i times over, and the right plan differs per stage (stage 0 holds p micro-batches,
// the last one). Each stage is planned on its own graph (stages 0, the inner ones and p - 1 are
// built as simulate_pipeline builds them), and the plan is one strategy per stage.
//
// Per stage, with the chain model of its graph (sim::probe_chain; H = the blocks' held bytes, the
// model's stash less the non-block part sigma0 measured by the probe of `none`):
//   stage peak(P) = model peak(P) + extra(H(P)),  extra(H) = in-flight stash less one.
// For stash bounds lo <= hi the DP (sim::solve_chain) is solved on a copy of the model whose head
// term forces H <= hi, at the budget lowered by extra(lo): with lo = hi = S its plan fits (model)
// and is the least-cost one with H <= S; with lo < hi its cost (or the DP's own lower bound) is a
// lower bound on every plan whose H lies in [lo, hi], since extra grows with H. A branch and bound
// over [0, H(none)] splits the interval of least bound at its middle, solves the middle point
// (a plan, an upper bound) and both halves (bounds), and stops when no interval's bound is below
// the best plan found (then that plan is the model's optimum: StagePlan::lower_bound equals
// model_cost), when intervals are one DP slot wide at the finest slot allowed (an interval one slot
// wide is re-solved at a slot 64 times finer, at least 4 KiB, while the table stays within
// kMaxSlots and kMaxCells), or after kMaxStageCells DP cells: then
// lower_bound is what is proven, and the plan at each such interval's hi is solved too, so that
// the best plan found costs at most the optimum for the budget lowered by
// max(extra(hi) - extra(lo)) over them (StagePlan::gap_bytes). Every plan found is simulated (sim::simulate_plan on the
// stage's graph) and kept only if its stage peak (simulated peak + in-flight stash) fits; one
// over is re-solved at a budget lowered by its excess (bounded rounds). The fixed strategies
// (sim::fixed_strategies) are candidates on every stage too (every:k and block:k where the chain
// model puts the stage peak within 1/kFixedModelMargin of the budget; planner8: simulated in
// order of model cost while one could still win the stage, all of them once a simulated cost
// differs from the model's), so no stage's plan costs more than the best fixed strategy that
// fits it. The search runs on two views, as plan_budget's:
// without the offload options (whose device bytes and stalls the model sees only roughly), then
// the whole model, whose bound is reported. The chosen plans are verified together by
// simulate_pipeline: every stage's simulated peak (budget_peak_bytes) is within the budget, or
// the planner throws rather than return an unverified plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/device.hpp"
#include "sim/model.hpp"
#include "sim/pipeline.hpp"
#include "sim/planner.hpp"
#include "sim/setup.hpp"
#include "sim/simulate.hpp"
#include "sim/strategy.hpp"

namespace sim {

// every:k and block:k are simulated on a stage only where the chain model's stage peak is at
// most the budget plus budget / kFixedModelMargin (the others are taken not to fit).
inline constexpr int64_t kFixedModelMargin = 16;

// The most DP table cells ((blocks + 1) x slots per solve) the branch and bound over the stash
// bound spends on one view of one stage; where it stops, the stage's lower_bound is the least of
// the intervals left. Short stages are searched to the end; at 125 blocks and ~10^4 slots it
// allows about a dozen solves.
inline constexpr int64_t kMaxStageCells = int64_t{1} << 24;

struct StagePlan {
  int64_t stage = 0;
  int64_t in_flight = 1;
  Strategy strategy;          // stage-local block indices (custom:, or the fixed strategy)
  std::string source;         // "DP" or "fixed <strategy>"
  Cost cost;                  // recompute time plus offload stall, FLOPs (one micro-batch)
  int64_t peak_bytes = 0;     // the stage's simulated peak with its in-flight stash
  // Under the chain model (offload options aside): the least cost of a DP plan found, and a
  // proven lower bound on every plan's; equal, the DP's plan is the model's optimum.
  Cost model_cost;
  Cost lower_bound;
  // and model_cost is at most the optimum for the budget less gap_bytes (0 when proven equal).
  int64_t gap_bytes = 0;
  bool model_optimal = true;  // the chosen plan's DP solve was exact in bytes (solve_chain)
};

struct PipelinePlan {
  int64_t budget_bytes = 0;
  std::vector<StagePlan> stages;
  std::vector<Strategy> per_stage;  // stages[i].strategy
  Strategy strategy;                // custom: over all the model's blocks, stage-major (global)
  PipelineResult result;            // simulate_pipeline of per_stage
  // The fixed strategy (one for every stage) with the least recompute summed over stages whose
  // every stage fits; found = false when none does.
  bool fixed_found = false;
  Strategy fixed;
  PipelineResult fixed_result;
  int64_t simulations = 0;  // stage simulations (probes not counted; repeats cached)
  int64_t dp_solves = 0;
  bool proven = true;       // every stage's model_cost equals its lower_bound
  int64_t gap_bytes = 0;    // the largest StagePlan::gap_bytes
};

// The plan of `budget:<bytes>` for setup.pp > 1 or setup.microbatches > 1 (also works for
// pp = N = 1: one stage, no in-flight stash). Throws ConfigError("--strategy", "budget", ...)
// naming the stage and its smallest feasible peak found when no plan fits.
PipelinePlan plan_pipeline(const ModelConfig& model, const TrainSetup& setup, const Device& device,
                           int64_t budget_bytes, const SimOptions& options = {});

// Stage strategies (stage-local, n_blocks each) joined as one custom: spec over p * n_blocks
// global blocks, stage-major: what stage_strategies splits back.
Strategy join_stage_strategies(const std::vector<Strategy>& per_stage, int64_t n_blocks);

}  // namespace sim
