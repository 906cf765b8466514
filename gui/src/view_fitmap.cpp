// The fit map: per strategy a heatmap of the peak over micro-batch x sequence length (shared log
// colour scale), the device capacity as the contour between fitting and non-fitting cells, and
// the largest fitting configuration with its throughput marked. Filled in by the worker.
#include <algorithm>
#include <cmath>
#include <string>

#include <imgui.h>

#include "colors.hpp"
#include "fitmap.hpp"
#include "gui_plot/format.hpp"
#include "gui_plot/grid.hpp"
#include "panels.hpp"

namespace gui {
namespace {

ImU32 cell_color(const FitCell& c, PeakRange range) {
  const gui_plot::Rgb rgb = gui_plot::viridis(color_position(c.peak_bytes, range));
  return ImGui::ColorConvertFloat4ToU32(ImVec4(rgb.r, rgb.g, rgb.b, 1));
}

std::string short_count(int64_t v) {
  if (v >= 1024 && v % 1024 == 0) return std::to_string(v / 1024) + "k";
  return std::to_string(v);
}

// One heatmap in [p0, p1). Returns the hovered cell or -1.
int draw_map(const FitMapData& m, int g, const AppState& st, ImVec2 p0, ImVec2 p1, PeakRange range) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fh = ImGui::GetFontSize();
  const int cols = static_cast<int>(m.batches.size()), rows = static_cast<int>(m.seqs.size());
  const int entry = m.entries[g];
  const ImU32 title_col = entry < static_cast<int>(st.inputs.strategies.size())
                              ? to_u32(st.inputs.strategies[entry].color)
                              : IM_COL32(255, 255, 255, 255);
  const ImVec2 q0(p0.x + 3.2f * fh, p0.y + 1.4f * fh);
  dl->AddText(ImVec2(q0.x, p0.y), title_col, m.names[g].c_str());
  const ImVec2 q1(p1.x - 0.5f * fh, p1.y - 3.0f * fh);
  const float cw = (q1.x - q0.x) / static_cast<float>(cols), ch = (q1.y - q0.y) / static_cast<float>(rows);
  if (cw < 2 || ch < 2) return -1;
  // Row 0 (shortest sequence) at the bottom.
  const auto cell_min = [&](int r, int c) {
    return ImVec2(q0.x + cw * static_cast<float>(c), q1.y - ch * static_cast<float>(r + 1));
  };
  const auto& grid = m.grids[g];
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const FitCell& cell = grid[static_cast<size_t>(r * cols + c)];
      const ImVec2 a = cell_min(r, c), b(a.x + cw, a.y + ch);
      if (!cell.done) {
        dl->AddRect(a, b, IM_COL32(255, 255, 255, 25));
        continue;
      }
      if (!cell.ok) {
        dl->AddRectFilled(a, b, IM_COL32(60, 60, 60, 255));
        dl->AddLine(a, b, IM_COL32(110, 110, 110, 255));
        continue;
      }
      dl->AddRectFilled(a, b, cell_color(cell, range));
      if (!cell.fits) dl->AddRectFilled(a, b, IM_COL32(0, 0, 0, 90));  // dimmed: does not fit
      const std::string s = gui_plot::compact_bytes(cell.peak_bytes);
      const ImVec2 ts = ImGui::CalcTextSize(s.c_str());
      if (ts.x < cw - 4 && ts.y < ch - 2) {
        const gui_plot::Rgb rgb = gui_plot::viridis(color_position(cell.peak_bytes, range));
        const bool light = rgb.r * 0.3f + rgb.g * 0.6f + rgb.b * 0.1f > 0.55f && cell.fits;
        dl->AddText(ImVec2(a.x + (cw - ts.x) / 2, a.y + (ch - ts.y) / 2),
                    light ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 230), s.c_str());
      }
    }
  }
  // Capacity contour: edges between fitting and non-fitting simulated cells.
  std::vector<uint8_t> inside(grid.size());
  for (size_t i = 0; i < grid.size(); ++i) inside[i] = grid[i].ok && grid[i].fits;
  for (const gui_plot::GridEdge& e : gui_plot::boundary_edges(inside, rows, cols)) {
    // Grid corner (x, y) with y counted from the bottom row.
    const auto corner = [&](int x, int y) {
      return ImVec2(q0.x + cw * static_cast<float>(x), q1.y - ch * static_cast<float>(y));
    };
    dl->AddLine(corner(e.x0, e.y0), corner(e.x1, e.y1), capacity_color(), 3.0f);
  }
  // Axis labels.
  for (int c = 0; c < cols; ++c) {
    const std::string s = std::to_string(m.batches[c]);
    const float w = ImGui::CalcTextSize(s.c_str()).x;
    dl->AddText(ImVec2(q0.x + cw * (static_cast<float>(c) + 0.5f) - w / 2, q1.y + 0.15f * fh),
                IM_COL32(220, 220, 220, 255), s.c_str());
  }
  const int label_every = std::max(1, static_cast<int>(std::ceil(1.1f * fh / ch)));
  for (int r = 0; r < rows; r += label_every) {
    const std::string s = short_count(m.seqs[r]);
    const float w = ImGui::CalcTextSize(s.c_str()).x;
    dl->AddText(ImVec2(q0.x - w - 0.3f * fh, q1.y - ch * (static_cast<float>(r) + 0.5f) - fh / 2),
                IM_COL32(220, 220, 220, 255), s.c_str());
  }
  dl->AddText(ImVec2(q0.x, q1.y + 1.15f * fh), text_dim_color(), "micro-batch ->");
  const float seq_w = ImGui::CalcTextSize("seq").x;
  dl->AddText(ImVec2(q0.x - seq_w - 0.3f * fh, q0.y - 1.2f * fh), text_dim_color(), "seq");
  // Largest fitting configuration.
  std::string caption = "nothing fits";
  if (const auto best = largest_fit(m, g)) {
    const int r = *best / cols, c = *best % cols;
    const ImVec2 a = cell_min(r, c);
    dl->AddRect(ImVec2(a.x + 1, a.y + 1), ImVec2(a.x + cw - 1, a.y + ch - 1), IM_COL32(255, 255, 255, 255), 0, 0, 3.0f);
    caption = "largest fit: b " + std::to_string(m.batches[c]) + " x s " + std::to_string(m.seqs[r]) +
              ", " + gui_plot::human_si(grid[*best].tokens_per_s, "tok/s");
  } else if (!m.complete) {
    caption.clear();
  }
  const float cap_w = ImGui::CalcTextSize(caption.c_str()).x;
  dl->AddText(ImVec2(std::max(q0.x, q1.x - cap_w), q1.y + 1.15f * fh), IM_COL32(255, 255, 255, 255),
              caption.c_str());
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  if (ImGui::IsWindowHovered() && mouse.x >= q0.x && mouse.x < q1.x && mouse.y >= q0.y && mouse.y < q1.y) {
    const int c = std::clamp(static_cast<int>((mouse.x - q0.x) / cw), 0, cols - 1);
    const int r = std::clamp(static_cast<int>((q1.y - mouse.y) / ch), 0, rows - 1);
    return r * cols + c;
  }
  return -1;
}

