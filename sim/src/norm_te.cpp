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
// The backward's workspace (dgamma_part, ctas_per_col x hidden fp32) is a backward transient
// (tece, below). exec13: the CPU executor runs the norm as Exec::kTeRmsNorm
// (harness/executor/src/cpu_backend.cpp te_rms_norm).
//
// tece (issue 10): the norm backward's workspace. pytorch/csrc/extensions/normalization.cpp
// rmsnorm_bwd / layernorm_bwd (:216-257, :13-59) allocate dx and dgamma (and dbeta), query the
// plan's workspace size, and allocate it with allocateSpace (at::empty) for the call: the
// workspace lives inside the op's backward. Its size is the plan's getTotalWorkspaceBytes
// (common/normalization/common.h:45-52): workspace + barrier + (LayerNorm ? 2 : 1) x dgamma_part,
// each rounded up to 16 B, with (common/normalization/rtc_dispatch.cpp register_launcher and the
// *_bwd_general closures, the kernels being NVRTC-compiled by default):
//   tuned kernel (common.cpp:527: rows % 4 == 0 and a kernel registered for exactly this hidden
//     size and dtype): ctas_per_col = SMs x ctas_per_sm / CTAS_PER_ROW;
//   general kernel otherwise (common.h:114-130: the registered HIDDEN_SIZE at or above cols, else
//     the largest): ctas_per_row = ceil(cols / HIDDEN_SIZE),
//     ctas_per_col = min(ceil(rows / WARPS_M), SMs x ctas_per_sm / ctas_per_row);
//   dgamma_part = ctas_per_col x cols x 4 (fp32 compute); with ctas_per_row > 1 also barrier =
//   2 x ctas_per_col x 4 and workspace = ctas_per_col x WARPS_M x ctas_per_row x 16.
// SMs is the device's multiProcessorCount (TE's backward sm_margin is 0 by default). ctas_per_sm
// is cudaOccupancyMaxActiveBlocksPerMultiprocessor of the compiled kernel: the table below holds
// it per registered backward kernel (rmsnorm_bwd_semi_cuda_kernel.cu, ln_bwd_semi_cuda_kernel.cu
// REGISTER_NORM_LAUNCHER lines, weights = input = output, fp32 compute), computed by
// harness/te_norm_occupancy.py: NVRTC 13.0 with TE's options, ptxas's register and shared-memory
// counts, CUDA's occupancy rules, for sm_80 and sm_90. The registers a container's NVRTC gives
// may differ by a few; fp16 uses the bf16 rows (same launch configurations); devices below sm_90
// use the sm_80 column, sm_90 and above the sm_90 column.
#include <algorithm>

#include "ops.hpp"

