#include "worker.hpp"

#include <chrono>

#include "sim/error.hpp"
#include "sim/graph.hpp"
#include "sim/simulate.hpp"

namespace gui {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Snapshots of the fit map are published at most this often (and at the end), so the GUI sees it
// fill in without the worker copying the grid after every cell.
constexpr double kPublishEveryMs = 25;

}  // namespace

int64_t capacity_bytes(const sim::Result& r) {
  return r.device_bytes - r.cuda_context_bytes - r.comm_buffer_bytes;
}

Worker::Worker() : thread_([this] { loop(); }) {}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  fitmap_generation_.fetch_add(1);  // stop a fit map in progress
  cv_.notify_all();
  thread_.join();
}

void Worker::request(ValleyRequest r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    valley_req_ = std::move(r);
  }
  cv_.notify_all();
}

void Worker::request(FitMapRequest r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    fitmap_req_ = std::move(r);
    fitmap_generation_.fetch_add(1);
  }
  cv_.notify_all();
}

std::shared_ptr<const ValleyData> Worker::valley() const {
  std::lock_guard<std::mutex> lock(mu_);
  return valley_;
}

std::shared_ptr<const FitMapData> Worker::fitmap() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fitmap_;
}

bool Worker::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !valley_req_ && !fitmap_req_ && !busy_.load();
}

bool Worker::superseded(uint64_t generation) const {
  return fitmap_generation_.load() != generation;
}

void Worker::loop() {
  for (;;) {
    std::optional<ValleyRequest> v;
    std::optional<FitMapRequest> f;
    uint64_t generation = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || valley_req_ || fitmap_req_; });
      if (stop_) return;
      // The valley first: one quick job, and the n slider should answer at once.
      if (valley_req_) {
        v.swap(valley_req_);
      } else {
        f.swap(fitmap_req_);
        generation = fitmap_generation_.load();
      }
      busy_ = true;
    }
    if (v) run_valley(std::move(*v));
    if (f) run_fitmap(std::move(*f), generation);
    busy_ = false;
  }
}

void Worker::run_valley(ValleyRequest r) {
  const auto t0 = Clock::now();
  auto out = std::make_shared<ValleyData>();
  out->key = r.key;
  try {
    const sim::Graph g = sim::build_graph(r.model, r.setup, r.device);
    out->valley = sim::compute_valley(g, r.device);
  } catch (const sim::ConfigError& e) {
    out->error = e.what();
  }
  out->elapsed_ms = ms_since(t0);
  out->complete = true;
  std::lock_guard<std::mutex> lock(mu_);
  valley_ = std::move(out);
}

void Worker::run_fitmap(FitMapRequest r, uint64_t generation) {
  const auto t0 = Clock::now();
  FitMapData d;
  d.key = r.key;
  d.batches = r.batches;
  d.seqs = r.seqs;
  d.entries = r.entries;
  for (const sim::Strategy& s : r.strategies) d.names.push_back(s.canonical());
  const size_t cols = r.batches.size(), rows = r.seqs.size();
  d.grids.assign(r.strategies.size(), std::vector<FitCell>(rows * cols));
  d.row_errors.assign(rows, {});
  d.total = static_cast<int64_t>(rows * cols * r.strategies.size());
  const auto publish = [&](bool complete) {
    d.elapsed_ms = ms_since(t0);
    d.complete = complete;
    auto snap = std::make_shared<const FitMapData>(d);
    std::lock_guard<std::mutex> lock(mu_);
    fitmap_ = std::move(snap);
  };
  auto last_publish = Clock::now();
  for (size_t row = 0; row < rows; ++row) {
    for (size_t col = 0; col < cols; ++col) {
      // A valley request arriving meanwhile is answered between cells (the n slider stays live).
      std::optional<ValleyRequest> v;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
        if (valley_req_) v.swap(valley_req_);
      }
      if (v) run_valley(std::move(*v));
      if (superseded(generation)) return;

      sim::TrainSetup setup = r.setup;
      setup.micro_batch = r.batches[col];
      setup.seq = r.seqs[row];
      const size_t cell = row * cols + col;
      try {
        const sim::Graph g = sim::build_graph(r.model, setup, r.device);
        for (size_t s = 0; s < r.strategies.size(); ++s) {
          FitCell& c = d.grids[s][cell];
          c.done = true;
          try {
            const sim::Result res =
                sim::simulate_plan(g, sim::resolve(r.strategies[s], g.n_blocks), r.device);
            c.ok = true;
            c.fits = res.fits;
            c.peak_bytes = res.peak_allocated_bytes;
            c.headroom_bytes = res.headroom_bytes;
            c.tokens_per_s = res.tokens_per_s;
            if (d.capacity_bytes == 0) d.capacity_bytes = capacity_bytes(res);
          } catch (const sim::ConfigError&) {
            // This strategy does not apply (e.g. every:k with k > n): the cell stays empty.
          }
          ++d.done;
        }
      } catch (const sim::ConfigError& e) {
        for (auto& grid : d.grids) grid[cell].done = true;
        d.done += static_cast<int64_t>(r.strategies.size());
        if (d.row_errors[row].empty()) d.row_errors[row] = e.what();
      }
      if (ms_since(last_publish) >= kPublishEveryMs) {
        publish(false);
        last_publish = Clock::now();
      }
    }
  }
  publish(true);
}

}  // namespace gui
