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
// implver: other releases, each its code base's default row with what that release changes
ImplSpec hf_v4_16();             // hf.cpp: the Trainer of early 2022
ImplSpec torchtitan_9dec370();   // torchtitan.cpp: the commit of its 2024-12 benchmark tables

// feat (issue 13, sim/src/lora.cpp): checks --lora-rank, --lora-targets and --qlora against the
// implementation, the regime and the model, and fills in PEFT's default targets.
void resolve_lora(const ModelConfig& model, const ImplSpec& spec, TrainSetup& s);

}  // namespace sim::impl_rows
