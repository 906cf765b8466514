#include "windowless.hpp"

#include <cfloat>

#include <imgui.h>

#include "panels.hpp"
#include "update.hpp"

namespace gui {

Windowless::Windowless(float width, float height) : ctx_(ImGui::CreateContext()) {
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  io.DisplaySize = ImVec2(width, height);
  io.DeltaTime = 1.0f / 60.0f;
  // As the OpenGL3 backend does: large draw lists are split rather than overflowing 16-bit indices.
  io.BackendFlags |= ImGuiBackendFlags_RendererHasVtxOffset;
  unsigned char* pixels = nullptr;
  int w = 0, h = 0;
  io.Fonts->GetTexDataAsRGBA32(&pixels, &w, &h);
}

Windowless::~Windowless() { ImGui::DestroyContext(ctx_); }

void Windowless::frame(AppState& state, Worker& worker, Mouse mouse, double budget_ms) {
  ImGuiIO& io = ImGui::GetIO();
  io.MousePos = mouse.x < 0 || mouse.y < 0 ? ImVec2(-FLT_MAX, -FLT_MAX) : ImVec2(mouse.x, mouse.y);
  io.MouseWheel = mouse.wheel;
  io.MouseDown[0] = mouse.left;
  update(state, worker, budget_ms);
  ImGui::NewFrame();
  draw_app(state);
  ImGui::Render();
}

int Windowless::vertices() const {
  const ImDrawData* d = ImGui::GetDrawData();
  return d ? d->TotalVtxCount : 0;
}

}  // namespace gui
