// Which implementation-specific fields the set-up panel shows (polish). A field belongs to the
// code bases whose sim::ImplSpec row has its setting (tensor_parallel, compile_blocks, local_spec,
// ...); the same data make sim::resolve_setup refuse the knob elsewhere, so a field is offered
// exactly where its knob can be set (tests/test_gui.cpp holds the two against each other).
#pragma once

#include "sim/model.hpp"
#include "sim/setup.hpp"

namespace gui {

struct ImplFields {
  bool tensor_parallel = false;   // --tp, --sp
  bool pipeline = false;          // --pp, --vpp
  bool compile = false;           // --compile
  bool norm_kernel = false;       // --norm-kernel triton
  bool grad_accum_fusion = false; // --grad-accum-fusion off
  bool ce_loss_fusion = false;    // --cross-entropy-loss-fusion
  bool local_spec = false;        // --transformer-impl local
  bool deterministic = false;     // --deterministic
  bool context_parallel = false;  // --cp
  bool fp8 = false;               // --fp8 (some recipe)
  bool lora = false;              // --lora-rank and the LoRA fields
  bool padding = false;           // --padding
  bool moe_routing = false;       // --moe-imbalance (an MoE model under a code base with MoE)
  bool moe_dispatcher = false;    // --ep, --moe-capacity, --moe-aux-loss-coeff, --etp (all-to-all)
  bool shared_expert_overlap = false;  // --moe-shared-expert-overlap (and shared experts)
};

// The fields of the code base `setup` runs under: its --impl release, else the model's default
// (sim::default_impl; with no --impl, tensor, pipeline and context parallelism are offered, as
// setting one of them picks Megatron-LM). Under the paper profile, Korthikanti et al.'s tensor, sequence and
// pipeline parallelism only. The panel also shows a field whose knob is set where the code base
// lacks it, so that the one-line error naming the flag can be undone in place.
ImplFields impl_fields(const sim::ModelConfig& model, const sim::TrainSetup& setup);

}  // namespace gui
