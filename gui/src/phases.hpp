// Forward / backward / recompute / optimizer intervals of a simulated step, for shading.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/result.hpp"

namespace gui {

struct PhaseBand {
  int64_t t0_ns = 0;  // first sample of the phase
  int64_t t1_ns = 0;  // first sample of the next phase (the step's end for the last band)
  sim::Phase phase = sim::Phase::kForward;
};

// Maximal runs of timeline samples in one phase, as time intervals covering [0, step end].
// Recompute interleaves with backward (one band per checkpointed segment). Empty without a
// recorded timeline.
std::vector<PhaseBand> phase_bands(const sim::Result& result);

}  // namespace gui
