#include "comm.hpp"

#include <algorithm>

namespace sim {

CommGroup comm_group(int64_t size, int64_t stride, int64_t gpus_per_node) {
  if (size <= 1) return {1, 1};
  const int64_t span = size * stride;  // consecutive ranks the group covers
  if (span <= gpus_per_node) return {size, 1};
  // Members per node: those of one node's gpus_per_node ranks (at least one).
  const int64_t per_node = std::max<int64_t>(1, gpus_per_node / stride);
  return {size, (size + per_node - 1) / per_node};
}

// NCCL's own cost model (NVIDIA/nccl src/graph/tuning.cc at 01afd20a, ring algorithm, Simple
// protocol, which large messages use): time = latency + bytes / algorithm bandwidth, where
//   latency = baseLat 8.4 us + (nsteps - nInterSteps) x 3.4 us (NVLink hop) + nInterSteps x 9.6
//             us (network hop), nsteps = 2(n-1) for all-reduce, n-1 for all-gather and
//             reduce-scatter, nInterSteps the same over the nodes;
//   algorithm bandwidth = bus bandwidth x n / nsteps (NCCL tests' docs, PERFORMANCE.md: busbw =
//             algbw x 2(n-1)/n for all-reduce, (n-1)/n for all-gather and reduce-scatter).
// Bus bandwidth: NVLink one direction inside a node; across nodes each member of a node drives
// its own NIC in its own ring channel (one NIC per GPU on DGX A100/H100), so the bus bandwidth is
// members per node x the per-GPU network bandwidth, at most NVLink's.
//
// NVLink as NCCL drives it (time2): NCCL's kernels move data from the SMs, whose NVLink writes
// carry 128 B payloads, so a link delivers about 20 of its 25 GB/s line rate per direction:
// "Each NVLink has a line rate of 25GB/s (in each direction) which converts to ~20GB/s effective
// bandwidth with a 128B payload size ... 240GB/s on A100, but some other bottlenecks on the GPUs
// limits it to ~230GB/s" (NCCL maintainer S. Jeaugey, NVIDIA/nccl-tests issue 149, 2023-07-05);
// on H100 "450GB/s is the line rate. With the protocol overhead (~20%) NCCL can get an effective
// NVLink bandwidth of 370GB/s, which you can observe as BusBw ... with NCCL_ALGO=RING" (same,
// nccl-tests issue 212, 2024-05-06). kNvlinkPayloadEfficiency = 20/25 = 0.8: A100 240 GB/s
// (measured ~230: -4 %), H100 360 GB/s (measured ~370: +3 %). The network's bandwidth is taken
// as the device file states it.
namespace {
constexpr double kNvlinkPayloadEfficiency = 20.0 / 25.0;
}  // namespace

double collective_seconds(Collective c, int64_t bytes, CommGroup g, const Device& d) {
  const double n = static_cast<double>(g.ranks), nodes = static_cast<double>(g.nodes);
  const double nvlink = d.nvlink_bytes_per_s * kNvlinkPayloadEfficiency;
  if (c == Collective::kSendRecv) {
    const double bw = g.nodes > 1 ? d.internode_bytes_per_s : nvlink;
    const double lat = g.nodes > 1 ? 8.4e-6 + 9.6e-6 : 8.4e-6 + 3.4e-6;
    return lat + static_cast<double>(bytes) / bw;
  }
  if (g.ranks <= 1 || bytes <= 0) return 0;
  if (c == Collective::kAllToAll) {
    // moe: NCCL's all-to-all is n - 1 concurrent send/recv pairs per rank (one grouped call,
    // Megatron's all_to_all -> torch.distributed.all_to_all_single); each rank sends (n-1)/n of
    // its `bytes` buffer, over NVLink inside a node, and the network share of it across nodes at
    // the per-GPU network bandwidth. One latency of a send/recv.
    const double share = (n - 1) / n;
    const double bw = g.nodes > 1 ? d.internode_bytes_per_s : nvlink;
    const double lat = g.nodes > 1 ? 8.4e-6 + 9.6e-6 : 8.4e-6 + 3.4e-6;
    return lat + static_cast<double>(bytes) * share / bw;
  }
  const double nsteps = c == Collective::kAllReduce ? 2 * (n - 1) : n - 1;
  const double inter = c == Collective::kAllReduce ? 2 * (nodes - 1) : nodes - 1;
  const double lat = 8.4e-6 + (nsteps - inter) * 3.4e-6 + inter * 9.6e-6;
  double busbw = nvlink;
  if (g.nodes > 1)
    busbw = std::min(busbw, d.internode_bytes_per_s * std::max(1.0, n / nodes));
  const double algbw = busbw * n / nsteps;
  return lat + static_cast<double>(bytes) / algbw;
}

int64_t contended_ns(int64_t work_ns, int64_t comm_busy_ns) {
  if (work_ns <= 0 || comm_busy_ns <= 0) return work_ns;
  const double slow = 1.0 + kOverlapComputeSlowdown;
  const double w = static_cast<double>(work_ns), c = static_cast<double>(comm_busy_ns);
  // Work done inside the busy window at the slowed rate, then the remainder at full speed.
  const double ns = w * slow <= c ? w * slow : c + (w - c / slow);
  return static_cast<int64_t>(ns + 0.5);
}

}  // namespace sim
