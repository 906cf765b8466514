// The fit map: per strategy a heatmap of the peak over two chosen set-up knobs (micro-batch x
// sequence length by default; tensor parallel, data parallel and ZeRO stage too), on a shared log
// colour scale, with the device capacity as the contour between fitting and non-fitting cells,
// cells the model refuses greyed with the reason, and the largest fitting configuration (rule in
// fitmap.hpp) with its throughput marked. Filled in by the worker as cells complete.
#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include <imgui.h>

#include "colors.hpp"
#include "fitmap.hpp"
#include "gui_plot/format.hpp"
#include "gui_plot/grid.hpp"
#include "panels.hpp"
#include "update.hpp"  // gui_pp: is_pipeline

namespace gui {
namespace {

constexpr ImU32 kRefused = IM_COL32(58, 58, 62, 255);
constexpr ImU32 kRefusedHatch = IM_COL32(105, 105, 110, 255);
constexpr ImU32 kLabel = IM_COL32(220, 220, 220, 255);

ImU32 cell_color(const FitCell& c, PeakRange range) {
  const gui_plot::Rgb rgb = gui_plot::viridis(color_position(c.peak_bytes, range));
  return ImGui::ColorConvertFloat4ToU32(ImVec4(rgb.r, rgb.g, rgb.b, 1));
}

// A count of tokens: "32k" when a multiple of 1024 (the knobs are mostly powers of two).
std::string count_label(int64_t v) {
  if (v >= 1024 * 1024 && v % (1024 * 1024) == 0) return std::to_string(v / (1024 * 1024)) + "M";
  if (v >= 1024 && v % 1024 == 0) return std::to_string(v / 1024) + "k";
  return std::to_string(v);
}

int log2_of(int64_t v) { return static_cast<int>(std::bit_width(static_cast<uint64_t>(std::max<int64_t>(v, 1)))) - 1; }

// One axis's editor: the knob (choosing the other axis's knob swaps the two), its range, and the
// scale (x2 or an additive step; ZeRO is always 0..3 by one). Returns true when it changed.
bool axis_editor(const char* id, const char* title, FitAxis& a, FitAxis& other) {
  const float fh = ImGui::GetFontSize();
  bool changed = false;
  ImGui::PushID(id);
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted(title);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(8.5f * fh);
  if (ImGui::BeginCombo("##knob", knob_name(a.knob))) {
    for (int k = 0; k < static_cast<int>(FitKnob::kCount); ++k) {
      const auto knob = static_cast<FitKnob>(k);
      if (ImGui::Selectable(knob_name(knob), knob == a.knob) && knob != a.knob) {
        choose_knob(a, other, knob);
        changed = true;
      }
    }
    ImGui::EndCombo();
  }
  const int64_t kmin = knob_min(a.knob), kmax = knob_max(a.knob);
  ImGui::SameLine();
  if (a.step == 0) {
    // Sliders over exponents, labelled with the values (the format has no conversion: a label).
    int lo = log2_of(a.lo), hi = log2_of(a.hi);
    const int emax = log2_of(kmax);
    ImGui::SetNextItemWidth(6.5f * fh);
    const std::string lo_label = "from " + knob_value_label(a.knob, int64_t{1} << lo);
    if (ImGui::SliderInt("##lo", &lo, 0, emax, lo_label.c_str())) {
      a.lo = int64_t{1} << lo;
      a.hi = std::max(a.hi, a.lo);
      changed = true;
    }
    ImGui::SameLine();
    ImGui::SetNextItemWidth(6.5f * fh);
    const std::string hi_label = "to " + knob_value_label(a.knob, int64_t{1} << hi);
    if (ImGui::SliderInt("##hi", &hi, 0, emax, hi_label.c_str())) {
      a.hi = int64_t{1} << hi;
      a.lo = std::min(a.lo, a.hi);
      changed = true;
    }
  } else {
    const float speed = static_cast<float>(std::max<int64_t>(1, a.step)) * 0.25f;
    ImGui::SetNextItemWidth(6.5f * fh);
    if (ImGui::DragScalar("##lo", ImGuiDataType_S64, &a.lo, speed, &kmin, &kmax, "from %lld")) {
      a.hi = std::max(a.hi, a.lo);
      changed = true;
    }
    ImGui::SameLine();
    ImGui::SetNextItemWidth(6.5f * fh);
    if (ImGui::DragScalar("##hi", ImGuiDataType_S64, &a.hi, speed, &kmin, &kmax, "to %lld")) {
      a.lo = std::min(a.lo, a.hi);
      changed = true;
    }
    if (knob_pow2(a.knob)) {
      ImGui::SameLine();
      const int64_t smin = 1;
      ImGui::SetNextItemWidth(5 * fh);
      changed |= ImGui::DragScalar("##step", ImGuiDataType_S64, &a.step, 0.25f, &smin, &kmax, "step %lld");
    }
  }
  if (knob_pow2(a.knob)) {
    ImGui::SameLine();
    bool doubling = a.step == 0;
    if (ImGui::Checkbox("x2", &doubling)) {
      a.step = doubling ? 0 : std::max<int64_t>(1, a.lo);
      changed = true;
    }
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("powers of two (off: an additive step)");
  }
  ImGui::PopID();
  if (changed) a = normalized(a), other = normalized(other);
  return changed;
}

// The knobs not on the axes, at the set-up's values: "tp 8, dp 1, ZeRO 0".
std::string other_knobs(const FitMapData& m) {
  std::string out;
  for (int k = 0; k < static_cast<int>(FitKnob::kCount); ++k) {
    const auto knob = static_cast<FitKnob>(k);
    if (knob == m.key.x.knob || knob == m.key.y.knob) continue;
    if (!out.empty()) out += ", ";
    out += std::string(knob_short(knob)) + " " + knob_value_label(knob, knob_value(m.setup, knob));
  }
  return out;
}

// One heatmap in [p0, p1). Returns the hovered cell or -1.
int draw_map(const FitMapData& m, int g, const AppState& st, ImVec2 p0, ImVec2 p1, PeakRange range) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fh = ImGui::GetFontSize();
  const int cols = static_cast<int>(m.xs.size()), rows = static_cast<int>(m.ys.size());
  const FitKnob xk = m.key.x.knob, yk = m.key.y.knob;
  const int entry = m.entries[g];
  const ImU32 title_col = entry < static_cast<int>(st.inputs.strategies.size())
                              ? to_u32(st.inputs.strategies[entry].color)
                              : IM_COL32(255, 255, 255, 255);
  // Left margin for the row labels: the widest of them (and the axis title above).
  float label_w = ImGui::CalcTextSize(knob_short(yk)).x;
  for (int64_t v : m.ys) label_w = std::max(label_w, ImGui::CalcTextSize(knob_value_label(yk, v).c_str()).x);
  const ImVec2 q0(p0.x + label_w + 0.6f * fh, p0.y + 1.4f * fh);
  dl->AddText(ImVec2(q0.x, p0.y), title_col, m.names[g].c_str());
  const ImVec2 q1(p1.x - 0.5f * fh, p1.y - 3.2f * fh);
  const float cw = (q1.x - q0.x) / static_cast<float>(cols), ch = (q1.y - q0.y) / static_cast<float>(rows);
  if (cw < 2 || ch < 2) return -1;
  // Row 0 (the least value) at the bottom.
  const auto cell_min = [&](int r, int c) {
    return ImVec2(q0.x + cw * static_cast<float>(c), q1.y - ch * static_cast<float>(r + 1));
  };
  const auto& grid = m.grids[g];
  const auto at = [&](int r, int c) -> const FitCell& { return grid[static_cast<size_t>(r * cols + c)]; };
  dl->PushClipRect(q0, q1, true);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const FitCell& cell = at(r, c);
      const ImVec2 a = cell_min(r, c), b(a.x + cw, a.y + ch);
      if (!cell.done) {
        dl->AddRect(a, b, IM_COL32(255, 255, 255, 25));
        continue;
      }
      if (!cell.ok) {
        // Refused by the model: grey, hatched (the reason is listed above and in the tooltip).
        dl->AddRectFilled(a, b, kRefused);
        dl->PushClipRect(a, b, true);
        const float step = std::max(6.0f, 0.6f * fh);
        for (float d = step / 2; d < cw + ch; d += step)
          dl->AddLine(ImVec2(a.x + d, a.y), ImVec2(a.x + d - ch, b.y), kRefusedHatch, 1.0f);
        dl->PopClipRect();
        dl->AddRect(a, b, IM_COL32(20, 20, 22, 255));
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
  dl->PopClipRect();
  // Capacity contour: edges between a fitting and a non-fitting simulated cell (not between a
  // simulated and a refused one: the model, not the capacity, draws that line).
  const auto corner = [&](int x, int y) {  // grid corner, y counted from the bottom row
    return ImVec2(q0.x + cw * static_cast<float>(x), q1.y - ch * static_cast<float>(y));
  };
  const auto differ = [&](const FitCell& u, const FitCell& v) { return u.ok && v.ok && u.fits != v.fits; };
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      if (c + 1 < cols && differ(at(r, c), at(r, c + 1)))
        dl->AddLine(corner(c + 1, r), corner(c + 1, r + 1), capacity_color(), 3.0f);
      if (r + 1 < rows && differ(at(r, c), at(r + 1, c)))
        dl->AddLine(corner(c, r + 1), corner(c + 1, r + 1), capacity_color(), 3.0f);
    }
  }
  // Axis labels: every column's (or every k-th when narrow), every row's that has room.
  float col_label_w = 0;
  for (int64_t v : m.xs) col_label_w = std::max(col_label_w, ImGui::CalcTextSize(knob_value_label(xk, v).c_str()).x);
  const int col_every = std::max(1, static_cast<int>(std::ceil((col_label_w + 0.6f * fh) / cw)));
  for (int c = 0; c < cols; c += col_every) {
    const std::string s = knob_value_label(xk, m.xs[c]);
    const float w = ImGui::CalcTextSize(s.c_str()).x;
    dl->AddText(ImVec2(q0.x + cw * (static_cast<float>(c) + 0.5f) - w / 2, q1.y + 0.15f * fh), kLabel, s.c_str());
  }
  const int row_every = std::max(1, static_cast<int>(std::ceil(1.1f * fh / ch)));
  for (int r = 0; r < rows; r += row_every) {
    const std::string s = knob_value_label(yk, m.ys[r]);
    const float w = ImGui::CalcTextSize(s.c_str()).x;
    dl->AddText(ImVec2(q0.x - w - 0.3f * fh, q1.y - ch * (static_cast<float>(r) + 0.5f) - fh / 2), kLabel, s.c_str());
  }
  const std::string x_title = std::string(knob_name(xk)) + " ->";
  dl->AddText(ImVec2(q0.x, q1.y + 1.15f * fh), text_dim_color(), x_title.c_str());
  const float y_w = ImGui::CalcTextSize(knob_short(yk)).x;
  dl->AddText(ImVec2(q0.x - y_w - 0.3f * fh, q0.y - 1.2f * fh), text_dim_color(), knob_short(yk));
  // The largest fitting configuration.
  std::string caption = "nothing fits";
  if (const auto best = largest_fit(m, g)) {
    const int r = *best / cols, c = *best % cols;
    const ImVec2 a = cell_min(r, c);
    dl->AddRect(ImVec2(a.x + 1, a.y + 1), ImVec2(a.x + cw - 1, a.y + ch - 1), IM_COL32(255, 255, 255, 255), 0, 0, 3.0f);
    const sim::TrainSetup s = m.cell_setup(*best);
    caption = "largest fit: " + std::string(knob_short(xk)) + " " + knob_value_label(xk, m.xs[c]) + ", " +
              knob_short(yk) + " " + knob_value_label(yk, m.ys[r]) + ", " +
              gui_plot::human_si(grid[*best].tokens_per_s, "tok/s");
    const std::string tokens = " (" + count_label(tokens_per_step(s)) + " tokens/step)";
    if (ImGui::CalcTextSize((caption + tokens).c_str()).x < q1.x - q0.x) caption += tokens;
  } else if (!m.complete) {
    caption.clear();
  }
  // Below the axis title, clipped to this map's width.
  dl->PushClipRect(ImVec2(q0.x, q1.y), ImVec2(q1.x, p1.y + fh), true);
  dl->AddText(ImVec2(q0.x, q1.y + 2.15f * fh), IM_COL32(255, 255, 255, 255), caption.c_str());
  dl->PopClipRect();
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  if (ImGui::IsWindowHovered() && mouse.x >= q0.x && mouse.x < q1.x && mouse.y >= q0.y && mouse.y < q1.y) {
    const int c = std::clamp(static_cast<int>((mouse.x - q0.x) / cw), 0, cols - 1);
    const int r = std::clamp(static_cast<int>((q1.y - mouse.y) / ch), 0, rows - 1);
    return r * cols + c;
  }
  return -1;
}

