// Heatmap helpers: the boundary between cells inside and outside a region (the fit map's device
// capacity contour) and a perceptual colour map.
#pragma once

#include <cstdint>
#include <vector>

namespace gui_plot {

// A unit edge between two grid corners; corners are (col, row) with 0 <= col <= cols and
// 0 <= row <= rows. Horizontal: y0 == y1; vertical: x0 == x1.
struct GridEdge {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  friend bool operator==(const GridEdge&, const GridEdge&) = default;
};

// Edges between orthogonally adjacent cells whose `inside` differs (row-major, rows x cols, cell
// (r, c) at inside[r * cols + c]). The outer border is not a boundary. With a monotone region (a
// cell fits whenever a smaller one does) the edges form one staircase: the contour of the
// capacity on a discrete grid.
std::vector<GridEdge> boundary_edges(const std::vector<uint8_t>& inside, int rows, int cols);

struct Rgb {
  float r = 0, g = 0, b = 0;  // 0..1
};

// Viridis (matplotlib's default map, perceptually uniform), t clamped to [0, 1].
Rgb viridis(double t);

}  // namespace gui_plot
