// What one simulated step produces. All bytes and FLOPs are per GPU (per rank); time is
// nanoseconds of simulated device time.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace sim {

// Ledger categories (STYLE.md rule 5). Order is the breakdown's column order.
enum class Category : uint8_t {
  kWeights,      // parameters (and persistent buffers such as causal masks)
  kGrads,        // parameter gradients (persistent main_grad, or lazily allocated)
  kOptimizer,    // optimizer state (master weights, moments, loss-scaler state)
  kActivations,  // tensors made by the forward pass (saved or not yet consumed)
  kRecomputed,   // tensors made again by recomputation during backward
  kActGrads,     // gradients of activations
  kCasts,        // autocast's cached 16-bit copies of fp32 weights
  kTransient,    // op workspaces and temporaries, gradient accumulation buffers
  kWorkspace,    // cuBLAS workspace
  kComm,         // DDP gradient buckets, gathered ZeRO-3 parameters
  kCount,
};
inline constexpr int kCategoryCount = static_cast<int>(Category::kCount);
std::string_view category_name(Category c);  // "weights", "grads", ...

using Breakdown = std::array<int64_t, kCategoryCount>;  // bytes per category

enum class Phase : uint8_t { kForward, kBackward, kRecompute, kOptimizer };
std::string_view phase_name(Phase p);

// One memory sample: live bytes right after the allocations of event `event_index` (under the
// caching allocator, its allocated bytes: rounded blocks).
struct MemorySample {
  int64_t t_ns = 0;
  int64_t allocated_bytes = 0;
  int32_t event_index = 0;
  Phase phase = Phase::kForward;
  int64_t reserved_bytes = 0;  // segments held (caching allocator); equals allocated under exact
};

inline constexpr int32_t kStallSpan = -2;  // OpSpan::op of compute waiting for a prefetch
inline constexpr int32_t kHostWaitSpan = -3;  // OpSpan::op of the GPU idle, waiting on the host
inline constexpr int32_t kCommWaitSpan = -4;  // OpSpan::op of compute waiting for DP/FSDP comm

// One op's run on a stream, for timelines and traces.
struct OpSpan {
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
  int32_t op = 0;       // index into the Graph's ops; kStallSpan for a wait on a copy
  int32_t stream = 0;   // 0 compute, 1 collective, 2 device-to-host copy, 3 host-to-device copy,
                        // 4 host lane (op dispatch), 5 data-parallel communication
  Phase phase = Phase::kForward;
  int32_t storage = -1; // copies: the storage moved; stream 5: the collective (1 all-reduce,
                        // 2 all-gather, 3 reduce-scatter)
};

struct Result {
  // Memory (DESIGN.md §3 "What the figures mean"). peak_allocated_bytes is PyTorch's
  // allocated_bytes.all.peak under --allocator caching and requested_bytes.all.peak (the exact
  // ledger) under exact. The peak's time, event, op and breakdown below, and the activation
  // figures, are those of the exact ledger's peak (peak_requested_bytes) under every allocator.
  int64_t peak_allocated_bytes = 0;
  int64_t peak_requested_bytes = 0;            // exact ledger: sum of live storages at its peak
  int64_t allocator_allocated_peak_bytes = 0;  // caching: blocks in use; exact: = requested
  int64_t peak_reserved_bytes = 0;             // caching: segments held; exact: = requested
  int64_t peak_t_ns = 0;           // simulated time of the peak sample
  int32_t peak_event_index = -1;   // schedule event at which the peak was sampled
  Phase peak_phase = Phase::kForward;
  std::string peak_op;             // name of the op running at the peak ("block 3 fc1 backward")
  Breakdown peak_breakdown{};      // by category at the peak
  int64_t activation_peak_bytes = 0;
  int64_t block_peak_bytes = 0;    // highest sample while a block's op runs (not embedding/head)
  int64_t activation_bytes_per_layer = 0;          // max over blocks
  std::vector<int64_t> activation_bytes_per_block; // live at the end of forward, per block
  int64_t baseline_bytes = 0;      // weights + grads (persistent) + optimizer before the step
  int64_t end_bytes = 0;           // after the step; equals baseline_bytes (ledger invariant)
  // What the micro-batch holds between its forward and its backward (live bytes less the
  // baseline, at the first event after the forward pass), and the part attributed to blocks:
  // each further micro-batch in flight in a pipeline holds as much (sim/pipeline.hpp).
  int64_t stash_bytes = 0;
  int64_t stash_block_bytes = 0;
  // Pipeline runs (sim/pipeline.hpp): the stage whose figures these are (the worst) and the
  // micro-batches (chunk micro-batches when interleaved) it holds in flight.
  int64_t pp_stage = 0;
  int64_t pp_in_flight = 1;

  // Persistent state per rank.
  int64_t layers = 0;              // transformer blocks of the model
  int64_t params = 0;              // whole model
  int64_t params_per_rank = 0;
  int64_t weights_bytes = 0;
  int64_t grads_bytes = 0;         // all parameter gradients once allocated
  int64_t optimizer_bytes = 0;
  int64_t workspace_bytes = 0;

