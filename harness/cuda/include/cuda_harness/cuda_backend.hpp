// The CUDA backend of the executor (DESIGN.md §6, validation step 4): the walker of
// harness/executor drives it over the very Schedule the simulator produced, as it drives the CPU
// backend; storages live in one device arena (arena.hpp) whose exact-byte ledger must reach the
// walker's peak; every forward, recompute and backward call is timed with CUDA events
// (timing.hpp). Built only when nvcc is found (ACTSIM_HAVE_CUDA).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cuda_harness/timing.hpp"
#include "executor/executor.hpp"

namespace cuda_harness {

// Empty when a CUDA device can be used; otherwise one line saying why (cudaGetDeviceCount's
// error, e.g. no driver, or zero devices). Call it before anything else touches the GPU.
std::string device_unavailable();

// The GPU, driver and runtime versions, for the record ("NVIDIA H100 ..., driver 13.0, ...").
std::string device_description();

struct CudaStep {
  executor::StepResult step;      // the walker's account (peak, baseline, loss, gradients)
  int64_t ledger_peak_bytes = 0;  // the device arena's exact-byte peak (equals step.peak_bytes)
  int64_t arena_high_water = 0;   // highest end offset used in the arena (placement, aligned)
  int64_t work_bytes = 0;         // the harness's own fp32 work buffers (not storages)
  std::vector<TimingRow> timings; // the measured step's calls, then its whole-step row
};

// Runs the step twice on one device backend (the first warms up cuBLAS and the caches, and its
// timings are dropped) and returns the second. Throws executor::ExecutionError when the
// schedule and the walker disagree or the ledger and the walker disagree; std::runtime_error on
// a CUDA or cuBLAS error (naming the call).
CudaStep run_cuda(const sim::Graph& graph, const sim::Plan& plan, const sim::Schedule& schedule,
                  const executor::StepOptions& options, int64_t row_index);

}  // namespace cuda_harness
