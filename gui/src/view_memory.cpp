// Memory over the step: allocated bytes against simulated time for every strategy, overlaid as
// step lines (decimated per pixel column), the focused strategy's phases shaded, peaks marked,
// the device capacity as a line; or the focused strategy stacked by ledger category.
#include <algorithm>
#include <string>
#include <vector>

#include <imgui.h>
#include <imgui_stdlib.h>

#include "canvas.hpp"
#include "colors.hpp"
#include "gui_plot/decimate.hpp"
#include "gui_plot/format.hpp"
#include "op_text.hpp"
#include "panels.hpp"
#include "update.hpp"  // gui_pp: curve_peak_bytes

namespace gui {
namespace {

const RunData* focused_run(const AppState& st, const ViewState& view) {
  if (view.focused < 0 || view.focused >= static_cast<int>(st.runs.size())) return nullptr;
  return st.runs[view.focused].data.get();
}

void draw_bands(const PlotArea& a, const RunData& run) {
  for (const PhaseBand& b : run.bands) {
    if (static_cast<double>(b.t1_ns) < a.x.lo || static_cast<double>(b.t0_ns) > a.x.hi) continue;
    const float x0 = static_cast<float>(a.x.to_px(static_cast<double>(b.t0_ns)));
    const float x1 = std::max(x0 + 1, static_cast<float>(a.x.to_px(static_cast<double>(b.t1_ns))));
    a.draw->AddRectFilled(ImVec2(x0, a.min.y), ImVec2(x1, a.max.y), phase_color(b.phase, 0.16f));
  }
}

// gui_pp: `offset` raises the curve by a pipeline stage's in-flight stash (RunData::stash_offset).
std::vector<gui_plot::StepColumn> columns_of(const PlotArea& a, const sim::Result& r,
                                             int64_t offset = 0) {
  const auto& tl = r.timeline;
  return gui_plot::decimate_steps(
      tl.size(), [&](std::size_t i) { return tl[i].t_ns; },
      [&](std::size_t i) { return tl[i].allocated_bytes + offset; }, a.x);
}

// The measured curve of an opened snapshot, on the focused run's time axis.
std::vector<gui_plot::StepColumn> columns_of(const PlotArea& a,
                                             const std::vector<actsim_cli::OverlayPoint>& pts) {
  return gui_plot::decimate_steps(
      pts.size(), [&](std::size_t i) { return pts[i].t_ns; },
      [&](std::size_t i) { return pts[i].allocated_bytes; }, a.x);
}

// x pixel where a column's held value ends: the next column, or the step's end.
float column_end(const PlotArea& a, const std::vector<gui_plot::StepColumn>& cols, std::size_t i,
                 int64_t end_ns) {
  if (i + 1 < cols.size()) return static_cast<float>(cols[i + 1].px);
  return std::min(a.max.x, static_cast<float>(a.x.to_px(static_cast<double>(end_ns))));
}

void draw_steps(const PlotArea& a, const std::vector<gui_plot::StepColumn>& cols, int64_t end_ns,
                ImU32 color, float thickness) {
  std::vector<ImVec2> pts;
  pts.reserve(cols.size() * 4 + 1);
  const auto py = [&](double v) { return static_cast<float>(a.y.to_px(v)); };
  for (std::size_t i = 0; i < cols.size(); ++i) {
    const auto& c = cols[i];
    const float x = static_cast<float>(c.px) + 0.5f;
    if (i > 0) pts.push_back(ImVec2(x, py(cols[i - 1].y_last)));
    pts.push_back(ImVec2(x, py(c.y_min)));
    pts.push_back(ImVec2(x, py(c.y_max)));
    pts.push_back(ImVec2(x, py(c.y_last)));
  }
  if (!cols.empty())
    pts.push_back(ImVec2(column_end(a, cols, cols.size() - 1, end_ns), py(cols.back().y_last)));
  if (pts.size() >= 2) a.draw->AddPolyline(pts.data(), static_cast<int>(pts.size()), color, 0, thickness);
}

void draw_line(const PlotArea& a, const RunData& run, ImU32 color) {
  draw_steps(a, columns_of(a, run.result, run.stash_offset), run.result.step_time_ns, color, 1.6f);
}

// gui_pp: the focused run's in-flight stash as a constant band under its curve (the other
// micro-batches' activations are live during the whole of this one's forward and backward,
// sim/src/pipeline.cpp add_stash), labelled with what it holds.
void draw_stash_band(const PlotArea& a, const RunData& run, int64_t vpp) {
  if (!run.pipeline || run.stash_offset <= 0) return;
  const sim::StageResult& sr = run.pipeline->stages[static_cast<size_t>(run.stage)];
  const float x0 = static_cast<float>(a.x.to_px(0));
  const float x1 = static_cast<float>(a.x.to_px(static_cast<double>(run.result.step_time_ns)));
  const float y0 = static_cast<float>(a.y.to_px(0));
  const float y1 = static_cast<float>(a.y.to_px(static_cast<double>(run.stash_offset)));
  const float l = std::max(x0, a.min.x), r = std::min(x1, a.max.x);
  if (r <= l) return;
  a.draw->AddRectFilled(ImVec2(l, y1), ImVec2(r, y0), stash_color());
  a.draw->AddLine(ImVec2(l, y1), ImVec2(r, y1), IM_COL32(230, 200, 120, 200), 1.0f);
  // 1F1B: f - 1 whole stashes; interleaved (vpp > 1): f chunk micro-batches of the blocks' stash
  // plus the non-block stash per micro-batch, less this micro-batch's (sim::in_flight_bytes).
  const std::string label =
      (vpp > 1 ? "in-flight stash, f = " + std::to_string(sr.in_flight) +
                     " chunk micro-batches less this one's: "
               : "in-flight stash, f-1 = " + std::to_string(sr.in_flight - 1) + " micro-batches: ") +
      gui_plot::human_bytes(run.stash_offset);
  const ImVec2 ts = ImGui::CalcTextSize(label.c_str());
  a.draw->AddText(ImVec2(l + 6, std::min(y0 - ts.y - 2, (y0 + y1 - ts.y) / 2)),
                  IM_COL32(240, 220, 160, 255), label.c_str());
}

// The index of the last overlay point at or before t; -1 before the first.
int64_t point_at(const std::vector<actsim_cli::OverlayPoint>& pts, int64_t t) {
  const auto it = std::upper_bound(pts.begin(), pts.end(), t,
                                   [](int64_t v, const actsim_cli::OverlayPoint& p) { return v < p.t_ns; });
  return static_cast<int64_t>(it - pts.begin()) - 1;
}

void draw_measured(const AppState& st, const PlotArea& a) {
  const SnapshotOverlay& o = *st.overlay;
  const int64_t end = o.run->result.step_time_ns;
  draw_steps(a, columns_of(a, o.points), end, measured_color(), 2.2f);
  // The measured peak, where its event landed on the simulated axis.
  const actsim_cli::SnapshotPeak& peak = o.snapshot->peaks.allocated;
  for (const actsim_cli::OverlayPoint& p : o.points) {
    if (p.event != peak.event) continue;
    const ImVec2 c(static_cast<float>(a.x.to_px(static_cast<double>(p.t_ns))),
                   static_cast<float>(a.y.to_px(static_cast<double>(peak.bytes))));
    a.draw->AddQuadFilled(ImVec2(c.x, c.y - 6), ImVec2(c.x + 6, c.y), ImVec2(c.x, c.y + 6),
                          ImVec2(c.x - 6, c.y), measured_color());
    const std::string label = "measured peak " + gui_plot::human_bytes(peak.bytes);
    const ImVec2 ts = ImGui::CalcTextSize(label.c_str());
    const float x = std::min(c.x + 8, a.max.x - ts.x - 2);
    a.draw->AddText(ImVec2(x, std::min(a.max.y - ts.y, c.y + 4)), measured_color(), label.c_str());
    break;
  }
}

void draw_stacked(const PlotArea& a, const RunData& run, const CategorySeries& cats) {
  const auto cols = columns_of(a, run.result, run.stash_offset);
  for (std::size_t i = 0; i < cols.size(); ++i) {
    // The column's pixel shows its highest sample (peaks stay visible); the held value after it
    // shows the column's last sample.
    const float x0 = static_cast<float>(cols[i].px);
    const float x1 = std::max(x0 + 1, column_end(a, cols, i, run.result.step_time_ns));
    const auto stack = [&](const sim::Breakdown& b, float left, float right) {
      double base = static_cast<double>(run.stash_offset);  // gui_pp: above the stash band
      for (int c = 0; c < sim::kCategoryCount; ++c) {
        if (b[c] == 0) continue;
        const float y0 = static_cast<float>(a.y.to_px(base));
        base += static_cast<double>(b[c]);
        const float y1 = static_cast<float>(a.y.to_px(base));
        a.draw->AddRectFilled(ImVec2(left, y1), ImVec2(right, y0),
                              category_color(static_cast<sim::Category>(c)));
      }
    };
    stack(cats.at[cols[i].max_index], x0, x0 + 1);
    if (x1 > x0 + 1) stack(cats.at[cols[i].last_index], x0 + 1, x1);
  }
}

void hover_tooltip(const AppState& st, const ViewState& view, const PlotArea& a) {
  const auto t = static_cast<int64_t>(a.x.to_value(a.mouse.x));
  a.draw->AddLine(ImVec2(a.mouse.x, a.min.y), ImVec2(a.mouse.x, a.max.y), IM_COL32(255, 255, 255, 90));
  ImGui::BeginTooltip();
  ImGui::Text("t = %s", gui_plot::human_time_ns(t).c_str());
  for (size_t i = 0; i < st.runs.size(); ++i) {
    const RunData* run = st.runs[i].data.get();
    if (!run || t > run->result.step_time_ns) continue;
    const int32_t s = sample_at(run->result, t);
    if (s < 0) continue;
    const sim::MemorySample& m = run->result.timeline[s];
    const int32_t span = span_at(*run, 0, t);
    const std::string op = span >= 0 ? op_name(*run->graph, run->result.spans[span].op) : "(between ops)";
    ImGui::PushStyleColor(ImGuiCol_Text, to_u32(st.inputs.strategies[i].color));
    ImGui::TextUnformatted(st.inputs.strategies[i].spec.c_str());
    ImGui::PopStyleColor();
    ImGui::SameLine();
    ImGui::Text("%s  %s, %s", gui_plot::human_bytes(m.allocated_bytes + run->stash_offset).c_str(), op.c_str(),
                std::string(sim::phase_name(m.phase)).c_str());
    const Run& r = st.runs[i];
    if (view.stacked && static_cast<int>(i) == view.focused && r.categories &&
        static_cast<size_t>(s) < r.categories->at.size()) {
      const sim::Breakdown& b = r.categories->at[s];
      for (int c = sim::kCategoryCount - 1; c >= 0; --c) {
        if (b[c] == 0) continue;
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(category_color(static_cast<sim::Category>(c))),
                           "   %-17s %s", std::string(sim::category_name(static_cast<sim::Category>(c))).c_str(),
                           gui_plot::human_bytes(b[c]).c_str());
      }
    }
    if (run->stash_offset > 0)  // gui_pp
      ImGui::TextDisabled("   of which in-flight stash %s (stage %lld)",
                          gui_plot::human_bytes(run->stash_offset).c_str(),
                          static_cast<long long>(run->stage));
  }
  if (st.overlay) {
    const auto& pts = st.overlay->points;
    const int64_t k = point_at(pts, t);
    if (k >= 0) {
      const actsim_cli::OverlayPoint& p = pts[static_cast<std::size_t>(k)];
      const actsim_cli::SnapshotEvent& e =
          st.overlay->snapshot->device.trace[static_cast<std::size_t>(p.event)];
      ImGui::PushStyleColor(ImGuiCol_Text, measured_color());
      ImGui::TextUnformatted("measured");
      ImGui::PopStyleColor();
      ImGui::SameLine();
      ImGui::Text("%s  event %lld, %s%s%s", gui_plot::human_bytes(p.allocated_bytes).c_str(),
                  static_cast<long long>(p.event), e.phase.empty() ? "no phase hint" : e.phase.c_str(),
                  e.frame.empty() ? "" : ", ", e.frame.c_str());
    }
  }
  ImGui::EndTooltip();
}


// gui_pp: what a pipeline's curves are, above the plot.
void pipeline_note(const AppState& st, const ViewState& view) {
  const RunData* focus = view.focused >= 0 && view.focused < static_cast<int>(st.runs.size())
                             ? st.runs[view.focused].data.get()
                             : nullptr;
  if (!focus || !focus->pipeline) return;
  const sim::StageResult& sr = focus->pipeline->stages[static_cast<size_t>(focus->stage)];
  const std::string band =
      st.inputs.setup.vpp > 1
          ? "the other chunk micro-batches' stash of the " + std::to_string(sr.in_flight) +
                " in flight (interleaved)"
          : "f-1 = " + std::to_string(sr.in_flight - 1) + " other micro-batches' stash";
  ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.95f, 0.85f, 0.55f, 1));
  ImGui::TextWrapped("pipeline: the focused strategy shows stage %lld of %zu (%s), one micro-batch "
                     "in the steady state; each curve is raised by its stage's in-flight stash "
                     "(the band: %s), so its peak is the stage's peak",
                     static_cast<long long>(focus->stage), focus->pipeline->stages.size(),
                     st.inputs.stage_shown < 0 ? "its worst" : "chosen", band.c_str());
  ImGui::PopStyleColor();
}

}  // namespace

