// Pipeline parallelism and gradient accumulation (DESIGN.md §3; issue 5): a step of N
// micro-batches over p stages with the 1F1B schedule, or Megatron's interleaved schedule with m
// model chunks per stage. Each stage is simulated for one micro-batch in the steady state; the
// micro-batches it holds in flight add their stash (what one micro-batch keeps between its forward
// and its backward) to that micro-batch's peak.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/simulate.hpp"

namespace sim {

struct StageResult {
  int64_t stage = 0;
  int64_t blocks = 0;          // blocks on this stage (L / p)
  int64_t in_flight = 1;       // micro-batches (1F1B) or model chunks (interleaved) held at once
  int64_t stash_bytes = 0;     // one micro-batch's bytes between its forward and its backward
  int64_t in_flight_bytes = 0; // what all in-flight micro-batches stash together
  Result result;               // the stage's steady-state step with the in-flight stash added
};

struct PipelineResult {
  std::vector<StageResult> stages;
  int64_t worst = 0;  // stage with the highest peak (the first of equals)
  Result summary;     // the worst stage's memory; time, FLOPs and throughput of the whole step
};

// Micro-batches (1F1B, m = 1) or chunk micro-batches (m > 1) that stage i holds at once:
// 1F1B min(N, p - i) (Narayanan et al. 2021 PipeDream-Flush; Korthikanti et al. 2022 §4.2.3);
// interleaved min(N m, 2 (p - i - 1) + (m - 1) p + 1) (Megatron-core schedules.py: warm-up
// micro-batches plus the one in the steady state).
int64_t in_flight(int64_t stage, int64_t p, int64_t m, int64_t n);

// Simulates every stage. Throws ConfigError for bad input.
PipelineResult simulate_pipeline(const ModelConfig& model, const TrainSetup& setup,
                                 const Device& device, const Strategy& strategy,
                                 const SimOptions& options = {});

// --- pplan (issue 15): per-stage strategies (the pipeline planner, sim/planner_pipeline.hpp) ---
// What stage `stage` holds for its in-flight micro-batches when one micro-batch's simulation is
// `one` (its stash_bytes and stash_block_bytes): 1F1B in_flight x stash; interleaved, m chunks of
// the block stash plus the non-block stash per micro-batch. The stage's peak is one micro-batch's
// peak plus this less one stash.
int64_t in_flight_bytes(const Result& one, int64_t stage, int64_t p, int64_t m, int64_t n);

// The strategy of each of the p stages (stage-local block indices) that `strategy` means: a
// custom: spec whose clauses end at block layers - 1 with p > 1 names global block indices,
// stage-major (stage i's local block j is global block i * (layers / p) + j) and is split at the
// stage boundaries (ConfigError "--strategy" when a checkpointed segment spans two stages); any
// other strategy applies to every stage alike (Megatron's --recompute-num-layers is per stage).
std::vector<Strategy> stage_strategies(const Strategy& strategy, int64_t layers, int64_t p);

// simulate_pipeline with one strategy per stage (stage-local block indices; size p).
PipelineResult simulate_pipeline(const ModelConfig& model, const TrainSetup& setup,
                                 const Device& device, const std::vector<Strategy>& per_stage,
                                 const SimOptions& options = {});

}  // namespace sim