  // Work.
  int64_t fwd_flops = 0;        // matmul FLOPs of the forward pass (Korthikanti App. A)
  int64_t bwd_flops = 0;        // matmul FLOPs of the backward pass
  int64_t recompute_flops = 0;  // matmul FLOPs of recomputed forward ops
  int64_t model_flops = 0;      // fwd + bwd (recompute excluded)

  // Time.
  int64_t step_time_ns = 0;
  int64_t fwd_time_ns = 0;
  int64_t bwd_time_ns = 0;        // backward nodes, recompute excluded
  int64_t recompute_time_ns = 0;
  int64_t optimizer_time_ns = 0;
  int64_t comm_time_ns = 0;       // tensor-parallel collectives on the critical path
  int64_t offload_stall_ns = 0;   // compute waiting for host-to-device copies (offload)
  int64_t host_wait_ns = 0;       // GPU idle waiting for the host to issue ops (host-bound)
  int64_t dp_comm_ns = 0;         // data-parallel/ZeRO/FSDP collectives on their own stream
  int64_t comm_wait_ns = 0;       // compute waiting for them (the exposed part)
  int64_t dp_comm_exposed_ns = 0; // of which once per step (gradient reduction's tail, ZeRO gathers)
  int64_t dp_buckets = 0;         // gradient reduction collectives (DDP buckets, FSDP blocks)
  double tokens_per_s = 0;
  double tokens_per_s_per_gpu = 0;  // tokens_per_s over the tp x pp GPUs of a replica
  double mfu = 0;   // model FLOPs / (step time x peak)
  double hfu = 0;   // (model + recompute FLOPs) / (step time x peak)

  // Fit.
  int64_t cuda_context_bytes = 0;
  int64_t comm_buffer_bytes = 0;
  int64_t device_bytes = 0;       // what CUDA offers: hbm_bytes - driver_reserved_bytes
  int64_t headroom_bytes = 0;     // device - (peak + context + comm buffers); negative if not;
                                  // the peak is peak_reserved_bytes under caching
  bool fits = false;

  // Offload (DESIGN.md §4): bytes copied to the host and back, and the peak of pinned host memory
  // holding them (not device memory: it does not count against the fit).
  int64_t offload_bytes = 0;
  int64_t pinned_host_bytes = 0;

  // Recorded only when SimOptions::record_timeline is set.
  std::vector<MemorySample> timeline;
  std::vector<Breakdown> timeline_breakdown;  // per sample: the ledger by category, transients
                                              // of the running event excluded
  std::vector<OpSpan> spans;

  // cpfp8 (issues 11/13): the peak mfu and hfu divide by (the dense 16-bit one, fp32 under fp32:
  // sim/src/utilization.cpp), the model FLOPs run as fp8 GEMMs (--fp8), and the MFU against the
  // mixed peak (fp8 GEMM FLOPs at the dense fp8 peak, the rest at the 16-bit one; 0 without fp8).
  double mfu_peak_flops_per_s = 0;
  int64_t fp8_model_flops = 0;
  double mfu_fp8_mixed = 0;
  // moetp (issue 13): gradient bytes reduced per step over dp (DDP buckets, ZeRO-3 blocks), and
  // the routed experts' over their expert-data-parallel group (edp = tp cp dp / (etp ep), where
  // it differs from dp; engine.cpp setup_comm)
  int64_t grad_reduce_bytes = 0;
  int64_t expert_grad_reduce_bytes = 0;

  // execreg (issue 10): where the offload copies ended, for the CPU executor (which has no copy
  // engine and takes the copy stream's timing from here). Per device buffer whose kFree came
  // while its copy to the host was still running: the event before whose sample it was released
  // (`taken_back` 0; events.size() for the step's end), or the prefetch that found it still on
  // the device and used it as it was (`taken_back` 1). Empty unless the plan offloads.
  struct CopyRelease {
    int32_t event = 0;
    int32_t storage = 0;
    uint8_t taken_back = 0;
  };
  std::vector<CopyRelease> copy_releases;

  // --- ds3c (issue 10): DeepSpeed ZeRO-3 (deepspeed-bf16), as the engine replays its coordinator
  // over the step's own module order, recompute included (sim/src/deepspeed.cpp ds3_replay): the
  // most bf16 bytes of gathered (non-persisted) parameters alive at once, the bytes all-gathered
  // in the step (recompute's fetches included) and, of those, the recompute's
  int64_t ds3_gathered_peak_bytes = 0;
  int64_t ds3_gather_bytes = 0;
  int64_t ds3_recompute_gather_bytes = 0;
  // --- end ds3c ---
  // --- feat14 (issue 13): Megatron's TP all-reduce of the replicated parameters' gradients
  // (Graph::tp_replicated_grad_bytes): its payload and its time on the communication stream,
  // which the optimizer step waits for (exposed; also in dp_comm_exposed_ns) ---
  int64_t tp_grad_allreduce_bytes = 0;
  int64_t tp_grad_allreduce_ns = 0;
  // --- end feat14 ---
};

}  // namespace sim
