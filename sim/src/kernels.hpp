// Kernel classes with shape-dependent efficiency (DESIGN.md §5): which kernel runs an op and how
// long it takes on a device. Internal to the simulator (the engine and its tests).
#pragma once

#include <cstdint>

#include "sim/device.hpp"
#include "sim/graph.hpp"

namespace sim {

enum class KernelClass : uint8_t {
  kGemm,             // cuBLAS matmul: tile and wave quantization over the SMs
  kAttention,        // a fused attention kernel (which: KernelChoice)
  kMemoryBound,      // elementwise, reductions, copies: bytes at the achieved bandwidth
};

// The one place that picks an op's kernel class and attention kernel from (OpKind, shapes,
// KernelChoice). kDefault flash attention is FA2 (PyTorch SDPA's flash backend).
struct KernelPick {
  KernelClass cls = KernelClass::kMemoryBound;
  KernelChoice attention = KernelChoice::kDefault;
};
KernelPick pick_kernel(const Op& op);

// Share of a large GEMM's throughput one GEMM of m x n x k (batch of them) reaches after tile
// and wave quantization over the device's SMs and the 16-bit alignment penalty, in (0, 1].
double gemm_shape_efficiency(int64_t m, int64_t n, int64_t k, int64_t batch, int sms,
                             bool math16);

// Attention kernel throughput in FLOP/s (kernel FLOP convention: forward 4 b a s^2 d, halved
// when causal; backward 2.5 x forward) for one pass.
double attention_flops_per_s(KernelChoice kernel, const Device& d, int64_t seq, int64_t head_dim,
                             bool causal, bool backward);

// Seconds of the compute part of an op's GEMMs on the device (0 when the op has none): the
// FLOPs over peak x large-GEMM efficiency x each GEMM's shape efficiency.
double gemm_seconds(const Op& op, bool backward, const Device& d, double peak,
                    double compute_efficiency);

// Seconds of a fused attention op's kernel.
double attention_seconds(const Op& op, bool backward, const Device& d);

// time9 (issue 11): how much longer a fused attention kernel runs with dropout on (p > 0) than
// without, for the kernel that runs on the device (1 where none is published); see kernels.cpp.
double attention_dropout_factor(KernelChoice kernel, const Device& d, float p);

// Issue 11 (time2): the rate fp8 GEMMs (sim/src/fp8.cpp's Float8/TE linears) run at, as the
// `peak` gemm_seconds takes before the device's large-GEMM efficiency: the device file's dense
// fp8 tensor-core peak (peak_fp8_flops_per_s; twice the bf16 peak where the file has none, the
// datasheet ratio on every fp8 GPU) times the share an fp8 GEMM reaches of its peak relative to
// a bf16 one (fp8_gemm_relative_efficiency).
double fp8_gemm_peak_flops_per_s(const Device& d);

// Large fp8 GEMMs reach a smaller share of their peak than bf16 ones: stas00/ml-engineering's
// MAMF table (research/kernel_throughput.md §14a), H100 SXM, torch 2.7.0+cu126, best shapes of a
// sweep: fp8 e4m3 1,402.6 of 1,979 TFLOP/s (0.709) against bf16 794.5 of 989 (0.803): 0.882.
// (H200 SXM: fp8 1,453.4 of 1,979, 0.734, against the same bf16 share: 0.914.)
double fp8_gemm_relative_efficiency();

// Kernel launches of an optimizer step over `tensors` parameter tensors of `numel` elements in
// all (PyTorch multi_tensor_apply chunking for foreach and fused; one per tensor and op for the
// for-loop), `ops` kernels per launch group.
int64_t optimizer_launches(int64_t tensors, int64_t numel, int64_t ops, bool multi_tensor);

}  // namespace sim
