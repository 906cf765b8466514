// The CUDA harness's per-op timing table, host side (plain C++: built and unit-tested without
// nvcc). One row per kernel call of the step (forward, recompute, backward) with the op's cost as
// the simulator counts it (sim::OpCost, DESIGN.md §5) and the time measured with CUDA events;
// `actsim calibrate` reads it to fit the device's efficiencies.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/graph.hpp"
#include "sim/result.hpp"

namespace cuda_harness {

// The columns are `actsim calibrate`'s timing table (cli/src/calibrate.cpp, harness/README.md):
// model, precision, attention, batch, seq (the point, as the user named it), op, kind, block,
// phase, name, math16, flops, bytes, kernels, measured_ns.
struct TimingRow {
  std::string model, precision, attention;  // the point's key (filled by actsim-harness)
  int64_t batch = 0, seq = 0;
  bool math16 = true;      // its matmuls run at the 16-bit peak (the engine's rule)
  int64_t kernels = 1;     // kernel launches the simulator counts for the call
  int64_t row_index = 0;   // the measured CSV row (point) this call belongs to
  int32_t op = -1;         // op index in the graph; -1 for the whole-step row
  std::string kind;        // sim::op_kind_name, or "step"
  int32_t block = -1;      // -1 outside the blocks
  std::string phase;       // forward, recompute, backward; "step" for the whole step
  std::string name;        // the op's role in its block
  int64_t flops = 0;       // matmul FLOPs of this call (fwd cost for forward and recompute)
  int64_t bytes = 0;       // bytes its kernels move, as the simulator counts them
  int64_t measured_ns = 0; // CUDA event time, rounded to the nanosecond
};

// Which phase each forward() call is: the walker calls the backend's forward() for an op's first
// run and again for each replay (recompute); backward() is always the backward phase.
// Contract: reset() before a step; forward_phase(op) returns kForward on the op's first call of
// the step and kRecompute afterwards.
class PhaseTracker {
 public:
  explicit PhaseTracker(size_t n_ops) : seen_(n_ops, 0) {}
  void reset() { seen_.assign(seen_.size(), 0); }
  sim::Phase forward_phase(int32_t op);  // throws std::out_of_range for an unknown op
 private:
  std::vector<uint8_t> seen_;
};

// A call's row from the graph: the op's kind, block, name and cost for `phase`.
TimingRow timing_row(const sim::Graph& g, int64_t row_index, int32_t op, sim::Phase phase,
                     int64_t measured_ns);
// The whole-step row (op -1, kind and phase "step"): the graph's total cost of the step's calls.
TimingRow step_row(int64_t row_index, const std::vector<TimingRow>& calls, int64_t measured_ns);

// Milliseconds from cudaEventElapsedTime (float, 0.5 us resolution) to nanoseconds.
int64_t elapsed_ns(float ms);

const std::vector<std::string>& timing_columns();  // header, in order
std::string timing_header();                       // header line with trailing '\n'
std::string timing_csv_row(const TimingRow& r);    // one line with trailing '\n' (RFC 4180)

}  // namespace cuda_harness
