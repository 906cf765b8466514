#include "canvas.hpp"

#include <algorithm>
#include <cmath>

#include "colors.hpp"
#include "gui_plot/ticks.hpp"

namespace gui {
namespace {

double max_abs(const gui_plot::Range& r) { return std::max(std::abs(r.lo), std::abs(r.hi)); }

double tick_unit(const AxisSpec& a) {
  return a.unit == gui_plot::Unit::kBytes ? gui_plot::byte_unit(max_abs(a.range)) : 1.0;
}

}  // namespace

PlotArea begin_plot(const char* id, ImVec2 size, const AxisSpec& xs, const AxisSpec& ys,
                    float right_margin) {
  PlotArea a;
  const float fh = ImGui::GetFontSize();
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  size.x = std::max(size.x, 8 * fh);
  size.y = std::max(size.y, 6 * fh);
  ImGui::InvisibleButton(id, size, ImGuiButtonFlags_MouseButtonLeft);
  a.draw = ImGui::GetWindowDrawList();
  const float left = 5.5f * fh, bottom = 2.6f * fh, top = 0.6f * fh;
  a.min = ImVec2(p0.x + left, p0.y + top);
  a.max = ImVec2(p0.x + size.x - std::max(right_margin, 0.8f * fh), p0.y + size.y - bottom);
  const gui_plot::Range xr = gui_plot::widen_degenerate(xs.range);
  const gui_plot::Range yr = gui_plot::widen_degenerate(ys.range);
  a.x = {xr.lo, xr.hi, a.min.x, a.max.x};
  a.y = {yr.lo, yr.hi, a.max.y, a.min.y};
  a.mouse = ImGui::GetIO().MousePos;
  a.hovered = ImGui::IsItemHovered() && a.contains(a.mouse);

  ImDrawList* dl = a.draw;
  dl->AddRectFilled(a.min, a.max, IM_COL32(24, 26, 30, 255));
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  // x ticks: labels need about 7 characters of room.
  const gui_plot::Ticks xt = gui_plot::nice_ticks(xr.lo, xr.hi, a.max.x - a.min.x, 7 * fh,
                                                  tick_unit({xr, xs.unit, "", true}));
  for (double v : xt.values) {
    const float px = static_cast<float>(a.x.to_px(v));
    dl->AddLine(ImVec2(px, a.min.y), ImVec2(px, a.max.y), grid_color());
    const std::string s = gui_plot::format_tick(v, xt.step, max_abs(xr), xs.unit);
    const float w = ImGui::CalcTextSize(s.c_str()).x;
    const float lx = std::clamp(px - w / 2, p0.x, p0.x + size.x - w);  // stay inside the widget
    dl->AddText(ImVec2(lx, a.max.y + 0.25f * fh), text, s.c_str());
  }
  const gui_plot::Ticks yt = ys.ticks ? gui_plot::nice_ticks(yr.lo, yr.hi, a.max.y - a.min.y,
                                                             3.0f * fh, tick_unit({yr, ys.unit, "", true}))
                                      : gui_plot::Ticks{};
  for (double v : yt.values) {
    const float py = static_cast<float>(a.y.to_px(v));
    dl->AddLine(ImVec2(a.min.x, py), ImVec2(a.max.x, py), grid_color());
    const std::string s = gui_plot::format_tick(v, yt.step, max_abs(yr), ys.unit);
    const float w = ImGui::CalcTextSize(s.c_str()).x;
    dl->AddText(ImVec2(a.min.x - w - 0.4f * fh, py - 0.5f * fh), text, s.c_str());
  }
  if (xs.label && *xs.label) {
    const float w = ImGui::CalcTextSize(xs.label).x;
    dl->AddText(ImVec2((a.min.x + a.max.x - w) / 2, a.max.y + 1.35f * fh), text_dim_color(),
                xs.label);
  }
  if (ys.label && *ys.label)
    dl->AddText(ImVec2(p0.x, a.min.y - 0.6f * fh + 0.05f * fh), text_dim_color(), ys.label);
  dl->AddRect(a.min, a.max, IM_COL32(255, 255, 255, 60));
  dl->PushClipRect(a.min, a.max, true);
  return a;
}

void end_plot(const PlotArea& a) { a.draw->PopClipRect(); }

gui_plot::Axis right_axis(const PlotArea& a, const AxisSpec& ys, ImU32 color) {
  const gui_plot::Range yr = gui_plot::widen_degenerate(ys.range);
  gui_plot::Axis axis{yr.lo, yr.hi, a.max.y, a.min.y};
  const float fh = ImGui::GetFontSize();
  const gui_plot::Ticks yt = gui_plot::nice_ticks(yr.lo, yr.hi, a.max.y - a.min.y, 3.0f * fh,
                                                  tick_unit({yr, ys.unit, "", true}));
  a.draw->PushClipRectFullScreen();
  for (double v : yt.values) {
    const float py = static_cast<float>(axis.to_px(v));
    const std::string s = gui_plot::format_tick(v, yt.step, max_abs(yr), ys.unit);
    a.draw->AddText(ImVec2(a.max.x + 0.5f * fh, py - 0.5f * fh), color, s.c_str());
  }
  if (ys.label && *ys.label) {
    const float w = ImGui::CalcTextSize(ys.label).x;
    a.draw->AddText(ImVec2(a.max.x - w, a.min.y - 0.6f * fh), color, ys.label);
  }
  a.draw->PopClipRect();
  return axis;
}

void time_axis_input(const PlotArea& a, ViewState& view, double end_ns) {
  if (!(end_ns > 0)) return;
  const ImGuiIO& io = ImGui::GetIO();
  gui_plot::Range r = view.time;
  bool changed = false;
  if (a.hovered && io.MouseWheel != 0) {
    const double at = a.x.to_value(a.mouse.x);
    r = gui_plot::zoom_about(r, at, std::pow(1.25, io.MouseWheel), 1000.0);  // 1 µs at most
    changed = true;
  }
  if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 1.0f)) {
    r = gui_plot::pan_by_pixels(r, io.MouseDelta.x, a.max.x - a.min.x);
    changed = true;
  }
  if (a.hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) {
    view.time_auto = true;
    view.time = {0, end_ns};
    return;
  }
  if (changed) {
    view.time = gui_plot::clamp_into(r, 0, end_ns);
    view.time_auto = false;
  }
}