void memory_plot(const AppState& st, ViewState& view, ImVec2 size) {
  int64_t end_ns = 0, top = 0, capacity = 0;
  for (const Run& r : st.runs) {
    if (!r.data) continue;
    end_ns = std::max(end_ns, r.data->result.step_time_ns);
    top = std::max(top, curve_peak_bytes(*r.data));  // gui_pp: the drawn curve's peak
    capacity = capacity_bytes(r.data->result);
  }
  if (end_ns == 0) {
    ImGui::TextDisabled("no simulation yet (see the errors on the left)");
    return;
  }
  if (st.overlay) top = std::max(top, st.overlay->snapshot->peaks.allocated.bytes);
  // The capacity line is in view unless the user fits the axis to the curves (small models).
  const double ymax = static_cast<double>(view.fit_curves ? top : std::max(top, capacity)) * 1.08;
  const AxisSpec xs{view.time, gui_plot::Unit::kTimeNs,
                    "simulated time (wheel: zoom, drag: pan, double-click: whole step)"};
  const AxisSpec ys{{0, ymax}, gui_plot::Unit::kBytes, "allocated"};
  const PlotArea a = begin_plot("##memory", size, xs, ys);
  const RunData* focus = focused_run(st, view);
  if (focus) draw_bands(a, *focus);
  if (focus) draw_stash_band(a, *focus, st.inputs.setup.vpp);  // gui_pp
  const Run* focus_run = focus ? &st.runs[view.focused] : nullptr;
  if (view.stacked && focus && focus_run->categories) {
    draw_stacked(a, *focus, *focus_run->categories);
  } else {
    for (size_t i = 0; i < st.runs.size(); ++i)
      if (st.runs[i].data)
        draw_line(a, *st.runs[i].data, to_u32(st.inputs.strategies[i].color));
  }
  if (st.overlay) draw_measured(st, a);
  const std::string cap = "capacity " + gui_plot::human_bytes(capacity) + " (HBM - context - comm)";
  hline(a, static_cast<double>(capacity), capacity_color(), cap.c_str());
  for (size_t i = 0; i < st.runs.size(); ++i) {
    const RunData* run = st.runs[i].data.get();
    if (!run || (view.stacked && static_cast<int>(i) != view.focused)) continue;
    // gui_pp: the drawn curve's peak (with a pipeline: the stage's peak, its stash included)
    const int64_t peak = curve_peak_bytes(*run);
    const ImVec2 p(static_cast<float>(a.x.to_px(static_cast<double>(run->result.peak_t_ns))),
                   static_cast<float>(a.y.to_px(static_cast<double>(peak))));
    const ImU32 col = to_u32(st.inputs.strategies[i].color);
    a.draw->AddCircle(p, 5, IM_COL32(255, 255, 255, 230), 12, 2.5f);
    a.draw->AddCircleFilled(p, 3.5f, col);
    if (static_cast<int>(i) == view.focused) {
      const std::string label =
          "peak " + gui_plot::human_bytes(peak) +
          (run->pipeline ? " (stage " + std::to_string(run->stage) + ")" : std::string());
      const ImVec2 ts = ImGui::CalcTextSize(label.c_str());
      const float x = std::min(p.x + 7, a.max.x - ts.x - 2);
      a.draw->AddText(ImVec2(x, std::max(a.min.y, p.y - ts.y - 4)), IM_COL32(255, 255, 255, 255),
                      label.c_str());
    }
  }
  end_plot(a);
  time_axis_input(a, view, static_cast<double>(end_ns));
  if (a.hovered) hover_tooltip(st, view, a);
}

