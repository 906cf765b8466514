#include "fitmap.hpp"

#include <algorithm>
#include <cmath>

namespace gui {

std::optional<int> largest_fit(const FitMapData& m, int g) {
  if (g < 0 || g >= static_cast<int>(m.grids.size())) return std::nullopt;
  const auto& grid = m.grids[g];
  const int cols = static_cast<int>(m.batches.size());
  std::optional<int> best;
  int64_t best_tokens = 0;
  double best_rate = 0;
  for (int i = 0; i < static_cast<int>(grid.size()); ++i) {
    const FitCell& c = grid[i];
    if (!c.ok || !c.fits) continue;
    const int64_t tokens = m.batches[i % cols] * m.seqs[i / cols];
    if (!best || tokens > best_tokens || (tokens == best_tokens && c.tokens_per_s > best_rate)) {
      best = i;
      best_tokens = tokens;
      best_rate = c.tokens_per_s;
    }
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
