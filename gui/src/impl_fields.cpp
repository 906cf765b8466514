#include "impl_fields.hpp"

#include "sim/impl.hpp"

namespace gui {

ImplFields impl_fields(const sim::ModelConfig& model, const sim::TrainSetup& setup) {
  ImplFields f;
  if (setup.profile == sim::Profile::kPaper) {  // registry.cpp resolve_setup's paper branch
    f.tensor_parallel = f.pipeline = true;
    return f;
  }
  const sim::ImplSpec& sp = setup.impl ? sim::spec(*setup.impl, setup.impl_version)
                                       : sim::spec(sim::default_impl(model, setup));
  f.tensor_parallel = sp.tensor_parallel;
  f.pipeline = sp.pipeline;
  f.compile = sp.compile_blocks;
  f.norm_kernel = sp.triton_rmsnorm;
  f.grad_accum_fusion = sp.grad_accum_fusion_flag;
  f.ce_loss_fusion = sp.ce_loss_fusion;
  f.local_spec = sp.local_spec;
  f.deterministic = sp.deterministic_mode;
  f.context_parallel = sp.context_parallel;
  // With no --impl, --tp, --pp and --cp themselves pick Megatron-LM (sim::default_impl): their
  // fields stay, and setting one brings Megatron's fields.
  if (!setup.impl) f.tensor_parallel = f.pipeline = f.context_parallel = true;
  f.fp8 = sp.fp8_te || sp.fp8_torchao;
  f.lora = sp.lora;
  f.padding = sp.model_masks;
  // sim/src/setup_moe.cpp check_moe_setup: routing needs a dispatcher; expert parallelism,
  // capacity, the aux-loss coefficient and expert TP are the all-to-all dispatcher's
  const bool moe = sim::is_moe(model) && sp.moe != sim::MoeDispatch::kNone;
  f.moe_routing = moe;
  f.moe_dispatcher = moe && sp.moe == sim::MoeDispatch::kAllToAll;
  f.shared_expert_overlap = f.moe_dispatcher && model.shared_ffn > 0;
  return f;
}

}  // namespace gui
