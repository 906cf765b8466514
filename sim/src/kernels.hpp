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

// Kernel launches of an optimizer step over `tensors` parameter tensors of `numel` elements in
// all (PyTorch multi_tensor_apply chunking for foreach and fused; one per tensor and op for the
// for-loop), `ops` kernels per launch group.
int64_t optimizer_launches(int64_t tensors, int64_t numel, int64_t ops, bool multi_tensor);

}  // namespace sim
