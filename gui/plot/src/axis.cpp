#include "gui_plot/axis.hpp"

#include <algorithm>
#include <cmath>

namespace gui_plot {

Range widen_degenerate(Range r) {
  if (r.hi > r.lo) return r;
  const double half = r.lo == 0 ? 1.0 : 0.05 * std::abs(r.lo);
  return {r.lo - half, r.lo + half};
}

Range zoom_about(Range r, double at, double factor, double min_span) {
  const double span = std::max((r.hi - r.lo) / factor, min_span);
  // Keep `at` at the same relative position: (at - lo) / span is unchanged.
  const double rel = r.hi > r.lo ? (at - r.lo) / (r.hi - r.lo) : 0.5;
  const double lo = at - rel * span;
  return {lo, lo + span};
}

Range pan_by_pixels(Range r, double dpx, double px_len) {
  if (px_len <= 0) return r;
  const double dv = dpx / px_len * (r.hi - r.lo);
  return {r.lo - dv, r.hi - dv};
}

Range clamp_into(Range r, double lo, double hi) {
  const double span = r.hi - r.lo;
  if (span >= hi - lo) return {lo, hi};
  if (r.lo < lo) return {lo, lo + span};
  if (r.hi > hi) return {hi - span, hi};
  return r;
}

Range pad_top(Range r, double fraction) { return {r.lo, r.hi + fraction * (r.hi - r.lo)}; }

}  // namespace gui_plot
