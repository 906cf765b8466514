// Every panel and view of the GUI, as free functions (STYLE.md rule 9). Config panels edit the
// inputs and return true when something changed (the caller then bumps the revision); views read
// the simulations and edit only the view state.
#pragma once

#include <imgui.h>

#include "state.hpp"

namespace gui {

bool model_panel(AppState& state);       // panel_model.cpp
bool setup_panel(AppState& state);       // panel_setup.cpp
bool device_panel(AppState& state);      // panel_device.cpp
bool strategies_panel(AppState& state);  // panel_strategies.cpp

void valley_view(const AppState& state, ViewState& view);    // view_valley.cpp
void memory_view(const AppState& state, ViewState& view);    // view_memory.cpp
// The memory plot alone (the timeline view shows it under its lanes, on the same time axis).
void memory_plot(const AppState& state, ViewState& view, ImVec2 size);  // view_memory.cpp
void timeline_view(const AppState& state, ViewState& view);  // view_timeline.cpp
void fitmap_view(const AppState& state, ViewState& view);    // view_fitmap.cpp
void compare_view(const AppState& state, ViewState& view);   // view_compare.cpp

// The whole window: config panels on the left, a status line and the views' tabs on the right.
// Bumps state.revision when a panel edited the inputs. (layout.cpp)
void draw_app(AppState& state);

}  // namespace gui
