// Reading the fit map's grids: the largest configuration that fits, and the colour scale.
#pragma once

#include <cstdint>
#include <optional>

#include "worker.hpp"

namespace gui {

// The cell of grid `g` that fits with the most tokens per micro-batch (b x s), ties broken by
// throughput; nullopt when nothing fits (yet).
std::optional<int> largest_fit(const FitMapData& map, int g);

// Least and greatest simulated peak over all grids (0, 0 when none), for one shared colour scale.
struct PeakRange {
  int64_t lo = 0, hi = 0;
};
PeakRange peak_range(const FitMapData& map);

// Position of `peak` on the colour scale: log-scaled between the range's ends, in [0, 1].
double color_position(int64_t peak, PeakRange range);

}  // namespace gui
