// Dear ImGui without a window (its example_null loop): the font atlas is built but never
// uploaded, frames are laid out and rendered to draw lists that nothing draws. The smoke tests
// and the frame-time benchmark run the whole GUI this way, with no GL.
#pragma once

#include "state.hpp"
#include "worker.hpp"

struct ImGuiContext;

namespace gui {

// Contract: one at a time (it owns the current ImGui context from construction to destruction).
class Windowless {
 public:
  Windowless(float width, float height);
  ~Windowless();
  Windowless(const Windowless&) = delete;
  Windowless& operator=(const Windowless&) = delete;

  // One frame: update() within the budget, then NewFrame, draw_app, Render. The mouse is at
  // `mouse` (negative: nowhere), so hover paths run too.
  void frame(AppState& state, Worker& worker, float mouse_x = -1, float mouse_y = -1,
             double budget_ms = 12);

  int vertices() const;  // vertices drawn by the last frame, to check that something was drawn

 private:
  ImGuiContext* ctx_ = nullptr;
};

}  // namespace gui
