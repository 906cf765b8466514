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
#include "sim/planner.hpp"
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

}  // namespace sim
