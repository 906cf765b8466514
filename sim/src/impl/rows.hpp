// Internal: one function per code base returning its ImplSpec row (sim/src/impl/<name>.cpp).
// The registry (registry.cpp) lists them; adding a code base adds a file and one line there.
#pragma once

#include "sim/impl.hpp"
#include "sim/setup.hpp"

namespace sim::impl_rows {

ImplSpec hf();
ImplSpec torchtitan();
ImplSpec megatron();
ImplSpec nanogpt();

}  // namespace sim::impl_rows
