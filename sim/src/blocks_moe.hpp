// Internal (moe, issue 13): the MoE layer and MLA attention of a block, built from ops.hpp's Ops.
#pragma once

#include <cstdint>

#include "ops.hpp"

namespace sim::detail {

// The MoE layer from its (normalized) input to its output (routed experts as the
// implementation dispatches them, plus the shared experts): blocks_moe.cpp.
int32_t build_moe(Builder& bld, const Dims& dm, int32_t mlp_in);

}  // namespace sim::detail
