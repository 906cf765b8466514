// A modeled GPU, as data (models/devices/*.json). Every figure carries its provenance in the
// JSON; the simulator reads only the numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sim {

// Efficiencies of one op kind (op_kind_name: "linear", "bmm", ...), replacing the device's two
// for that kind's ops (DESIGN.md §5: efficiencies may depend on the op; fitted by actsim calibrate).
struct KindEfficiency {
  std::string kind;
  double compute_efficiency = 0;
  double memory_efficiency = 0;
  friend bool operator==(const KindEfficiency&, const KindEfficiency&) = default;
};

struct Device {
  std::string name;    // as the user named it ("h100-sxm")
  std::string source;  // file it was read from
  std::string label;   // human name ("NVIDIA H100 SXM5 80GB HBM3")
  int sm_arch = 90;    // compute capability x10: 80 (A100), 90 (H100, H200)

  int64_t hbm_bytes = 0;           // total device memory as nvidia-smi reports it (exact bytes)
  int64_t driver_reserved_bytes = 0;  // of hbm_bytes, what CUDA never offers (cudaMemGetInfo total)
  int64_t cuda_context_bytes = 0;  // memory the CUDA context takes outside PyTorch's allocator
  int64_t nccl_buffer_bytes = 0;   // per communicator, outside PyTorch's allocator (tp/dp > 1)
  int64_t cublas_workspace_bytes = 0;  // per (handle, stream), through the allocator

  double peak_bf16_flops_per_s = 0;  // dense 16-bit tensor-core peak
  double peak_tf32_flops_per_s = 0;  // dense TF32 tensor-core peak
  double peak_fp32_flops_per_s = 0;  // non-tensor FP32 peak
  double hbm_bytes_per_s = 0;        // HBM bandwidth
  double host_link_bytes_per_s = 0;  // host link, one direction, usable
  double nvlink_bytes_per_s = 0;     // NVLink, one direction

  double compute_efficiency = 0;  // share of peak large matmuls reach (measured, see provenance)
  double memory_efficiency = 0;   // share of bandwidth large copies reach
  int64_t launch_overhead_ns = 0; // per kernel, added to every op's duration
  int sm_count = 0;               // streaming multiprocessors (GEMM wave quantization)
  int64_t host_dispatch_ns = 0;   // eager PyTorch host time per op (the host lane)
  double internode_bytes_per_s = 0;  // network bandwidth per GPU between nodes, one direction
  std::vector<KindEfficiency> kind_efficiencies;  // optional per-kind overrides, sorted by kind

  // Issue 11 (time): the dense FP8 (e4m3/e5m2) tensor-core peak, FLOP/s; 0 where the GPU has no
  // FP8 tensor cores (V100, A100) or the device file does not say (optional field
  // "peak_fp8_flops_per_s"). sim/src/kernels.cpp fp8_gemm_peak_flops_per_s reads it (fp8 GEMMs).
  double peak_fp8_flops_per_s = 0;
};

// Throws ConfigError naming device.source and the field for missing or non-positive figures.
void validate(const Device& device);

}  // namespace sim