void colorbar(ImVec2 p0, ImVec2 p1, PeakRange range, int64_t capacity) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fh = ImGui::GetFontSize();
  const float x0 = p0.x, x1 = p0.x + 1.2f * fh;
  constexpr int kSteps = 32;
  for (int i = 0; i < kSteps; ++i) {
    const float y0 = p1.y - (p1.y - p0.y) * static_cast<float>(i + 1) / kSteps;
    const float y1 = p1.y - (p1.y - p0.y) * static_cast<float>(i) / kSteps;
    const gui_plot::Rgb c = gui_plot::viridis((i + 0.5) / kSteps);
    dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x1, y1), ImGui::ColorConvertFloat4ToU32(ImVec4(c.r, c.g, c.b, 1)));
  }
  dl->AddText(ImVec2(x1 + 4, p0.y - fh / 2), IM_COL32(220, 220, 220, 255), gui_plot::human_bytes(range.hi).c_str());
  dl->AddText(ImVec2(x1 + 4, p1.y - fh / 2), IM_COL32(220, 220, 220, 255), gui_plot::human_bytes(range.lo).c_str());
  if (capacity > range.lo && capacity < range.hi) {
    const float y = p1.y - (p1.y - p0.y) * static_cast<float>(color_position(capacity, range));
    dl->AddLine(ImVec2(x0 - 4, y), ImVec2(x1 + 4, y), capacity_color(), 3);
    dl->AddText(ImVec2(x1 + 4, y - fh / 2), capacity_color(), "capacity");
  }
}

}  // namespace

