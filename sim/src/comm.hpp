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

}  // namespace sim
