// The points of a sweep (the cartesian product of the axes) and their evaluation, serially or on a
// thread pool with rows delivered in configuration order (DESIGN.md §7).
//
// Configuration order: model outermost, then device, strategy, then the set-up knobs in flag
// order: profile, precision, attention, dropout, batch, seq, tp, sp, dp, zero, optimizer,
// allocator, then the feature lists ep, lora-rank, cp, fp8, etp, lora-dropout (feat13), then the --ds-* lists (ds3c), then prefetch (polish; fastest). Row i of a sweep is point_at(axes, i).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flags.hpp"
#include "sim/device.hpp"
#include "sim/model.hpp"
#include "sim/setup.hpp"
#include "sim/simulate.hpp"
#include "sim_io/output.hpp"

namespace cli_common {

inline constexpr int64_t kMaxPoints = 100'000'000;

// One configuration: positions in Axes::models, devices and strategies, and the set-up.
struct Point {
  int32_t model = 0;
  int32_t device = 0;
  int32_t strategy = 0;
  int64_t setup_index = 0;  // position among the set-up combinations (equal index, equal setup)
  sim::TrainSetup setup;
};

// For verbs that simulate one configuration (valley, trace): every list must have one value;
// otherwise throws ConfigError naming the first flag with several.
void require_single(const Axes& axes, const CommonFlags& flags, std::string_view verb);

// Number of points; throws ConfigError when the product passes kMaxPoints.
int64_t point_count(const Axes& axes);
// The point of configuration-order position `index` (0 <= index < point_count).
Point point_at(const Axes& axes, int64_t index);
// The simulation options the axes give (the topology; no timeline).
sim::SimOptions sim_options(const Axes& axes);

// Models and devices loaded once, in the order of Axes::models and Axes::devices.
struct Inputs {
  std::vector<sim::ModelConfig> models;
  std::vector<sim::Device> devices;
};
// Folders searched for model and device names, found from this executable (/proc/self/exe).
std::vector<std::filesystem::path> search_dirs();
// Loads every named model and device; a missing or bad file throws ConfigError (a file-level
// error: the caller writes nothing).
Inputs load_inputs(const Axes& axes, const std::vector<std::filesystem::path>& dirs);
// The row's key columns: the set-up with the implementation's defaults made explicit for its
// model (sim::resolve_setup), or as given when the model cannot take them (the row's error says
// why).
sim_io::RowKey row_key(const Axes& axes, const Inputs& inputs, const Point& point);

// Simulates point `index` (sim::simulate). A ConfigError of the point becomes the row's error;
// anything else is an internal error and propagates.
sim_io::Row evaluate_point(const Axes& axes, const Inputs& inputs, int64_t index);

// Above this many rows held for later delivery, a sweep stops sharing graphs (see run_sweep).
inline constexpr int64_t kMaxGroupedRows = 65'536;

struct SweepOptions {
  int jobs = 0;         // worker threads; 0: std::thread::hardware_concurrency()
  int64_t window = 0;   // rows a worker may run ahead of delivery (besides grouping); 0: 64 per job
  bool share_graphs = true;  // build one graph per (model, device, set-up) for all strategies
  // Only rows first <= row_index < end are evaluated and delivered; end < 0: to the last point.
  int64_t first = 0;
  int64_t end = -1;
  // Checked between rows (and at least every 100 ms while waiting for one): once true, the sweep
  // stops and throws Cancelled. Every row delivered before that was delivered whole.
  const std::atomic<bool>* cancel = nullptr;
};

// Thrown by run_sweep when SweepOptions::cancel became true.
struct Cancelled {};

// Rows [first, end) of shard `index` (1-based) of `count`: contiguous row_index ranges in
// configuration order, sizes differing by at most one, together every row exactly once.
struct RowRange {
  int64_t first = 0;
  int64_t end = 0;
};
RowRange shard_range(int64_t total, int64_t index, int64_t count);
// Parses --shard's "i/N" (1 <= i <= N <= kMaxPoints); throws ConfigError naming --shard.
std::pair<int64_t, int64_t> parse_shard(const std::string& text);

// Evaluates every point on `jobs` threads and calls `deliver` with each row in configuration
// order, on the calling thread; an exception from a worker or from `deliver` stops the sweep and
// is rethrown here. Rows are byte-identical whatever the jobs, window and sharing.
//
// Building the graph costs several times one strategy's simulation, so with share_graphs the unit
// of work is one (model, device, set-up) with all its strategies: one sim::build_graph, then
// sim::resolve and sim::simulate_plan per strategy, the same steps as sim::simulate. Strategy
// varies slower than the set-up in configuration order, so the other strategies' rows wait for
// delivery: (strategies - 1) * set-ups rows, which is why sharing stops past kMaxGroupedRows.
void run_sweep(const Axes& axes, const Inputs& inputs, const SweepOptions& options,
               const std::function<void(const sim_io::Row&)>& deliver);

}  // namespace cli_common
