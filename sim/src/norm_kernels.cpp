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
// are those of the op's inputs, outputs, saves and gradients (graph_builder.cpp); _dw (sm_count x
// N fp32, written and read back: 2 x 132 x 4096 x 4 B = 4.3 MB on an H100 at Llama's 4096, the
// dy/x/dx traffic 3 x 2 B per element: 201 MB at 8192 tokens) is left out, as is its transient
// memory, because the graph does not know the device's SM count: about 2 % of the backward's
// bytes at 8192 tokens per rank, 4 % at 4096. No executor kernel (Exec::kNone): Triton does not run on
// the CPU harness.
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
  bld.add_op(std::move(d));
  return y;
}

}  // namespace sim::detail
