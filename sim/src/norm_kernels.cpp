// time5 (issue 11): torchtitan's fused Triton RMSNorm (--norm-kernel triton), as
// torchtitan/models/norms.py runs it at 04133643 (the commit of docs/performance.md's 64-A100
// tables, whose llama3_8b.toml and llama2_13b.toml set `norm_type = "fused_rmsnorm"`) and at
// 9dec370 (the same kernels, wrapped in local_map):
//
//   TritonFusedRMSNorm.forward: y = torch.empty_like(x); rstd = torch.empty((M,), fp32);
//     _rms_norm_fwd_kernel[(M,)] reads x and w, writes rstd and y (x * rstd * w, fp32 inside);
//     ctx.save_for_backward(x, weight, rstd)
//   backward: dx = torch.empty_like(x); _dw = torch.empty((sm_count, N), fp32);
//     _rms_norm_bwd_kernel_sm[(sm_count,)] reads x, w, dy, rstd, writes dx and _dw;
//     dw = _dw.sum(0).to(weight.dtype)
//
// One kernel forward; three backward (the Triton kernel, the sum over SMs, the cast). The bytes
// are those of the op's inputs, outputs, saves and gradients (graph_builder.cpp), and (polish) the
// backward's per-SM partial weight gradient: _dw, sm_count x N fp32 (sm_count =
// get_device_properties(x.device).multi_processor_count, the device's Device::sm_count; the grid is
// (sm_count,) whatever M), written by _rms_norm_bwd_kernel_sm and read back by _dw.sum(0), whose
// fp32 [N] result is written and read again by .to(weight.dtype): 2 x 4 x (sm_count + 1) x N
// bytes more (4.3 MB on an H100 at N 4096, against 201 MB of dy/x/dx at 8192 tokens: about 2 %).
// Memory: _dw is alive through the backward's three kernels beside dx and the weight's gradient, a
// transient of sm_count x N x 4 B, plus the sum's fp32 [N] where the weight is not fp32 (the cast
// makes the gradient; an fp32 weight's gradient is the sum itself). At 04133643 the backward also
// runs `dw = torch.empty_like(weight)`, rebound before it is used: N x 2 B under fsdp2-bf16, not
// modeled (9dec370 dropped it). No executor kernel (Exec::kNone): Triton does not run on the CPU
// harness.
#include "ops.hpp"

namespace sim::detail {

int32_t triton_rms_norm(Builder& bld, const Dims& dm, int32_t x, const char* name) {
  Ops o(bld, dm);
  const Tensor tx = bld.tensor(x);
  const int64_t n = numel_of(tx) / dm.h;  // rows M
  const int32_t w = bld.param(dm.h, dm.param_dt, name);
  OpDraft d = o.draft(OpKind::kRmsNorm, name);
  d.op.math16 = false;
  d.exec = Exec::kNone;
  d.inputs.push_back({x, GradRule::kNew});
  d.inputs.push_back({w, GradRule::kNew});
  const int32_t y = bld.fresh(tx.bytes, tx.dtype, "norm out");  // empty_like(x)
  const int32_t rstd = bld.fresh(bytes(n, DType::kF32), DType::kF32, "rmsnorm rstd");
  d.outputs = {y, rstd};
  d.saves = {x, w, rstd};
  d.op.fwd.kernels = 1;
  d.op.bwd.kernels = 3;
  // polish: _dw [sm_count, N] fp32 and _dw.sum(0) [N] fp32 (header comment)
  const int64_t partials = bytes(mul(dm.sm_count, dm.h), DType::kF32);
  const int64_t sum = bytes(dm.h, DType::kF32);
  d.bwd_inner_bytes = mul(2, partials + sum);
  d.op.bwd_transient_bytes = partials + (dm.param_dt == DType::kF32 ? 0 : sum);
  bld.add_op(std::move(d));
  return y;
}

}  // namespace sim::detail
