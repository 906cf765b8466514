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

  // The mouse during one frame.
  struct Mouse {
    float x = -1, y = -1;  // position; negative: nowhere
    float wheel = 0;       // wheel turned this frame (ImGuiIO::MouseWheel)
    bool left = false;     // left button held
  };

  // One frame: update() within the budget, then NewFrame, draw_app, Render, with `mouse` as
  // input, so hover, zoom and drag paths run too.
  void frame(AppState& state, Worker& worker, Mouse mouse, double budget_ms = 12);
  void frame(AppState& state, Worker& worker) { frame(state, worker, Mouse{}); }

  int vertices() const;  // vertices drawn by the last frame, to check that something was drawn

 private:
  ImGuiContext* ctx_ = nullptr;
};

}  // namespace gui
