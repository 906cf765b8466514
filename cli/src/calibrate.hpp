// Fitting a device's efficiencies to measured per-op times (actsim calibrate; DESIGN.md §5, §6).
//
// The model fitted is the engine's (sim/src/engine.cpp kernel_ns): an op's duration is
//   max(flops / (peak x compute_efficiency), bytes / (bandwidth x memory_efficiency))
//   + kernels x launch_overhead_ns,
// with peak the 16-bit tensor-core peak for math16 ops and the fp32 peak otherwise. The fit
// minimizes the sum of squared relative errors (pred - measured) / measured over the table's rows:
// op times span four orders of magnitude, and a relative fit lets the small, launch-bound ops
// determine the launch overhead and the large ones the efficiencies. With x = 1 / compute
// efficiency and y = 1 / memory efficiency the model is linear in (x, y, launch) once each row
// is known to be compute- or memory-bound; the fit alternates that assignment with the linear
// least-squares solution from several starting points and keeps the best (a deterministic
// procedure: same table, same result).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/device.hpp"

namespace actsim_cli {

// One row of a per-op timing table (harness/README.md "Timing tables"): the op of one
// configuration (the grid point: model, precision, attention, batch, seq), its cost as the
// simulator declares it, and its measured time on the device.
struct TimingRow {
  int64_t line = 0;  // in its file, for errors
  std::string model, precision, attention;
  int64_t batch = 0, seq = 0;
  int64_t op = 0;     // op index (graph order for the harness; region order for torch)
  std::string kind;   // sim::op_kind_name, or the torch reference's region kind
  int64_t block = -1;
  std::string phase;  // forward, backward, recompute
  std::string name;
  bool math16 = true;  // matmuls on the 16-bit tensor-core peak (else the fp32 peak)
  int64_t flops = 0;   // matmul FLOPs (sim's OpCost convention)
  int64_t bytes = 0;   // bytes read + written
  int64_t kernels = 1;
  int64_t measured_ns = 0;
  // The engine's GEMM tile/wave quantization for this op (sim::shape_efficiency): the fitted
  // compute efficiency is that of unquantized large GEMMs. Timing tables carry no shapes, so
  // rows read from a file keep 1 (ASSUMPTION: their quantization is folded into the fit).
  double shape_efficiency = 1.0;

  std::string grid_key() const;  // "model,precision,attention,batch,seq"
};

// The columns of a timing table, in order.
const std::vector<std::string>& timing_columns();

// Rows of a timing table's text. Throws sim::ConfigError naming path:line and the column for a
// missing column, a malformed or negative number, or an empty table.
std::vector<TimingRow> parse_timing_table(const std::string& path, const std::string& text);

struct Efficiencies {
  double compute = 0;    // share of the peak FLOP rate
  double memory = 0;     // share of the HBM bandwidth
  double launch_ns = 0;  // per kernel
};

// An op's modeled duration in nanoseconds, unrounded (the engine rounds it once).
double roofline_ns(const TimingRow& row, const sim::Device& device, const Efficiencies& e);

struct KindFit {
  std::string kind;
  int64_t rows = 0;
  double mean_ratio = 0;  // mean of measured / prediction of the device-wide fit
  bool fitted = false;    // its own efficiencies (enough rows, both <= 1)
  double compute = 0, memory = 0;  // when fitted
};

struct FitReport {
  Efficiencies fit;
  bool compute_fitted = false;  // false: no compute-bound row, the device's value is kept
  bool memory_fitted = false;
  int64_t rows = 0;             // rows used
  int64_t skipped = 0;          // rows with no measured time (no kernel ran)
  int64_t compute_bound = 0;
  int64_t memory_bound = 0;
  double rms_rel_error = 0;     // sqrt(mean(((pred - measured) / measured)^2))
  std::vector<KindFit> kinds;   // per op kind, in order of first appearance
  double by_kind_launch_ns = 0;     // the shared launch overhead of the per-kind fit
  double by_kind_rms_rel_error = 0; // and its RMS relative error (0: no per-kind fit)
};

// Fits the three parameters (one efficiency pair for all ops), then, with a shared launch
// overhead, one pair per op kind that has at least min_kind_rows rows (0: no per-kind fit; the
// other kinds share one pair). `source` names the table(s) in errors. Throws sim::ConfigError
// when nothing can be fitted or a device-wide efficiency exceeds 1 (the table's FLOPs or bytes,
// or the device's peaks, are wrong); a kind fitted above 1 is only left out.
FitReport fit_efficiencies(const std::vector<TimingRow>& rows, const sim::Device& device,
                           const std::string& source, int64_t min_kind_rows = 0);

}  // namespace actsim_cli
