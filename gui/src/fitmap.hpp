// Reading the fit map's grids: the largest configuration that fits, and the colour scale.
#pragma once

#include <cstdint>
#include <optional>

#include "jobs.hpp"

namespace gui {

// Tokens one step processes: micro-batch x sequence x data-parallel ranks.
int64_t tokens_per_step(const sim::TrainSetup& s);
// GPUs one step occupies: tensor x data-parallel ranks.
int64_t gpus(const sim::TrainSetup& s);

// The "largest" fitting cell of grid `g`, whatever the two knobs: the most tokens per step
// (b x s x dp, the knobs off the axes at the set-up's values), then the fewest GPUs (tp x dp),
// then the highest throughput, then the first in scan order (lower values, e.g. the lower ZeRO
// stage). nullopt when nothing fits (yet). The view states this rule.
std::optional<int> largest_fit(const FitMapData& map, int g);
inline constexpr const char* kLargestRule =
    "most tokens per step (b x s x dp), then fewest GPUs (tp x dp), then the highest throughput";

// Least and greatest simulated peak over all grids (0, 0 when none), for one shared colour scale.
struct PeakRange {
  int64_t lo = 0, hi = 0;
};
PeakRange peak_range(const FitMapData& map);

// Position of `peak` on the colour scale: log-scaled between the range's ends, in [0, 1].
double color_position(int64_t peak, PeakRange range);

}  // namespace gui
