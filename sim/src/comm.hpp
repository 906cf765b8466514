// Collective communication time (DESIGN.md §5): NCCL ring collectives over the topology.
#pragma once

#include <cstdint>

#include "sim/device.hpp"

namespace sim {

enum class Collective : uint8_t { kAllReduce = 1, kAllGather = 2, kReduceScatter = 3, kSendRecv = 4,
                                  kAllToAll = 5 /* moe: expert-parallel token exchange */ };

// A communicator: `ranks` GPUs spread over `nodes` nodes (ranks / nodes per node).
struct CommGroup {
  int64_t ranks = 1;
  int64_t nodes = 1;
};

// The group of `size` ranks whose members lie `stride` ranks apart in the global rank order
// (Megatron's order: tensor-parallel ranks innermost, then data-parallel, then pipeline), with
// `gpus_per_node` consecutive ranks per node.
CommGroup comm_group(int64_t size, int64_t stride, int64_t gpus_per_node);

// Seconds of one collective of a `bytes` buffer (the full buffer: the all-reduced tensor, the
// gathered output, the reduce-scattered input; for send/recv, the message).
double collective_seconds(Collective c, int64_t bytes, CommGroup g, const Device& d);

// Contention (issue 11, time): compute kernels that run while a collective runs on another
// stream are slowed, since NCCL's kernels hold SMs (one CTA per channel) and memory bandwidth.
// "Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed Deep Learning:
// Performance and Power Implications" (arXiv 2507.03114, July 2025, abstract) measured the
// compute of GPT and Llama training on 4 A100s and 4 H100s (and two AMD GPUs) with and without
// a concurrent collective: 18.9 % slower on average, 40.0 % at most. A measurement of the
// overlap itself, not fitted to any end-to-end row of validation/time/.
inline constexpr double kOverlapComputeSlowdown = 0.189;

// Wall time of `work_ns` of compute that starts while the communication stream stays busy for
// another `comm_busy_ns`: the overlapped part runs (1 + kOverlapComputeSlowdown) times slower,
// the rest at full speed. Equal to `work_ns` when nothing overlaps.
int64_t contended_ns(int64_t work_ns, int64_t comm_busy_ns);

}  // namespace sim