void colorbar(ImVec2 p0, ImVec2 p1, PeakRange range, int64_t cap_lo, int64_t cap_hi) {
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
  dl->AddText(ImVec2(x1 + 4, p0.y - fh / 2), kLabel, gui_plot::human_bytes(range.hi).c_str());
  dl->AddText(ImVec2(x1 + 4, p1.y - fh / 2), kLabel, gui_plot::human_bytes(range.lo).c_str());
  // The capacity (a band when the cells' capacities differ: communicator buffers grow with tp).
  const auto y_of = [&](int64_t b) { return p1.y - (p1.y - p0.y) * static_cast<float>(color_position(b, range)); };
  bool labelled = false;
  for (int64_t cap : {cap_lo, cap_hi}) {
    if (cap <= range.lo || cap >= range.hi) continue;
    dl->AddLine(ImVec2(x0 - 4, y_of(cap)), ImVec2(x1 + 4, y_of(cap)), capacity_color(), 3);
    if (!labelled) dl->AddText(ImVec2(x1 + 4, y_of(cap) - fh / 2), capacity_color(), "capacity");
    labelled = true;
  }
  if (!labelled && cap_lo > 0) {
    // Off the scale: named below the bar (above it would collide with the maps' titles).
    const std::string note = "capacity " + gui_plot::human_bytes(cap_lo) + (cap_lo <= range.lo ? ": below" : ": above");
    dl->AddText(ImVec2(x0, p1.y + fh), capacity_color(), note.c_str());
  }
}

}  // namespace

