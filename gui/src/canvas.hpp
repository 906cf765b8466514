// A plot area drawn with ImDrawList (Dear ImGui's "Canvas" recipe: InvisibleButton for input,
// the window's draw list, a clip rectangle), with axes, grid and tick labels from gui_plot.
#pragma once

#include <string>

#include <imgui.h>

#include "gui_plot/axis.hpp"
#include "gui_plot/format.hpp"
#include "state.hpp"

namespace gui {

struct AxisSpec {
  gui_plot::Range range;
  gui_plot::Unit unit = gui_plot::Unit::kPlain;
  const char* label = "";
  bool ticks = true;  // grid and tick labels (off for lanes)
};

struct PlotArea {
  ImVec2 min, max;      // the plot rectangle, inside the tick-label margins
  gui_plot::Axis x, y;  // values to pixels over that rectangle (y grows upwards)
  ImDrawList* draw = nullptr;
  bool hovered = false;  // mouse over the plot rectangle
  ImVec2 mouse;
  bool contains(ImVec2 p) const {
    return p.x >= min.x && p.x < max.x && p.y >= min.y && p.y < max.y;
  }
};

// Reserves `size` at the cursor (the whole widget, margins included) as one InvisibleButton `id`,
// draws the background, grid, ticks and labels, and clips drawing to the plot rectangle.
// `right_margin` leaves room for a second y axis. Pair with end_plot().
PlotArea begin_plot(const char* id, ImVec2 size, const AxisSpec& x, const AxisSpec& y,
                    float right_margin = 0);
void end_plot(const PlotArea& area);

// A second y axis on the right edge (call between begin_plot and end_plot): ticks and labels in
// `color`; returns its value-to-pixel mapping.
gui_plot::Axis right_axis(const PlotArea& area, const AxisSpec& y2, ImU32 color);

// Wheel zoom about the mouse, drag to pan, double-click to show the whole step: edits the shared
// time range of the memory and timeline views. `end_ns` is the longest step.
void time_axis_input(const PlotArea& area, ViewState& view, double end_ns);

// Horizontal line across the plot at value `v` with a label at its right end.
void hline(const PlotArea& area, double v, ImU32 color, const char* label, float thickness = 1.5f);
// Vertical line at x value `v` with a label at its top.
void vline(const PlotArea& area, double v, ImU32 color, const char* label, float thickness = 1.5f);

// `text` shortened with a trailing "..." to fit `max_width` pixels (unchanged when it fits).
std::string fit_text(const std::string& text, float max_width);

// A small legend: coloured squares and names, laid out left to right at the cursor.
void legend_item(ImU32 color, const char* name);

}  // namespace gui
