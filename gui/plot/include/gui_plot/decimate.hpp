// Trimming long series to what one frame can draw (Tracy's approach): cull to the visible range
// with a binary search, then merge everything that falls into one pixel column into its min and
// max. 10^6 samples become at most one column per pixel.
//
// Step semantics (memory is a step function of time): sample i holds the value y[i] on the
// half-open interval [t[i], t[i+1]); the last sample holds until the end of the series. Samples
// with equal times are instants: each still counts toward its column's min and max (a peak that
// lasts 0 ns is not lost), and the last of them is the value that holds afterwards.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "gui_plot/axis.hpp"

namespace gui_plot {

// One pixel column of a decimated step series.
struct StepColumn {
  int px = 0;             // column: floor of the x pixel
  double y_min = 0;       // least value held inside the column (entering value included)
  double y_max = 0;       // greatest value held inside the column
  double y_last = 0;      // value held when the column ends (until the next column's first sample)
  std::size_t max_index = 0;  // a sample with value y_max (the entering one if it is the max)
  std::size_t last_index = 0; // the sample holding when the column ends (its value is y_last)
};

// First index i in [0, n) with t_of(i) > t (n if none); t_of ascending.
template <class TOf>
std::size_t upper_index(std::size_t n, TOf&& t_of, double t) {
  std::size_t lo = 0, hi = n;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (static_cast<double>(t_of(mid)) <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// First index i in [0, n) with t_of(i) >= t (n if none); t_of ascending.
template <class TOf>
std::size_t lower_index(std::size_t n, TOf&& t_of, double t) {
  std::size_t lo = 0, hi = n;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (static_cast<double>(t_of(mid)) < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// The columns of the step series (t_of(i), y_of(i)), i < n, t ascending, on the x axis `x`
// (x.lo..x.hi visible), one per pixel column that holds at least one sample. The sample holding
// at x.lo (the last one at or before it) enters the first column. Columns ascend in px; between
// two columns the value is the earlier column's y_last (draw a horizontal line). Pixel columns
// are clamped to [floor(x.px_min), floor(x.px_max)].
template <class TOf, class YOf>
std::vector<StepColumn> decimate_steps(std::size_t n, TOf&& t_of, YOf&& y_of, const Axis& x) {
  std::vector<StepColumn> out;
  if (n == 0 || !(x.hi > x.lo)) return out;
  std::size_t i = upper_index(n, t_of, x.lo);
  if (i > 0) --i;  // the sample holding at x.lo
  const std::size_t end = upper_index(n, t_of, x.hi);
  const int px_first = static_cast<int>(std::floor(x.px_min));
  const int px_last = static_cast<int>(std::floor(x.px_max));
  StepColumn col;
  bool open = false;
  for (; i < end; ++i) {
    const double t = static_cast<double>(t_of(i));
    int px = static_cast<int>(std::floor(x.to_px(t < x.lo ? x.lo : t)));
    px = px < px_first ? px_first : px > px_last ? px_last : px;
    const double y = static_cast<double>(y_of(i));
    if (open && px == col.px) {
      if (y < col.y_min) col.y_min = y;
      if (y > col.y_max) col.y_max = y, col.max_index = i;
      col.y_last = y;
      col.last_index = i;
      continue;
    }
    if (open) {
      out.push_back(col);
      // The value entering the new column is the one the previous column left.
      const double entering = col.y_last;
      const std::size_t entering_index = i - 1;
      col = {px, entering, entering, y, entering_index, i};
      if (y < col.y_min) col.y_min = y;
      if (y > col.y_max) col.y_max = y, col.max_index = i;
    } else {
      col = {px, y, y, y, i, i};
      open = true;
    }
  }
  if (open) out.push_back(col);
  return out;
}

// One drawable item of a lane of bars.
struct BarItem {
  double px0 = 0;           // left pixel
  double px1 = 0;           // right pixel (>= px0 + 1: every item covers at least a pixel)
  std::size_t first = 0;    // first bar merged into it
  std::size_t count = 0;    // bars merged; 1 is a bar drawn as itself
};

// Bars [start_of(i), start_of(i) + dur_of(i)) of one lane, i < n, non-overlapping and ascending
// (one stream runs one op at a time). A bar at least `min_px` wide is its own item; runs of
// narrower bars with equal key_of(i) (the phase: colours never mix) whose pixels touch (gaps under
// one pixel) are merged into one item, so a zoomed-out step of 10^5 ops draws as a few hundred
// rectangles. Items outside x.lo..x.hi are culled.
template <class SOf, class DOf, class KOf>
std::vector<BarItem> decimate_bars(std::size_t n, SOf&& start_of, DOf&& dur_of, KOf&& key_of,
                                   const Axis& x, double min_px) {
  std::vector<BarItem> out;
  if (n == 0 || !(x.hi > x.lo)) return out;
  std::size_t i = upper_index(n, start_of, x.lo);
  if (i > 0) --i;  // a bar starting before lo may reach into the view
  bool last_narrow = false;  // the last item was made of narrow bars and may take more
  for (; i < n; ++i) {
    const double s = static_cast<double>(start_of(i));
    if (s > x.hi) break;
    const double e = s + static_cast<double>(dur_of(i));
    if (e < x.lo) continue;
    const double p0 = x.to_px(s), p1 = x.to_px(e);
    const bool narrow = p1 - p0 < min_px;
    if (narrow && last_narrow && p0 - out.back().px1 < 1.0 &&
        key_of(i) == key_of(out.back().first)) {
      BarItem& b = out.back();
      if (p1 > b.px1) b.px1 = p1;
      ++b.count;
      continue;
    }
    out.push_back({p0, p1 < p0 + 1 ? p0 + 1 : p1, i, 1});
    last_narrow = narrow;
  }
  return out;
}

}  // namespace gui_plot
