#include "jobs.hpp"

#include <algorithm>

#include "clock.hpp"
#include "sim/error.hpp"
#include "sim/simulate.hpp"

namespace gui {

int64_t capacity_bytes(const sim::Result& r) {
  return r.device_bytes - r.cuda_context_bytes - r.comm_buffer_bytes;
}

sim::TrainSetup FitMapData::cell_setup(int cell) const {
  sim::TrainSetup s = setup;
  const int cols = static_cast<int>(xs.size());
  if (cols == 0) return s;
  set_knob(s, key.x.knob, xs[static_cast<size_t>(cell % cols)]);
  set_knob(s, key.y.knob, ys[static_cast<size_t>(cell / cols)]);
  return s;
}

ValleyJob::ValleyJob(ValleyRequest r) : req_(std::move(r)), t0_(Clock::now()) {
  data_.key = req_.key;
}

bool ValleyJob::step() {
  if (data_.complete) return false;
  try {
    if (!started_) {
      // First step: the graph and the head (the `none` and `full` runs).
      started_ = true;
      graph_.emplace(sim::build_graph(req_.model, req_.setup, req_.device));
      data_.valley = sim::valley_head(*graph_, req_.device);
    } else {
      const int64_t m = static_cast<int64_t>(data_.valley.points.size()) + 1;
      sim::add_point(data_.valley, sim::valley_point(*graph_, req_.device, data_.valley, m));
    }
  } catch (const sim::ConfigError& e) {
    data_.error = e.what();
    data_.valley.points.clear();
    data_.complete = true;
  }
  if (static_cast<int64_t>(data_.valley.points.size()) >= data_.valley.n && started_) data_.complete = true;
  if (data_.complete) graph_.reset();
  return !data_.complete;
}

std::shared_ptr<const ValleyData> ValleyJob::snapshot() const {
  auto d = std::make_shared<ValleyData>(data_);
  d->elapsed_ms = ms_since(t0_);
  return d;
}

FitMapJob::FitMapJob(FitMapRequest r) : req_(std::move(r)), t0_(Clock::now()) {
  FitMapData& d = data_;
  d.key = req_.key;
  d.setup = req_.setup;
  d.xs = axis_values(d.key.x);
  d.ys = axis_values(d.key.y);
  d.entries = req_.entries;
  for (const sim::Strategy& s : req_.strategies) d.names.push_back(s.canonical());
  const size_t cells = d.xs.size() * d.ys.size();
  d.grids.assign(req_.strategies.size(), std::vector<FitCell>(cells));
  d.total = static_cast<int64_t>(cells * req_.strategies.size());
  d.complete = d.total == 0;
}

int32_t FitMapJob::error_index(const std::string& what) {
  auto& errors = data_.errors;
  const auto it = std::find(errors.begin(), errors.end(), what);
  if (it != errors.end()) return static_cast<int32_t>(it - errors.begin());
  errors.push_back(what);
  data_.error_cells.push_back(0);
  return static_cast<int32_t>(errors.size() - 1);
}

bool FitMapJob::step() {
  if (data_.complete) return false;
  FitMapData& d = data_;
  const size_t cell = next_cell_++;
  const sim::TrainSetup setup = d.cell_setup(static_cast<int>(cell));
  const auto refuse = [&](FitCell& c, const std::string& what) {
    c.error = error_index(what);
    ++d.error_cells[static_cast<size_t>(c.error)];
  };
  try {
    const sim::Graph g = sim::build_graph(req_.model, setup, req_.device);
    for (size_t s = 0; s < req_.strategies.size(); ++s) {
      FitCell& c = d.grids[s][cell];
      c.done = true;
      try {
        // A budget would be planned anew in every cell: not drawn in the fit map.
        if (req_.strategies[s].kind == sim::StrategyKind::kBudget)
          throw sim::ConfigError("--strategy", "budget", "budget: plans are not drawn in the fit map");
        const sim::Result res = sim::simulate_plan(g, sim::resolve(req_.strategies[s], g.n_blocks), req_.device);
        c.ok = true;
        c.fits = res.fits;
        c.peak_bytes = res.peak_allocated_bytes;
        c.headroom_bytes = res.headroom_bytes;
        c.capacity_bytes = capacity_bytes(res);
        c.tokens_per_s = res.tokens_per_s;
        d.capacity_lo = d.capacity_lo == 0 ? c.capacity_bytes : std::min(d.capacity_lo, c.capacity_bytes);
        d.capacity_hi = std::max(d.capacity_hi, c.capacity_bytes);
      } catch (const sim::ConfigError& e) {
        refuse(c, e.what());  // this strategy does not apply here (e.g. every:k with k > n)
      }
    }
  } catch (const sim::ConfigError& e) {
    for (auto& grid : d.grids) {
      grid[cell].done = true;
      refuse(grid[cell], e.what());
    }
  }
  d.done += static_cast<int64_t>(req_.strategies.size());
  if (d.done >= d.total) d.complete = true;
  return !d.complete;
}

std::shared_ptr<const FitMapData> FitMapJob::snapshot() const {
  auto d = std::make_shared<FitMapData>(data_);
  d->elapsed_ms = ms_since(t0_);
  return d;
}

}  // namespace gui
