// te_norm (issue 10): Transformer Engine's fused RMSNorm, as Megatron-core's TE layer spec runs
// every RMSNorm of a block and the final norm (ImplSpec::te_norms). Read at
// NVIDIA/Megatron-LM @ d98e8a64ddf3 and NVIDIA/TransformerEngine @ d0067d0da6cb:
//
//   megatron/core/models/gpt/gpt_layer_specs.py get_gpt_layer_with_transformer_engine_spec:
//     input_layernorm = IdentityOp, linear_qkv = TELayerNormColumnParallelLinear;
//     pre_mlp_layernorm = IdentityOp, linear_fc1 = TELayerNormColumnParallelLinear (dense MLP;
//     with experts pre_mlp_layernorm = TENorm); the final layernorm is TENorm.
//   transformer_engine/pytorch/module/layernorm_linear.py _LayerNormLinear.forward:
//     inputmat = cast_if_needed(inp.view((-1, in_features)), activation_dtype)      (:181-188)
//     ln_out, mu, rsigma = apply_normalization(inputmat, ..., inputmat.dtype, normalization)
//                                                                                    (:257-268)
//     ctx.save_for_backward(prepare_for_saving(inputmat, weight, origin_weight, bias,
//       ln_weight, ln_out, mu, rsigma))                                              (:526-536)
//   mu is None for RMSNorm; rsigma is fp32 [rows] (pytorch/csrc/extensions/normalization.cpp
//   :325 `at::empty({outer_size}, at::CUDA(at::kFloat))`). ln_out is the GEMM's input (under
//   sequence parallelism the local shard is saved and re-gathered in backward), so the linear
//   that follows saves it: the storages are the norm's {x, weight, rsigma} and the linear's
//   {ln_out, weight}.
//   transformer_engine/pytorch/module/rmsnorm.py (TENorm's RMSNorm) is ops/basic/rmsnorm.py
//     RMSNorm.op_forward: y, _, rstdevs = rmsnorm_fwd(x, ...); ctx.save_for_backward(x, rstdevs)
//     (:189-209; the weight is the module's parameter): the same storages.
//
// Against HF's LlamaRMSNorm op list (Ops::rms_norm), which Megatron's rows used before: under
// bf16-mixed this keeps x (2 B per element) and rsigma where HF keeps the fp32 copy of x (4 B) and
// the 16-bit normalized product (2 B) per element and rstd: 4 B per element less per norm; both
// keep the norm's output (the linear's saved input).
//
// Kernels: one forward (rmsnorm_fwd_tuned/general_kernel: reads x and the weight, writes ln_out
// and rsigma); two backward (common/normalization/rmsnorm/rmsnorm_bwd_semi_cuda_kernel.cu: the
// backward kernel writing dx and per-CTA partial dgamma, then rmsnorm_bwd_finalize_*_kernel).
// Not modeled: that backward's dgamma_part workspace (ctas_per_col x hidden fp32, allocated by
// the extension per call: common/normalization/common.cpp:153). exec13: the CPU executor runs it
// as Exec::kTeRmsNorm (harness/executor/src/cpu_backend.cpp te_rms_norm).
#include "ops.hpp"

namespace sim::detail {

int32_t te_rms_norm(Builder& bld, const Dims& dm, int32_t x, int64_t width, const char* name) {
  Ops o(bld, dm);
  // cast_if_needed(inputmat, activation_dtype): a copy only under autocast (fp32 residual)
  const int32_t xin = o.to_half(x, "norm input cast", "norm input cast");
  const Tensor tx = bld.tensor(xin);
  const int64_t rows = numel_of(tx) / width;
  const int32_t w = bld.param(width, dm.param_dt, name);
  OpDraft d = o.draft(OpKind::kRmsNorm, name);
  d.op.math16 = false;
  d.exec = Exec::kTeRmsNorm;  // exec13
  d.dim = {rows, width};
  d.inputs.push_back({xin, GradRule::kNew});
  d.inputs.push_back({w, GradRule::kNew});
  const int32_t ln_out = bld.fresh(tx.bytes, tx.dtype, "ln_out");  // in inputmat.dtype
  const int32_t rsigma = bld.fresh(bytes(rows, DType::kF32), DType::kF32, "rsigma");
  d.outputs = {ln_out, rsigma};
  d.saves = {xin, w, rsigma};
  d.op.fwd.kernels = 1;
  d.op.bwd.kernels = 2;
  bld.add_op(std::move(d));
  return ln_out;
}

}  // namespace sim::detail
