// Internal (feat14, issue 13): Megatron's fused SwiGLU MLP (blocks_feat14.cpp).
#pragma once

#include <cstdint>

#include "ops.hpp"

namespace sim::detail {

// Megatron-core's MLP under --swiglu with bias_swiglu_fusion: linear_fc1 (h -> 2f / tp,
// column-parallel), SwiGLUFunction (saves the [n, 2f] fc1 output), linear_fc2 (row-parallel).
// Returns fc2's output.
int32_t megatron_fused_swiglu_mlp(Builder& bld, const Dims& dm, int32_t mlp_in);

}  // namespace sim::detail