void memory_view(const AppState& st, ViewState& view) {
  const float fh = ImGui::GetFontSize();
  ImGui::TextDisabled("snapshot:");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(22 * fh);
  const bool enter = ImGui::InputTextWithHint("##snapshot path", "PyTorch memory snapshot (.pickle)",
                                              &view.snapshot_path,
                                              ImGuiInputTextFlags_EnterReturnsTrue);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("torch.cuda.memory._dump_snapshot() of a real step: its memory curve is "
                      "drawn on the focused strategy's time axis, each phase stretched onto the "
                      "simulated one");
  ImGui::SameLine();
  if ((ImGui::Button("Open##snapshot") || enter) && !view.snapshot_path.empty())
    view.snapshot_requested = true;
  if (st.snapshot) {
    ImGui::SameLine();
    if (ImGui::Button("Close##snapshot")) {
      view.snapshot_path.clear();
      view.snapshot_requested = true;
    }
    if (st.overlay) {
      const actsim_cli::SnapshotPeaks& pk = st.snapshot->peaks;
      const sim::Result& r = st.overlay->run->result;
      const double err = pk.allocated.bytes > 0
                             ? 100.0 * static_cast<double>(r.peak_allocated_bytes - pk.allocated.bytes) /
                                   static_cast<double>(pk.allocated.bytes)
                             : 0.0;
      ImGui::SameLine(0, fh);
      ImGui::Text("measured peak %s, %s simulated %s (%+.1f %%)",
                  gui_plot::human_bytes(pk.allocated.bytes).c_str(),
                  st.inputs.strategies[static_cast<std::size_t>(st.overlay->strategy)].spec.c_str(),
                  gui_plot::human_bytes(r.peak_allocated_bytes).c_str(), err);
    }
  }
  pipeline_note(st, view);  // gui_pp
  ImGui::Checkbox("stacked by category", &view.stacked);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("the focused strategy (radio button in the strategies panel)");
  ImGui::SameLine();
  ImGui::Checkbox("fit y to the curves", &view.fit_curves);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("the y axis ends above the highest curve instead of the device capacity");
  ImGui::SameLine(0, ImGui::GetFontSize() * 2);
  ImGui::TextDisabled("phases of the focused strategy:");
  ImGui::SameLine();
  for (sim::Phase p : {sim::Phase::kForward, sim::Phase::kBackward, sim::Phase::kRecompute,
                       sim::Phase::kOptimizer})
    legend_item(phase_color(p, 0.55f), std::string(sim::phase_name(p)).c_str());
  ImGui::NewLine();
  if (view.stacked) {
    for (int c = 0; c < sim::kCategoryCount; ++c)
      legend_item(category_color(static_cast<sim::Category>(c)),
                  std::string(sim::category_name(static_cast<sim::Category>(c))).c_str());
  } else {
    for (size_t i = 0; i < st.inputs.strategies.size(); ++i)
      legend_item(to_u32(st.inputs.strategies[i].color), st.inputs.strategies[i].spec.c_str());
  }
  if (st.overlay) legend_item(measured_color(), "measured (snapshot)");
  if (const RunData* f = focused_run(st, view); f && f->stash_offset > 0)  // gui_pp
    legend_item(stash_color(), "in-flight stash (focused strategy's stage)");
  ImGui::NewLine();
  memory_plot(st, view, ImGui::GetContentRegionAvail());
}

}  // namespace gui
