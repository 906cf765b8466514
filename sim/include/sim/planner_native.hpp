// What the code base's own checkpointing settings can run (ImplSpec::native_ac), for `actsim
// plan`: the planner's per-block plan mixes modes block by block, which none of the modeled code
// bases' options expresses (HF checkpoints every layer or none; torchtitan one mode for every
// block or every k-th; Megatron uniform groups or the first k blocks), so a user who will not
// write checkpointing code of their own needs the best plan their settings can say.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sim/device.hpp"
#include "sim/graph.hpp"
#include "sim/impl.hpp"
#include "sim/model.hpp"
#include "sim/planner.hpp"
#include "sim/setup.hpp"
#include "sim/simulate.hpp"
#include "sim/strategy.hpp"

namespace sim {

// Up to this many blocks the k of every:k, block:k and layer-sac:k is searched exhaustively (every
// real model here has at most 128 layers); deeper chains are not searched (NativeChoice::searched).
inline constexpr int64_t kNativeSearchBlocks = 256;

struct NativeChoice {
  bool searched = false;   // false: more than kNativeSearchBlocks blocks, nothing simulated
  FixedChoice best;        // least recompute time (then FLOPs, then listing order) that fits
  std::string config;      // the setting that runs best.strategy ("{k}" filled in)
  int64_t candidates = 0;  // strategies simulated
};

// The strategies `options` stand for on n blocks, in listing order: "every:k" for k = 2..n,
// "block:k" for k = 1..n-1, "layer-sac:k" for k = 2..n (k = 1 is `full` in each, and `full` is
// listed on its own where the code base has it), each with its setting.
struct NativeCandidate {
  Strategy strategy;
  std::string config;
};
std::vector<NativeCandidate> native_candidates(std::span<const NativeAc> options, int64_t n_blocks);

// The best of native_candidates that fits budget_bytes (budget_peak_bytes of its simulation),
// by the planner's cost (recompute time plus offload stall, then recompute FLOPs).
NativeChoice best_native(const Graph& graph, const Device& device, int64_t budget_bytes,
                         std::span<const NativeAc> options);

// planner6 (issue 15): the same for a pipeline plan (`plan --pp` / `--num-microbatches`). Each
// code base applies its setting to the layers of every stage alike (Megatron's
// --recompute-num-layers counts a stage's own layers; torchtitan and HF wrap each stage's layers
// with one setting), so a candidate is a stage-local strategy run on every stage. Each is
// simulated on the distinct stage graphs (first, inner, last, as simulate_pipeline builds them)
// and its stage peak is the simulated peak plus the stage's in-flight stash, as plan_pipeline
// counts it.
struct NativeStageChoice {
  int64_t stage = 0;
  int64_t in_flight = 1;
  bool found = false;        // some setting fits this stage alone
  Strategy strategy;         // the best setting for this stage alone (stage-local)
  std::string config;
  Cost cost;                 // recompute time plus offload stall, FLOPs (one micro-batch)
  int64_t peak_bytes = 0;    // stage peak with the in-flight stash
  // The uniform setting (NativePipelineChoice::strategy) on this stage, when found there.
  Cost uniform_cost;
  int64_t uniform_peak_bytes = 0;
};
struct NativePipelineChoice {
  bool searched = false;     // false: more than kNativeSearchBlocks blocks per stage
  bool found = false;        // one setting fits every stage
  Strategy strategy;         // that setting (least recompute summed over the stages)
  std::string config;
  Cost cost;                 // summed over the stages, one micro-batch each
  int64_t worst_peak_bytes = 0;
  std::vector<NativeStageChoice> stages;
  int64_t candidates = 0;    // settings tried
};
NativePipelineChoice best_native_pipeline(const ModelConfig& model, const TrainSetup& setup,
                                          const Device& device, int64_t budget_bytes,
                                          std::span<const NativeAc> options,
                                          const SimOptions& sim_options = {});

}  // namespace sim
