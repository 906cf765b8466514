// Internal (feat14, issue 13): Megatron's fused SwiGLU MLP (blocks_feat14.cpp).
#pragma once

#include <cstdint>

#include "ops.hpp"

namespace sim::detail {

// Megatron-core's MLP under --swiglu with bias_swiglu_fusion: linear_fc1 (h -> 2f / tp,
// column-parallel), SwiGLUFunction (saves the [n, 2f] fc1 output), linear_fc2 (row-parallel).
// Returns fc2's output.
int32_t megatron_fused_swiglu_mlp(Builder& bld, const Dims& dm, int32_t mlp_in);

// The fp32 gradient bytes of the parameters replicated over TP that Megatron all-reduces over the
// TP group under SP (Graph::tp_replicated_grad_bytes); the caller checks the variant, tp and sp.
int64_t tp_replicated_grad_bytes(const Graph& g);

}  // namespace sim::detail