void hline(const PlotArea& a, double v, ImU32 color, const char* label, float thickness) {
  const float py = static_cast<float>(a.y.to_px(v));
  if (py < a.min.y - 1 || py > a.max.y + 1) return;
  a.draw->AddLine(ImVec2(a.min.x, py), ImVec2(a.max.x, py), color, thickness);
  if (label && *label) {
    const ImVec2 ts = ImGui::CalcTextSize(label);
    a.draw->AddText(ImVec2(a.max.x - ts.x - 4, py - ts.y - 1), color, label);
  }
}

void vline(const PlotArea& a, double v, ImU32 color, const char* label, float thickness) {
  const float px = static_cast<float>(a.x.to_px(v));
  if (px < a.min.x - 1 || px > a.max.x + 1) return;
  a.draw->AddLine(ImVec2(px, a.min.y), ImVec2(px, a.max.y), color, thickness);
  if (label && *label) {
    const float w = ImGui::CalcTextSize(label).x;
    a.draw->AddText(ImVec2(px + 3 + w > a.max.x ? px - w - 3 : px + 3, a.min.y + 2), color, label);
  }
}

std::string fit_text(const std::string& text, float max_width) {
  if (ImGui::CalcTextSize(text.c_str()).x <= max_width) return text;
  std::string s = text;
  while (!s.empty() && ImGui::CalcTextSize((s + "...").c_str()).x > max_width) s.pop_back();
  return s + "...";
}

void legend_item(ImU32 color, const char* name) {
  const float fh = ImGui::GetFontSize();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x, p.y + 0.2f * fh),
                                            ImVec2(p.x + 0.8f * fh, p.y + fh), color);
  ImGui::Dummy(ImVec2(fh, fh));
  ImGui::SameLine(0, 0.2f * fh);
  ImGui::TextUnformatted(name);
  ImGui::SameLine(0, fh);
}

}  // namespace gui
