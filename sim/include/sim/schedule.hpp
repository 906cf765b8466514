// The ordered events of one step under a plan (DESIGN.md §2, §3 event protocol). The schedule
// decides every free: the engine only allocates what ops declare and frees what the schedule says,
// and the CPU reference executor checks each scheduled free against its own reference counts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/graph.hpp"
#include "sim/strategy.hpp"

namespace sim {

enum class EventKind : uint8_t {
  kForward,    // run op `id` forward
  kRecompute,  // run op `id` forward again during backward (flag kCachedOutput: SAC cache hit)
  kBackward,   // run op `id`'s backward node
  kFree,       // storage `id` is released (its last use, save or hold ended)
  kOptimizer,  // the optimizer step
  kOffload,    // storage `id` starts its copy to pinned host memory (device-to-host stream); its
               // device buffer is not reused before the copy completes
  kPrefetch,   // storage `id` is allocated on the device again and copied back (host-to-device
               // stream); ops that read it wait for the copy
};

inline constexpr uint8_t kCachedOutput = 1;  // recompute of an op whose output the SAC cache holds
// fp8sac (issue 10): the region's policy is sac:torchtitan (which outputs its cache holds:
// sac_cached_output in sim/graph.hpp)
inline constexpr uint8_t kSacTorchtitan = 2;

struct Event {
  EventKind kind = EventKind::kForward;
  uint8_t flags = 0;
  int32_t id = 0;
};

enum class RecomputeMode : uint8_t {
  kNonReentrant,  // pytorch profile: torch.utils.checkpoint(use_reentrant=False), early stop
  kReentrant,     // paper profile: Megatron's reentrant checkpoint, whole segment, output kept
};

struct Schedule {
  std::vector<Event> events;
  int32_t forward_end = 0;  // index of the first event after the forward pass
};

// Offload (DESIGN.md §4): the blocks whose backward (or recompute) needs each offloaded storage are
// fetched `prefetch` blocks ahead: block j's storages are copied back when the backward of block
// j + prefetch begins (at the start of the backward pass for the last `prefetch` blocks).

// Why a storage is alive at some event, for explaining a peak.
struct Holder {
  enum Kind : uint8_t { kForwardUse, kSavedBy, kCheckpointInput, kSacCache, kAutocastCache,
                        kGradSlot, kPersistent,
                        kForwardReturn };  // hfimpl: returned by the model's forward
  Kind kind = kForwardUse;
  int32_t op = -1;  // the op that will use or that saved it (-1 when none applies)
};

Schedule build_schedule(const Graph& graph, const Plan& plan, RecomputeMode mode);

// Replays the schedule's reference counting up to and including event `stop_at` and returns, for
// every storage live then, who holds it (empty vector for dead storages). Slow path: only for
// explaining one peak.
std::vector<std::vector<Holder>> holders_at(const Graph& graph, const Plan& plan,
                                            RecomputeMode mode, int32_t stop_at);

}  // namespace sim
