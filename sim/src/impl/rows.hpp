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

// feat (issue 13, sim/src/lora.cpp): checks --lora-rank, --lora-targets and --qlora against the
// implementation, the regime and the model, and fills in PEFT's default targets.
void resolve_lora(const ModelConfig& model, const ImplSpec& spec, TrainSetup& s);

}  // namespace sim::impl_rows
