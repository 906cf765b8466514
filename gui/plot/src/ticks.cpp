#include "gui_plot/ticks.hpp"

#include <cmath>

namespace gui_plot {

double nice_step(double raw) {
  if (!(raw > 0)) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  // Compare against slightly enlarged candidates: log10 rounding can leave raw a hair above p*1.
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * p * (1 + 1e-12)) return m * p;
  return 10 * p;
}

Ticks nice_ticks(double lo, double hi, double px_len, double min_px_spacing, double unit) {
  Ticks t;
  if (!(hi > lo) || !(px_len > 0) || !(unit > 0)) return t;
  const double max_ticks = std::max(1.0, std::floor(px_len / std::max(min_px_spacing, 1.0)));
  t.step = unit * nice_step((hi - lo) / unit / max_ticks);
  const double first = std::ceil(lo / t.step - 1e-9);
  const double last = std::floor(hi / t.step + 1e-9);
  for (double k = first; k <= last && t.values.size() < 10000; k += 1) t.values.push_back(k * t.step);
  return t;
}

double byte_unit(double max_abs) {
  double unit = 1;
  for (int i = 0; i < 6 && max_abs >= unit * 1024; ++i) unit *= 1024;
  return unit;
}

}  // namespace gui_plot
