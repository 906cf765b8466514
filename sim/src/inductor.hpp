// inductor (issue 10): what torch.compile's AOTAutograd min-cut partitioner saves, per block.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/graph.hpp"

namespace sim::detail {

// Which partitioner's rules (sim/src/inductor.cpp): torch 1.13.1's (functorch, measured here on
// the CPU) or torch 2's (torch/_functorch/partitioners.py @ c28ba8e5, what torchtitan runs).
enum class PartitionRules : uint8_t { kTorch113, kTorch2 };

// Rewrites the saves of every block's ops (op.block >= 0) to what
// min_cut_rematerialization_partition (compiler="inductor") keeps: per block, a max-flow min-cut
// over the block's storages (sim/src/inductor.cpp names the source and its rules). An op's
// backward then holds the cut storages it reads directly or through the pointwise ops the
// backward recomputes; those ops' forward bytes are added to that backward (memory-bound time).
// Run after mark_torchtitan_sac, which reads the eager saves.
void inductor_partition(Graph& g, PartitionRules rules = PartitionRules::kTorch2);
// cptime2 (issue 11): the CP ring's dead torch.cat of k, v (steps 1 .. cp - 2, each way)
// removed from the ops of a graph torch.compile traces (Inductor's dead-node elimination;
// sim/src/cp.cpp); inductor_partition calls it once, last.
void cp_compiled_dead_cats(Graph& g);

// The partition of one block, for tests: the storages the cut saves (ascending), and the ops
// the backward recomputes (ascending).
struct BlockPartition {
  std::vector<int32_t> saved;
  std::vector<int32_t> recomputed_ops;
};
// time8 (issue 11): a torchao tensorwise Float8 cast of n elements under torch.compile: one
// reduction kernel (abs + max, 2n bytes) and one cast kernel (2n read, n written) (sim/src/fp8.cpp)
inline constexpr int64_t kFp8CompiledCastBytesPerElem = 5;
inline constexpr int32_t kFp8CompiledCastKernels = 2;

BlockPartition inductor_block_partition(const Graph& g, int32_t block,
                                        PartitionRules rules = PartitionRules::kTorch2);

}  // namespace sim::detail
