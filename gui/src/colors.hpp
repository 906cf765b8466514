// The GUI's palettes: strategies (defaults; each strategy's colour is editable), ledger
// categories, and phases. One place, so every view agrees.
#pragma once

#include <array>

#include <imgui.h>

#include "sim/result.hpp"

namespace gui {

std::array<float, 3> default_strategy_color(int index);  // tab10-like, cycling
ImU32 to_u32(const std::array<float, 3>& rgb, float alpha = 1.0f);
ImU32 category_color(sim::Category c);
ImU32 phase_color(sim::Phase p, float alpha);  // bar colour (alpha 1) or band shading
ImU32 capacity_color();                         // device-capacity lines and contours
ImU32 stash_color();  // gui_pp: a pipeline stage's in-flight stash band (memory view)
ImU32 measured_color();                         // a real step's snapshot, overlaid
ImU32 grid_color();
ImU32 text_dim_color();

}  // namespace gui
