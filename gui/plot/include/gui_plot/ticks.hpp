// "Nice" axis ticks at 1, 2 or 5 x 10^n (times a unit), as many as the pixel length allows.
#pragma once

#include <vector>

namespace gui_plot {

struct Ticks {
  double step = 0;             // distance between ticks, in values (a nice number times the unit)
  std::vector<double> values;  // ascending, inside [lo, hi]
};

// The smallest number 1, 2 or 5 x 10^n that is >= raw (raw > 0).
double nice_step(double raw);

// Ticks at the multiples of step = unit * nice_step(...) inside [lo, hi], with step the smallest
// that keeps ticks at least `min_px_spacing` apart on an axis `px_len` pixels long: at most
// px_len / min_px_spacing + 1 ticks. `unit` makes byte axes tick at nice numbers of GiB.
// Values are k * step computed by multiplication (no accumulated error). Empty for hi <= lo or
// px_len <= 0.
Ticks nice_ticks(double lo, double hi, double px_len, double min_px_spacing, double unit = 1);

// The binary unit (1, 1024, 1024^2, ... 1024^6) that writes `max_abs` bytes as a number in
// [1, 1024); 1 for values below 1024.
double byte_unit(double max_abs);

}  // namespace gui_plot
