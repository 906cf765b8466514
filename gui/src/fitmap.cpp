#include "fitmap.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace gui {

int64_t tokens_per_step(const sim::TrainSetup& s) { return s.micro_batch * s.seq * s.dp; }

int64_t gpus(const sim::TrainSetup& s) { return s.tp * s.cp * s.dp; }  // feat: x cp

std::optional<int> largest_fit(const FitMapData& m, int g) {
  if (g < 0 || g >= static_cast<int>(m.grids.size())) return std::nullopt;
  const auto& grid = m.grids[g];
  std::optional<int> best;
  std::tuple<int64_t, int64_t, double> best_key;  // tokens, -gpus, tok/s: greater is better
  for (int i = 0; i < static_cast<int>(grid.size()); ++i) {
    const FitCell& c = grid[static_cast<size_t>(i)];
    if (!c.ok || !c.fits) continue;
    const sim::TrainSetup s = m.cell_setup(i);
    const std::tuple<int64_t, int64_t, double> key{tokens_per_step(s), -gpus(s), c.tokens_per_s};
    if (!best || key > best_key) best = i, best_key = key;
  }
  return best;
}

PeakRange peak_range(const FitMapData& m) {
  PeakRange r{INT64_MAX, 0};
  for (const auto& grid : m.grids)
    for (const FitCell& c : grid)
      if (c.ok) r.lo = std::min(r.lo, c.peak_bytes), r.hi = std::max(r.hi, c.peak_bytes);
  if (r.hi == 0) return {};
  return r;
}

double color_position(int64_t peak, PeakRange r) {
  if (r.hi <= r.lo || peak <= 0) return 0.5;
  const double t = std::log(static_cast<double>(peak) / static_cast<double>(r.lo)) /
                   std::log(static_cast<double>(r.hi) / static_cast<double>(r.lo));
  return std::clamp(t, 0.0, 1.0);
}

}  // namespace gui