namespace sim::detail {

namespace {

enum TeNormKind : uint8_t { kRMSNorm, kLayerNorm };

struct TeNormKernel {
  TeNormKind norm;
  bool tuned;
  int32_t hidden;  // the kernel's HIDDEN_SIZE
  bool fp32;       // weights/input/output fp32 (else bf16)
  int32_t ctas_per_row, warps_m;
  int32_t ctas_per_sm80, ctas_per_sm90;
};

// harness/te_norm_occupancy.py on TransformerEngine @ d0067d0da6cb (columns: norm, tuned, hidden,
// fp32, CTAS_PER_ROW, WARPS_M, ctas_per_sm on sm_80, on sm_90; registers per thread in comments)
constexpr TeNormKernel kTeNormKernels[] = {
    {kRMSNorm, true, 512, true, 1, 4, 6, 5},  // regs 80/86
    {kRMSNorm, true, 512, false, 1, 4, 6, 6},  // regs 80/80
    {kRMSNorm, true, 768, true, 1, 4, 4, 4},  // regs 118/121
    {kRMSNorm, true, 768, false, 1, 4, 4, 4},  // regs 128/121
    {kRMSNorm, true, 1024, true, 1, 4, 3, 3},  // regs 154/159
    {kRMSNorm, true, 1024, false, 1, 4, 3, 3},  // regs 163/161
    {kRMSNorm, true, 2048, true, 1, 1, 6, 5},  // regs 80/89
    {kRMSNorm, true, 2048, false, 1, 1, 6, 5},  // regs 80/89
    {kRMSNorm, true, 4096, true, 1, 1, 3, 3},  // regs 150/164
    {kRMSNorm, true, 4096, false, 1, 1, 3, 3},  // regs 167/161
    {kRMSNorm, true, 8192, true, 1, 1, 2, 2},  // regs 255/255
    {kRMSNorm, true, 8192, false, 1, 1, 2, 2},  // regs 255/255
    {kRMSNorm, false, 128, true, 1, 4, 12, 12},  // regs 39/39
    {kRMSNorm, false, 128, false, 1, 4, 10, 12},  // regs 47/40
    {kRMSNorm, false, 512, true, 1, 4, 5, 5},  // regs 96/96
    {kRMSNorm, false, 512, false, 1, 4, 5, 4},  // regs 94/100
    {kRMSNorm, false, 1024, true, 1, 4, 3, 3},  // regs 165/168
    {kRMSNorm, false, 1024, false, 1, 4, 3, 3},  // regs 162/165
    {kRMSNorm, false, 2048, true, 1, 1, 4, 4},  // regs 100/104
    {kRMSNorm, false, 2048, false, 1, 1, 5, 5},  // regs 94/96
    {kRMSNorm, false, 4096, true, 1, 1, 3, 3},  // regs 168/167
    {kRMSNorm, false, 4096, false, 1, 1, 3, 3},  // regs 166/168
    {kLayerNorm, true, 768, true, 1, 4, 3, 3},  // regs 144/147
    {kLayerNorm, true, 768, false, 1, 4, 3, 3},  // regs 168/147
    {kLayerNorm, true, 1024, true, 1, 4, 2, 2},  // regs 184/191
    {kLayerNorm, true, 1024, false, 1, 4, 2, 2},  // regs 204/195
    {kLayerNorm, true, 1536, true, 1, 1, 6, 5},  // regs 80/86
    {kLayerNorm, true, 1536, false, 1, 1, 6, 5},  // regs 80/87
    {kLayerNorm, true, 2048, true, 1, 1, 5, 4},  // regs 96/104
    {kLayerNorm, true, 2048, false, 1, 1, 5, 4},  // regs 96/110
    {kLayerNorm, true, 2304, true, 1, 1, 3, 3},  // regs 151/151
    {kLayerNorm, true, 2304, false, 1, 1, 3, 3},  // regs 147/152
    {kLayerNorm, true, 3072, true, 1, 1, 3, 3},  // regs 144/151
    {kLayerNorm, true, 3072, false, 1, 1, 3, 3},  // regs 155/151
    {kLayerNorm, true, 3840, true, 1, 1, 2, 2},  // regs 233/250
    {kLayerNorm, true, 3840, false, 1, 1, 2, 2},  // regs 235/254
    {kLayerNorm, true, 4096, true, 1, 1, 2, 2},  // regs 182/190
    {kLayerNorm, true, 4096, false, 1, 1, 2, 2},  // regs 202/194
    {kLayerNorm, true, 5120, true, 1, 1, 2, 2},  // regs 255/255
    {kLayerNorm, true, 5120, false, 1, 1, 2, 2},  // regs 255/252
    {kLayerNorm, true, 6144, true, 1, 1, 1, 1},  // regs 154/157
    {kLayerNorm, true, 6144, false, 1, 1, 1, 1},  // regs 158/152
    {kLayerNorm, true, 8192, true, 2, 1, 2, 2},  // regs 192/197
    {kLayerNorm, true, 8192, false, 2, 1, 2, 2},  // regs 225/205
    {kLayerNorm, true, 10240, true, 2, 1, 2, 2},  // regs 255/255
    {kLayerNorm, true, 10240, false, 2, 1, 2, 2},  // regs 255/254
    {kLayerNorm, true, 12288, true, 4, 1, 3, 3},  // regs 151/154
    {kLayerNorm, true, 12288, false, 4, 1, 3, 3},  // regs 168/153
    {kLayerNorm, true, 12800, true, 5, 1, 4, 4},  // regs 125/127
    {kLayerNorm, true, 12800, false, 5, 1, 4, 4},  // regs 125/127
    {kLayerNorm, true, 15360, true, 4, 1, 2, 2},  // regs 223/250
    {kLayerNorm, true, 15360, false, 4, 1, 2, 2},  // regs 224/241
    {kLayerNorm, true, 16384, true, 4, 1, 2, 2},  // regs 192/197
    {kLayerNorm, true, 16384, false, 4, 1, 2, 2},  // regs 225/205
    {kLayerNorm, true, 18432, true, 4, 1, 2, 2},  // regs 255/255
    {kLayerNorm, true, 18432, false, 4, 1, 2, 2},  // regs 255/255
    {kLayerNorm, true, 20480, true, 4, 1, 2, 2},  // regs 255/255
    {kLayerNorm, true, 20480, false, 4, 1, 2, 2},  // regs 255/254
    {kLayerNorm, true, 24576, true, 4, 1, 1, 1},  // regs 158/157
    {kLayerNorm, true, 24576, false, 4, 1, 1, 1},  // regs 155/158
    {kLayerNorm, true, 25600, true, 5, 1, 2, 2},  // regs 255/255
    {kLayerNorm, true, 25600, false, 5, 1, 2, 2},  // regs 254/249
    {kLayerNorm, true, 30720, true, 4, 1, 1, 1},  // regs 223/250
    {kLayerNorm, true, 30720, false, 4, 1, 1, 1},  // regs 227/241
    {kLayerNorm, true, 32768, true, 4, 1, 1, 1},  // regs 199/212
    {kLayerNorm, true, 32768, false, 4, 1, 1, 1},  // regs 227/201
    {kLayerNorm, true, 40960, true, 4, 1, 1, 1},  // regs 255/255
    {kLayerNorm, true, 40960, false, 4, 1, 1, 1},  // regs 254/251
    {kLayerNorm, true, 49152, true, 8, 1, 1, 1},  // regs 158/157
    {kLayerNorm, true, 49152, false, 8, 1, 1, 1},  // regs 155/158
    {kLayerNorm, true, 65536, true, 8, 1, 1, 1},  // regs 199/212
    {kLayerNorm, true, 65536, false, 8, 1, 1, 1},  // regs 227/201
    {kLayerNorm, false, 128, true, 1, 4, 10, 10},  // regs 47/47
    {kLayerNorm, false, 128, false, 1, 4, 10, 10},  // regs 46/47
    {kLayerNorm, false, 512, true, 1, 4, 4, 4},  // regs 119/120
    {kLayerNorm, false, 512, false, 1, 4, 4, 4},  // regs 116/126
    {kLayerNorm, false, 1024, true, 1, 4, 2, 2},  // regs 211/211
    {kLayerNorm, false, 1024, false, 1, 4, 2, 2},  // regs 196/199
    {kLayerNorm, false, 2048, true, 1, 1, 4, 4},  // regs 123/122
    {kLayerNorm, false, 2048, false, 1, 1, 4, 4},  // regs 118/124
    {kLayerNorm, false, 4096, true, 1, 1, 2, 2},  // regs 213/216
    {kLayerNorm, false, 4096, false, 1, 1, 2, 2},  // regs 200/201
};

int64_t round16(int64_t b) { return (b + 15) / 16 * 16; }

}  // namespace

int64_t te_norm_bwd_workspace(const Dims& dm, bool layer_norm, int64_t rows, int64_t cols,
                              DType dt) {
  const TeNormKind kind = layer_norm ? kLayerNorm : kRMSNorm;
  const bool fp32 = dt == DType::kF32;
  const auto occ = [&](const TeNormKernel& k) {
    return static_cast<int64_t>(dm.sm_arch >= 90 ? k.ctas_per_sm90 : k.ctas_per_sm80);
  };
  const int64_t sms = dm.sm_count > 0 ? dm.sm_count : 1;
  int64_t ctas_per_col = 0, ctas_per_row = 1, warps_m = 1;
  const TeNormKernel* chosen = nullptr;
  if (rows % 4 == 0)
    for (const TeNormKernel& k : kTeNormKernels)
      if (k.norm == kind && k.tuned && k.fp32 == fp32 && k.hidden == cols) chosen = &k;
  if (chosen) {
    ctas_per_row = chosen->ctas_per_row, warps_m = chosen->warps_m;
    ctas_per_col = sms * occ(*chosen) / ctas_per_row;
  } else {
    const TeNormKernel* largest = nullptr;
    for (const TeNormKernel& k : kTeNormKernels) {
      if (k.norm != kind || k.tuned || k.fp32 != fp32) continue;
      if (!largest || k.hidden > largest->hidden) largest = &k;
      if (k.hidden >= cols && (!chosen || k.hidden < chosen->hidden)) chosen = &k;
    }
    if (!chosen) chosen = largest;
    warps_m = chosen->warps_m;
    ctas_per_row = (cols + chosen->hidden - 1) / chosen->hidden;
    ctas_per_col = std::min((rows + warps_m - 1) / warps_m, sms * occ(*chosen) / ctas_per_row);
  }
  const int64_t dgamma_part = round16(ctas_per_col * cols * 4);
  int64_t extra = 0;
  if (ctas_per_row > 1)
    extra = round16(2 * ctas_per_col * 4) + round16(ctas_per_col * warps_m * ctas_per_row * 16);
  const int64_t total = extra + (layer_norm ? 2 : 1) * dgamma_part;
  return total > 0 ? total : 1;  // common.cpp:133-137: never a zero-size query
}

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
  // tece (issue 10): the backward's dgamma_part workspace; at::empty outputs (--deterministic).
  // Under Megatron's local spec (--transformer-impl local) the norm is torch.nn.RMSNorm
  // (transformer/torch_norm.py WrappedTorchNorm; models/backends.py LocalSpecProvider.layer_norm
  // forces it for RMSNorm), which PyTorch runs as aten::_fused_rms_norm on CUDA: its autograd
  // entry (tools/autograd/derivatives.yaml) keeps input, weight and result1 (rstd, fp32 per
  // row): the same storages; neither TE's workspace nor TE's at::empty outputs.
  if (!dm.local_spec) {
    d.op.bwd_transient_bytes = te_norm_bwd_workspace(dm, false, rows, width, tx.dtype);
    d.te_alloc = true;
  }
  bld.add_op(std::move(d));
  return ln_out;
}

}  // namespace sim::detail
