// The worker's two jobs as plain values stepped one unit at a time (no threads here): the valley
// one plan per step, the fit map one cell (every strategy) per step. After any step snapshot()
// is what has been computed so far; the worker publishes snapshots while the GUI draws them, and
// the tests step the jobs by hand.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fit_axes.hpp"
#include "sim/device.hpp"
#include "sim/graph.hpp"
#include "sim/model.hpp"
#include "sim/result.hpp"
#include "sim/setup.hpp"
#include "sim/strategy.hpp"
#include "sim/valley.hpp"

namespace gui {

// What the valley was computed for (the GUI re-requests when this changes).
struct ValleyKey {
  uint64_t revision = 0;
  int64_t n = 0;
  friend bool operator==(const ValleyKey&, const ValleyKey&) = default;
};

struct ValleyRequest {
  ValleyKey key;
  sim::ModelConfig model;  // layers already set to key.n
  sim::TrainSetup setup;
  sim::Device device;
};

// A valley, complete or filling in. While incomplete, `valley` has its head (c, A, baseline, m*,
// sqrt n: the analytic curves are whole) and the first points.size() simulated points, each
// equal to the complete valley's (sim::valley_point is what compute_valley runs).
struct ValleyData {
  ValleyKey key;
  sim::Valley valley;           // sim::compute_valley for the model with n layers, or a prefix
  std::string error;            // config error instead of a valley
  double elapsed_ms = 0;        // wall time from the request's start to this snapshot
  bool complete = false;
};

struct FitMapKey {
  uint64_t revision = 0;
  FitAxis x, y;
  friend bool operator==(const FitMapKey&, const FitMapKey&) = default;
};

struct FitMapRequest {
  FitMapKey key;
  sim::ModelConfig model;
  sim::TrainSetup setup;               // key.x and key.y's knobs are replaced per cell
  sim::Device device;
  std::vector<sim::Strategy> strategies;
  std::vector<int> entries;            // Inputs::strategies index of each strategy (colours)
};

struct FitCell {
  bool done = false;       // simulated (or refused) yet
  bool ok = false;         // simulated without a config error
  bool fits = false;
  int32_t error = -1;      // index into FitMapData::errors when refused
  int64_t peak_bytes = 0;  // peak allocated
  int64_t headroom_bytes = 0;
  int64_t capacity_bytes = 0;  // capacity_bytes() of its result
  double tokens_per_s = 0;
  friend bool operator==(const FitCell&, const FitCell&) = default;
};

struct FitMapData {
  FitMapKey key;
  sim::TrainSetup setup;                 // the other knobs' values
  std::vector<int64_t> xs, ys;           // column and row values (axis_values of key.x, key.y)
  std::vector<std::string> names;        // canonical strategy per grid
  std::vector<int> entries;              // Inputs::strategies index per grid
  std::vector<std::vector<FitCell>> grids;  // per strategy: cell (row r = y, col c = x) at r * cols + c
  std::vector<std::string> errors;       // distinct reasons the model refused cells
  std::vector<int64_t> error_cells;      // cells (over all grids) refused for each reason
  int64_t capacity_lo = 0, capacity_hi = 0;  // least and greatest capacity over simulated cells
  int64_t done = 0, total = 0;           // cells simulated so far, and in all (over all grids)
  double elapsed_ms = 0;
  bool complete = false;

  sim::TrainSetup cell_setup(int cell) const;  // `setup` with the cell's x and y values
};

class ValleyJob {
 public:
  explicit ValleyJob(ValleyRequest r);
  bool step();  // computes the next plan; false once complete (then a no-op)
  bool complete() const { return data_.complete; }
  std::shared_ptr<const ValleyData> snapshot() const;  // a copy of what is done, elapsed set
  const ValleyKey& key() const { return data_.key; }

 private:
  ValleyRequest req_;
  std::optional<sim::Graph> graph_;  // built on the first step
  ValleyData data_;
  bool started_ = false;
  std::chrono::steady_clock::time_point t0_;
};

class FitMapJob {
 public:
  explicit FitMapJob(FitMapRequest r);
  bool step();  // simulates the next cell for every strategy; false once complete
  bool complete() const { return data_.complete; }
  std::shared_ptr<const FitMapData> snapshot() const;

 private:
  int32_t error_index(const std::string& what);
  FitMapRequest req_;
  FitMapData data_;
  size_t next_cell_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

// Allocatable bytes: the device's HBM minus the CUDA context and communicator buffers charged to
// this result (DESIGN.md §3 "fits"); the line drawn as "capacity". peak <= capacity iff fits.
int64_t capacity_bytes(const sim::Result& r);

}  // namespace gui
