// The background worker: the valley and the fit map take many simulations, so they run on one
// std::thread and fill in while the GUI keeps drawing. The GUI posts requests (values: copies of
// the configs) and reads the latest published snapshots (shared_ptr<const ...>) each frame; a new
// request supersedes the one in progress, which stops at its next cell.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sim/device.hpp"
#include "sim/model.hpp"
#include "sim/setup.hpp"
#include "sim/result.hpp"
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

struct ValleyData {
  ValleyKey key;
  sim::Valley valley;           // sim::compute_valley for the model with n layers
  std::string error;            // config error instead of a valley
  double elapsed_ms = 0;        // wall time from the request's start to this snapshot
  bool complete = false;
};

struct FitMapKey {
  uint64_t revision = 0;
  int batch_max_log2 = 0, seq_min_log2 = 0, seq_max_log2 = 0;
  friend bool operator==(const FitMapKey&, const FitMapKey&) = default;
};

struct FitMapRequest {
  FitMapKey key;
  sim::ModelConfig model;
  sim::TrainSetup setup;               // batch and seq are replaced per cell
  sim::Device device;
  std::vector<sim::Strategy> strategies;
  std::vector<int> entries;            // Inputs::strategies index of each strategy (colours)
  std::vector<int64_t> batches;        // columns, ascending
  std::vector<int64_t> seqs;           // rows, ascending
};

struct FitCell {
  bool done = false;       // simulated (or failed) yet
  bool ok = false;         // simulated without a config error
  bool fits = false;
  int64_t peak_bytes = 0;  // peak allocated
  int64_t headroom_bytes = 0;
  double tokens_per_s = 0;
};

struct FitMapData {
  FitMapKey key;
  std::vector<int64_t> batches, seqs;
  std::vector<std::string> names;        // canonical strategy per grid
  std::vector<int> entries;              // Inputs::strategies index per grid
  std::vector<std::vector<FitCell>> grids;  // per strategy: cell (row r = seq, col c = batch) at r * cols + c
  std::vector<std::string> row_errors;   // per row, the first config error of that sequence length
  int64_t capacity_bytes = 0;            // capacity_bytes() of the first simulated cell
  int64_t done = 0, total = 0;           // cells simulated so far, and in all
  double elapsed_ms = 0;
  bool complete = false;
};

// Contract: requests may come from the GUI thread at any rate; valley() and fitmap() return the
// newest published snapshot (possibly of an older key, possibly incomplete). The destructor
// stops the thread at the next cell.
class Worker {
 public:
  Worker();
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void request(ValleyRequest r);  // supersedes any valley request not finished
  void request(FitMapRequest r);  // supersedes any fit map request not finished

  std::shared_ptr<const ValleyData> valley() const;  // newest snapshot; null before the first
  std::shared_ptr<const FitMapData> fitmap() const;
  bool idle() const;  // nothing pending and nothing in progress

 private:
  void loop();
  void run_valley(ValleyRequest r);
  void run_fitmap(FitMapRequest r, uint64_t generation);  // stops when the generation moves on
  bool superseded(uint64_t generation) const;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<ValleyRequest> valley_req_;   // guarded by mu_
  std::optional<FitMapRequest> fitmap_req_;   // guarded by mu_
  std::shared_ptr<const ValleyData> valley_;  // guarded by mu_
  std::shared_ptr<const FitMapData> fitmap_;  // guarded by mu_
  bool stop_ = false;                         // guarded by mu_
  std::atomic<uint64_t> fitmap_generation_{0};  // bumped per fit map request
  std::atomic<bool> busy_{false};
  std::thread thread_;  // last: starts after the members above exist
};

// Allocatable bytes: the device's HBM minus the CUDA context and communicator buffers charged to
// this result (DESIGN.md §3 "fits"); the line drawn as "capacity". peak <= capacity iff fits.
int64_t capacity_bytes(const sim::Result& r);

}  // namespace gui
