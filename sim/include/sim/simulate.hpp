// The pipeline of DESIGN.md §2 in one call: graph, schedule, engine, result.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/device.hpp"
#include "sim/graph.hpp"
#include "sim/model.hpp"
#include "sim/result.hpp"
#include "sim/schedule.hpp"
#include "sim/setup.hpp"
#include "sim/strategy.hpp"

namespace sim {

struct SimOptions {
  bool record_timeline = false;  // fill Result::timeline and Result::spans
  // Topology (DESIGN.md §5): GPUs per node joined by NVLink; groups spanning nodes use the
  // device's inter-node bandwidth (--gpus-per-node).
  int64_t gpus_per_node = 8;
};

// Scratch memory that repeated simulations on one thread reuse, so that each call does not page
// in megabytes of fresh vectors (BENCHMARKS.md: page faults were a third of a simulation's time).
// Only capacity carries over: a result never depends on what the workspace held before
// (tests/test_workspace.cpp). Not shareable between threads; one per worker.
class Workspace {
 public:
  Workspace();
  ~Workspace();
  Workspace(Workspace&&) noexcept;
  Workspace& operator=(Workspace&&) noexcept;
  struct Buffers;  // sim/src/workspace.hpp
  Buffers& buffers() { return *buffers_; }

 private:
  std::unique_ptr<Buffers> buffers_;
};

// One step of `model` under `setup` on `device` with `strategy`. Throws ConfigError (or
// Unsupported) for bad input; never returns a partial result.
Result simulate(const ModelConfig& model, const TrainSetup& setup, const Device& device,
                const Strategy& strategy, const SimOptions& options = {});

Result simulate(const ModelConfig& model, const TrainSetup& setup, const Device& device,
                const Strategy& strategy, const SimOptions& options, Workspace& workspace);

// The engine alone, for callers that reuse a graph across plans (valley, sweeps, planner).
Result run_engine(const Graph& graph, const Schedule& schedule, const Device& device,
                  const SimOptions& options);
Result simulate_plan(const Graph& graph, const Plan& plan, const Device& device,
                     const SimOptions& options = {});
// planner5 (issue 15): run_engine, except that under a caching allocator the measured step is
// not run when the warm-up step leaves more than `reserved_limit` bytes reserved (the measured
// step's reserved peak starts there); then `stopped` is set and the result is the warm-up
// step's, its peak_reserved_bytes the bytes it left reserved. Its times and FLOPs are the
// measured step's (tests/test_planner.cpp). The budget planner settles misses with it.
Result run_engine_bounded(const Graph& graph, const Schedule& schedule, const Device& device,
                          const SimOptions& options, int64_t reserved_limit, bool& stopped);
Result simulate_plan(const Graph& graph, const Plan& plan, const Device& device,
                     const SimOptions& options, Workspace& workspace);

// Throws Unsupported("--strategy") for a plan the graph's implementation has no code for
// (sac:torchtitan and layer-sac:k outside --impl torchtitan). simulate_plan calls it.
void check_plan(const Plan& plan, const Graph& graph);

// The graph's: the paper profile's, else its implementation's ImplSpec::checkpoint.
RecomputeMode recompute_mode(const Graph& graph);

// The share of the large-GEMM rate an op's GEMMs reach after tile and wave quantization (the
// engine's kernel classes, sim/src/kernels.cpp): its FLOPs over the sum of each GEMM's FLOPs over
// its own efficiency; 1 for ops without GEMMs or shapes.
double shape_efficiency(const Op& op, bool backward, const Device& device);

// One storage live at the peak, with the reason it is alive.
struct PeakItem {
  int64_t bytes = 0;   // all storages of the group together
  int64_t count = 1;   // storages grouped (the same role and reason in several blocks)
  Category category = Category::kActivations;
  int32_t block = -1;  // the block, or -1 for several or none
  std::string what;  // "block 3 softmax out (bf16)"
  std::string why;   // "saved for block 3 av backward", "checkpoint input of blocks 0-3", ...
};

// The largest `max_items` storages live at the result's peak, largest first. Replays the schedule
// to the peak's event (only when asked; sweeps never pay for it).
std::vector<PeakItem> explain_peak(const Graph& graph, const Plan& plan, const Result& result,
                                   int max_items);

}  // namespace sim
