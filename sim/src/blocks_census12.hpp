// census12 (issue 12): SDPA's math kernel for K/V with fewer heads than Q and no enable_gqa
// (Falcon's multi_query under HF's SDPA): sim/src/sdpa_math.cpp.
#pragma once

#include <cstdint>

#include "builder.hpp"

namespace sim::detail {

// Whether SDPA runs its math kernel for this model (Falcon multi_query: one K/V head).
bool sdpa_math_kernel(const Dims& dm);
// The math kernel's ops on q, k, v (after autocast's casts); returns the [tokens, a*d] context.
int32_t sdpa_math_attention(Builder& bld, const Dims& dm, int32_t q, int32_t k, int32_t v);

}  // namespace sim::detail
