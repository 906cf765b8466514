// inductor (issue 10): what torch.compile's AOTAutograd min-cut partitioner saves, per block.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/graph.hpp"

namespace sim::detail {

// Rewrites the saves of every block's ops (op.block >= 0) to what
// min_cut_rematerialization_partition (compiler="inductor") keeps: per block, a max-flow min-cut
// over the block's storages (sim/src/inductor.cpp names the source and its rules). An op's
// backward then holds the cut storages it reads directly or through the pointwise ops the
// backward recomputes; those ops' forward bytes are added to that backward (memory-bound time).
// Run after mark_torchtitan_sac, which reads the eager saves.
void inductor_partition(Graph& g);

// The partition of one block, for tests: the storages the cut saves (ascending), and the ops
// the backward recomputes (ascending).
struct BlockPartition {
  std::vector<int32_t> saved;
  std::vector<int32_t> recomputed_ops;
};
BlockPartition inductor_block_partition(const Graph& g, int32_t block);

}  // namespace sim::detail