void fitmap_view(const AppState& st, ViewState& view) {
  const float fh = ImGui::GetFontSize();
  // Sliders over exponents, labelled with the values (the format has no conversion: a label).
  const auto pow2_slider = [&](const char* id, int& exponent, int lo, int hi, const char* text) {
    const std::string label = text + std::to_string(int64_t{1} << exponent);
    ImGui::SetNextItemWidth(10 * fh);
    const bool changed = ImGui::SliderInt(id, &exponent, lo, hi, label.c_str());
    ImGui::SameLine();
    return changed;
  };
  pow2_slider("##bmax", view.fit_batch_max_log2, 0, 8, "micro-batch <= ");
  if (pow2_slider("##smin", view.fit_seq_min_log2, 6, 17, "seq >= "))
    view.fit_seq_max_log2 = std::max(view.fit_seq_max_log2, view.fit_seq_min_log2);
  if (pow2_slider("##smax", view.fit_seq_max_log2, 6, 17, "seq <= "))
    view.fit_seq_min_log2 = std::min(view.fit_seq_min_log2, view.fit_seq_max_log2);
  const FitMapData* m = st.fitmap.get();
  ImGui::Dummy(ImVec2(fh, 0));
  ImGui::SameLine();
  if (!m) {
    ImGui::TextDisabled("computing...");
    return;
  }
  const bool current = m->key == st.fitmap_key;
  ImGui::TextDisabled("%s%lld / %lld simulations, %.0f ms%s", current ? "" : "(updating) ",
                      static_cast<long long>(m->done), static_cast<long long>(m->total), m->elapsed_ms,
                      m->complete ? "" : " ...");
  ImGui::TextDisabled("peak allocated per GPU; red line: device capacity (cells below-left fit); dimmed: does not fit; white box: largest fit");
  for (size_t r = 0; r < m->row_errors.size(); ++r) {
    if (m->row_errors[r].empty()) continue;
    ImGui::TextDisabled("grey row(s), e.g. seq %lld: %s", static_cast<long long>(m->seqs[r]), m->row_errors[r].c_str());
    break;
  }
  const int n = static_cast<int>(m->grids.size());
  if (n == 0 || m->batches.empty() || m->seqs.empty()) return;
  const PeakRange range = peak_range(*m);
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float bar_w = 7 * fh;
  const int per_row = std::min(n, n <= 3 ? n : (n <= 4 ? 2 : 3));
  const int map_rows = (n + per_row - 1) / per_row;
  const float w = (avail.x - bar_w) / static_cast<float>(per_row);
  const float h = avail.y / static_cast<float>(map_rows);
  int hovered = -1, hovered_grid = -1;
  for (int g = 0; g < n; ++g) {
    const ImVec2 p0(origin.x + w * static_cast<float>(g % per_row), origin.y + h * static_cast<float>(g / per_row));
    const int cell = draw_map(*m, g, st, p0, ImVec2(p0.x + w - fh, p0.y + h - 0.5f * fh), range);
    if (cell >= 0) hovered = cell, hovered_grid = g;
  }
  colorbar(ImVec2(origin.x + avail.x - bar_w + fh, origin.y + 2 * fh),
           ImVec2(origin.x + avail.x, origin.y + std::min(avail.y, 18 * fh)), range, m->capacity_bytes);
  ImGui::Dummy(avail);
  if (hovered >= 0) {
    const int cols = static_cast<int>(m->batches.size());
    const FitCell& c = m->grids[hovered_grid][static_cast<size_t>(hovered)];
    ImGui::BeginTooltip();
    ImGui::Text("%s: micro-batch %lld, sequence %lld", m->names[hovered_grid].c_str(),
                static_cast<long long>(m->batches[hovered % cols]), static_cast<long long>(m->seqs[hovered / cols]));
    if (!c.done) ImGui::TextDisabled("not simulated yet");
    else if (!c.ok) ImGui::TextDisabled("cannot be simulated (see the note above)");
    else
      ImGui::Text("peak %s, %s (headroom %s), %s", gui_plot::human_bytes(c.peak_bytes).c_str(),
                  c.fits ? "fits" : "does not fit", gui_plot::human_bytes(c.headroom_bytes).c_str(),
                  gui_plot::human_si(c.tokens_per_s, "tok/s").c_str());
    ImGui::EndTooltip();
  }
}

}  // namespace gui
