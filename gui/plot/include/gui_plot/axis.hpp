// Value-to-pixel mapping of one plot axis (ImPlot's recipe: px = px_min + scale * (v - lo)).
// Pure values and functions, no ImGui: unit-tested in tests/test_gui_plot.cpp.
#pragma once

namespace gui_plot {

// A range of values shown across a range of pixels. px_max may be smaller than px_min (a y axis
// grows upwards on screen while pixel rows grow downwards).
struct Axis {
  double lo = 0;      // value at px_min
  double hi = 1;      // value at px_max; hi > lo for a usable axis
  double px_min = 0;  // pixel of lo
  double px_max = 1;  // pixel of hi

  double scale() const { return (px_max - px_min) / (hi - lo); }  // pixels per unit (signed)
  double to_px(double v) const { return px_min + scale() * (v - lo); }
  double to_value(double px) const { return lo + (px - px_min) / scale(); }
};

// A range [lo, hi] with hi > lo: equal ends are widened symmetrically (by 1, or 5% of |lo|), so
// a constant series still gets a drawable axis.
struct Range {
  double lo = 0;
  double hi = 1;
};
Range widen_degenerate(Range r);

// The range after zooming by `factor` (> 1 zooms in) about the value `at`, which stays under the
// same pixel. Never narrower than `min_span`.
Range zoom_about(Range r, double at, double factor, double min_span);

// The range moved so that content follows a drag of `dpx` pixels on an axis `px_len` pixels long.
Range pan_by_pixels(Range r, double dpx, double px_len);

// `r` shifted (not shrunk) to lie inside [lo, hi] when it fits, else [lo, hi] itself.
Range clamp_into(Range r, double lo, double hi);

// [lo, hi] padded by `fraction` of its span at the top only (bytes plots start at zero).
Range pad_top(Range r, double fraction);

}  // namespace gui_plot