void fitmap_view(const AppState& st, ViewState& view) {
  // gui_pp: its cells are runs without pipeline stages (one graph each); rather than a figure
  // that ignores pp and the micro-batches, one line says so (nothing is requested: update.cpp).
  if (is_pipeline(st.inputs.setup)) {
    ImGui::TextDisabled("%s simulates runs without pipeline stages (pp 1, one micro-batch); set "
                        "pipeline stages and micro-batches to 1 to see it.", "The fit map");
    return;
  }
  const float fh = ImGui::GetFontSize();
  axis_editor("x", "columns", view.fit_x, view.fit_y);
  ImGui::SameLine(0, 1.5f * fh);
  axis_editor("y", "rows", view.fit_y, view.fit_x);
  const FitMapData* m = st.fitmap.get();
  if (!m) {
    ImGui::TextDisabled("computing...");
    return;
  }
  const bool current = m->key == st.fitmap_key;
  ImGui::TextDisabled("%s%lld / %lld simulations, %.0f ms%s;  other knobs as set up: %s",
                      current ? "" : "(updating) ", static_cast<long long>(m->done),
                      static_cast<long long>(m->total), m->elapsed_ms, m->complete ? "" : " ...",
                      other_knobs(*m).c_str());
  ImGui::TextDisabled("peak allocated per GPU (log colour scale); red line: device capacity; dimmed: does "
                      "not fit; hatched grey: refused by the model");
  ImGui::TextDisabled("white box: largest fit = %s", kLargestRule);
  if (axis_truncated(m->key.x) || axis_truncated(m->key.y))
    ImGui::TextDisabled("(an axis shows its first %d values only)", kMaxAxisValues);
  constexpr size_t kReasons = 3;
  for (size_t i = 0; i < m->errors.size() && i < kReasons; ++i)
    ImGui::TextColored(ImVec4(0.65f, 0.65f, 0.68f, 1), "grey (%lld cells): %s",
                       static_cast<long long>(m->error_cells[i]), m->errors[i].c_str());
  if (m->errors.size() > kReasons)
    ImGui::TextDisabled("... and %zu more reasons (hover a grey cell)", m->errors.size() - kReasons);
  const int n = static_cast<int>(m->grids.size());
  if (n == 0 || m->xs.empty() || m->ys.empty()) return;
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
           ImVec2(origin.x + avail.x, origin.y + std::min(avail.y, 18 * fh)), range, m->capacity_lo,
           m->capacity_hi);
  ImGui::Dummy(avail);
  if (hovered >= 0) {
    const FitCell& c = m->grids[hovered_grid][static_cast<size_t>(hovered)];
    const sim::TrainSetup s = m->cell_setup(hovered);
    ImGui::BeginTooltip();
    ImGui::Text("%s: b %lld, s %lld, tp %lld, dp %lld, ZeRO %d", m->names[hovered_grid].c_str(),
                static_cast<long long>(s.micro_batch), static_cast<long long>(s.seq),
                static_cast<long long>(s.tp), static_cast<long long>(s.dp), s.zero);
    if (!c.done) ImGui::TextDisabled("not simulated yet");
    else if (!c.ok) ImGui::TextDisabled("refused: %s", c.error >= 0 ? m->errors[static_cast<size_t>(c.error)].c_str() : "?");
    else
      ImGui::Text("peak %s of %s, %s (headroom %s), %s", gui_plot::human_bytes(c.peak_bytes).c_str(),
                  gui_plot::human_bytes(c.capacity_bytes).c_str(), c.fits ? "fits" : "does not fit",
                  gui_plot::human_bytes(c.headroom_bytes).c_str(),
                  gui_plot::human_si(c.tokens_per_s, "tok/s").c_str());
    ImGui::EndTooltip();
  }
}

}  // namespace gui
