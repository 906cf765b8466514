// The reference executor (DESIGN.md §6, validation step 3): runs the very Schedule the simulator
// produced, with real buffers sized exactly by each storage's bytes, and checks it.
//
// The walker (walker.cpp) is backend-independent: it derives the plan's recompute regions itself,
// keeps its own reference count per storage (forward uses, saved-by edges, checkpoint inputs, the
// SAC cache, autocast's cache, the training loop's holds, gradient slots), frees a storage when
// that count reaches zero and requires the schedule's kFree events to coincide with those drops
// event by event. It counts live bytes, samples the peak where the engine does (after an event's
// allocations and transients) and calls the backend for the math. A backend (the CPU one here; a
// CUDA one later) owns buffers and kernels.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/graph.hpp"
#include "sim/result.hpp"
#include "sim/schedule.hpp"
#include "sim/strategy.hpp"

namespace executor {

// The schedule and the executor disagree, or a kernel read what it may not: the message names the
// event, the op and the storage.
class ExecutionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where the data of a step come from. Same options, same graph: bitwise the same step.
struct StepOptions {
  uint64_t seed = 1;   // weights, token ids and labels
  uint64_t step = 0;   // the step counter keying dropout masks (with the op and the element)
  // Finite differences: parameter `perturb_param` (index into Graph::param_storages), element
  // `perturb_element`, gets `perturb_delta` added before the step (-1: none).
  int32_t perturb_param = -1;
  int64_t perturb_element = 0;
  double perturb_delta = 0;
  // execreg (issue 10): offload plans. The CPU has no copy engine: where each copy to the host
  // ended (which device buffers outlived their kFree, and until which event) is the simulator's
  // time model's, taken from sim::Result::copy_releases of the same graph, plan and schedule.
  // run_cpu refuses an offload plan without them (has_copy_releases false).
  bool has_copy_releases = false;
  std::vector<sim::Result::CopyRelease> copy_releases;
};

struct StepResult {
  int64_t baseline_bytes = 0;    // persistent storages before the step
  int64_t peak_bytes = 0;        // live bytes + transients at the highest sample
  int32_t peak_event_index = -1; // the schedule event of that sample (first one reaching it)
  sim::Phase peak_phase = sim::Phase::kForward;  // that event's phase
  int64_t end_bytes = 0;         // after the step (equals baseline_bytes)
  double loss = 0;               // as stored (fp32)
  double perturbed_value = 0;    // the perturbed parameter element as stored, when asked
  // Per Graph::param_storages entry: its gradient at the optimizer event, as doubles decoded from
  // the stored gradient (dtype of the grad storage), and the raw bytes for bitwise comparisons.
  std::vector<std::vector<double>> grads;
  std::vector<std::vector<uint8_t>> grad_bytes;
  // execreg: offload plans: bytes copied to the host, and the peak of the host pool (the device
  // peak above excludes it, as the simulator's peak_allocated does)
  int64_t offload_bytes = 0;
  int64_t host_peak_bytes = 0;
};

// Contract of a backend: allocate() makes a zero-filled buffer of exactly `bytes` for a storage;
// release() drops it (reading it afterwards is an ExecutionError); scratch bytes are transient
// workspaces of one event. forward()/backward() run op `op` of the graph reading and writing only
// storages the walker has made live; backward reads of forward tensors are limited to `reads`
// (backward_reads()).
class Backend {
 public:
  virtual ~Backend() = default;
  virtual void allocate(int32_t storage, int64_t bytes) = 0;
  virtual void release(int32_t storage) = 0;
  virtual void scratch(int64_t bytes) = 0;      // one transient buffer for the running event
  virtual void release_scratch() = 0;
  virtual void initialize_persistent() = 0;     // weights, buffers (after allocate of each)
  virtual void forward(int32_t op) = 0;
  virtual void backward(int32_t op, const std::vector<int32_t>& reads) = 0;
  virtual void optimizer(StepResult& out) = 0;  // records loss and gradients
  // execreg (issue 10): the offload host pool. copy_to_host copies a live device buffer to the
  // host; copy_to_device allocates the device buffer again and copies the host copy back (which
  // it then drops); drop_host_copy drops a host copy whose device buffer was never released.
  // A backend without a host pool refuses offload plans.
  virtual void copy_to_host(int32_t storage);
  virtual void copy_to_device(int32_t storage);
  virtual void drop_host_copy(int32_t storage);
};

// The CPU backend: single-threaded, deterministic, math in double over values stored in their
// dtypes (bf16 and fp16 rounded to nearest even from fp32).
std::unique_ptr<Backend> make_cpu_backend(const sim::Graph& graph, const StepOptions& options);

// The forward tensors op `op`'s backward kernel reads (storages; outputs' gradients excluded).
std::vector<int32_t> backward_reads(const sim::Graph& graph, int32_t op);

// exec13 (issue 13): the tokens per expert a kTopK op with dim[3] == 1 (HF's router) routes
// when forced: c_j = the n_e of the kWhere op of expert j among the ops after it and before the
// next kTopK (0 where the loop skips the expert), i.e. the counts the simulator's graph sizes
// HF's loop for (sim/src/blocks_moe.cpp expert_tokens: balanced, or --moe-imbalance's hottest
// expert). A real torch.topk routes by the data and would make other counts: the executor makes
// the graph's counts happen so that every gather, expert and index_add_ holds the bytes the
// simulator declares. The assignment (cpu_backend.cpp forced_topk): the experts listed c_j times
// each in order, token t taking entries t, t + n, ..., t + (k - 1) n (k distinct experts when
// every c_j <= n).
std::vector<int64_t> forced_counts(const sim::Graph& graph, int32_t topk_op);

// Runs one step. Throws ExecutionError on any disagreement; sim::Unsupported for graphs the
// executor cannot run (no Graph::args: use sim::build_graph_exec; tensor or data parallelism).
StepResult run_step(const sim::Graph& graph, const sim::Plan& plan, const sim::Schedule& schedule,
                    Backend& backend);
// execreg: the same, for offload plans too, with the copies' ends (StepOptions::copy_releases).
StepResult run_step(const sim::Graph& graph, const sim::Plan& plan, const sim::Schedule& schedule,
                    Backend& backend, const std::vector<sim::Result::CopyRelease>* copies);

// run_step on a fresh CPU backend.
StepResult run_cpu(const sim::Graph& graph, const sim::Plan& plan, const sim::Schedule& schedule,
                   const StepOptions& options = {});

}  // namespace executor
