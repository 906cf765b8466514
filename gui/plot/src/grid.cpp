#include "gui_plot/grid.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace gui_plot {

std::vector<GridEdge> boundary_edges(const std::vector<uint8_t>& inside, int rows, int cols) {
  std::vector<GridEdge> out;
  if (rows <= 0 || cols <= 0 || inside.size() < static_cast<size_t>(rows) * cols) return out;
  const auto at = [&](int r, int c) { return inside[static_cast<size_t>(r) * cols + c] != 0; };
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      if (c + 1 < cols && at(r, c) != at(r, c + 1)) out.push_back({c + 1, r, c + 1, r + 1});
      if (r + 1 < rows && at(r, c) != at(r + 1, c)) out.push_back({c, r + 1, c + 1, r + 1});
    }
  }
  return out;
}

Rgb viridis(double t) {
  // Nine samples of matplotlib's viridis at t = 0, 1/8, ..., 1, interpolated linearly.
  static constexpr std::array<Rgb, 9> kStops{{{0.267f, 0.005f, 0.329f},
                                              {0.279f, 0.175f, 0.483f},
                                              {0.230f, 0.322f, 0.546f},
                                              {0.173f, 0.449f, 0.558f},
                                              {0.128f, 0.567f, 0.551f},
                                              {0.153f, 0.683f, 0.498f},
                                              {0.361f, 0.785f, 0.388f},
                                              {0.668f, 0.862f, 0.196f},
                                              {0.993f, 0.906f, 0.144f}}};
  if (!(t > 0)) return kStops.front();
  if (t >= 1) return kStops.back();
  const double x = t * 8;
  const int i = std::min(7, static_cast<int>(std::floor(x)));
  const float f = static_cast<float>(x - i);
  const Rgb& a = kStops[i];
  const Rgb& b = kStops[i + 1];
  return {a.r + f * (b.r - a.r), a.g + f * (b.g - a.g), a.b + f * (b.b - a.b)};
}

}  // namespace gui_plot
