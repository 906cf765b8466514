#include "sim/device.hpp"

#include "sim/error.hpp"
#include "sim/graph.hpp"

namespace sim {

void validate(const Device& d) {
  auto pos = [&](double v, const char* field) {
    if (!(v > 0)) throw ConfigError(d.source, field, "must be a positive number");
  };
  pos(static_cast<double>(d.hbm_bytes), "hbm_bytes");
  pos(d.peak_bf16_flops_per_s, "peak_bf16_flops_per_s");
  pos(d.peak_tf32_flops_per_s, "peak_tf32_flops_per_s");
  pos(d.peak_fp32_flops_per_s, "peak_fp32_flops_per_s");
  pos(d.hbm_bytes_per_s, "hbm_bytes_per_s");
  pos(d.host_link_bytes_per_s, "host_link_bytes_per_s");
  pos(d.nvlink_bytes_per_s, "nvlink_bytes_per_s");
  pos(d.compute_efficiency, "compute_efficiency");
  pos(d.memory_efficiency, "memory_efficiency");
  if (d.compute_efficiency > 1) throw ConfigError(d.source, "compute_efficiency", "must be <= 1");
  if (d.memory_efficiency > 1) throw ConfigError(d.source, "memory_efficiency", "must be <= 1");
  pos(d.internode_bytes_per_s, "internode_bytes_per_s");
  if (d.sm_count <= 0) throw ConfigError(d.source, "sm_count", "must be a positive number");
  if (d.host_dispatch_ns < 0) throw ConfigError(d.source, "host_dispatch_ns", "must be >= 0");
  if (d.launch_overhead_ns < 0) throw ConfigError(d.source, "launch_overhead_ns", "must be >= 0");
  if (d.cublas_workspace_bytes < 0)
    throw ConfigError(d.source, "cublas_workspace_bytes", "must be >= 0");
  if (d.driver_reserved_bytes < 0 || d.driver_reserved_bytes >= d.hbm_bytes)
    throw ConfigError(d.source, "driver_reserved_bytes", "must be >= 0 and below hbm_bytes");
  if (d.cuda_context_bytes < 0) throw ConfigError(d.source, "cuda_context_bytes", "must be >= 0");
  if (d.nccl_buffer_bytes < 0) throw ConfigError(d.source, "nccl_buffer_bytes", "must be >= 0");
  for (size_t i = 0; i < d.kind_efficiencies.size(); ++i) {
    const KindEfficiency& k = d.kind_efficiencies[i];
    const std::string field = "efficiency_by_kind." + k.kind;
    bool known = false;
    for (int j = 0; j < kOpKindCount; ++j) known = known || op_kind_name(static_cast<OpKind>(j)) == k.kind;
    if (!known) throw ConfigError(d.source, field, "not an op kind (sim::op_kind_name)");
    if (i > 0 && !(d.kind_efficiencies[i - 1].kind < k.kind))
      throw ConfigError(d.source, field, "kinds must be unique and sorted");
    for (double e : {k.compute_efficiency, k.memory_efficiency})
      if (!(e > 0 && e <= 1)) throw ConfigError(d.source, field, "efficiencies must be in (0, 1]");
  }
}

}  // namespace sim
