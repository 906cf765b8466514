// The valley (DESIGN.md §4): peak memory against m evenly spaced checkpoints over n blocks.
// Chen et al.'s unit-cost m + n/m (in bytes: units of one block's activations A plus the
// baseline), the real M(m) = m*c + ceil(n/m)*A + baseline, the simulated peak of each plan as
// points, m*, sqrt(n) and the device capacity marked, and the step time on a second axis.
#include <algorithm>
#include <cmath>
#include <string>

#include <imgui.h>

#include "canvas.hpp"
#include "colors.hpp"
#include "gui_plot/format.hpp"
#include "panels.hpp"
#include "update.hpp"  // gui_pp: is_pipeline

namespace gui {
namespace {

constexpr ImU32 kChen = IM_COL32(150, 150, 255, 255);
constexpr ImU32 kModel = IM_COL32(255, 190, 60, 255);
constexpr ImU32 kSim = IM_COL32(250, 250, 250, 255);
constexpr ImU32 kBlock = IM_COL32(120, 220, 160, 255);
constexpr ImU32 kTime = IM_COL32(200, 120, 220, 255);

double chen_bytes(const sim::Valley& v, const sim::ValleyPoint& p) {
  return p.chen_units * static_cast<double>(v.a_bytes) + static_cast<double>(v.baseline_bytes);
}

// `simulated`: whether p has its simulation yet (a valley filling in has only M(m) and Chen's).
void tooltip(const sim::Valley& v, const sim::ValleyPoint& p, bool simulated) {
  ImGui::BeginTooltip();
  ImGui::Text("m = %lld segments of about %lld blocks", static_cast<long long>(p.m),
              static_cast<long long>((v.n + p.m - 1) / p.m));
  if (v.closed_form) {  // census12: no curves where the blocks differ
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kChen), "Chen m + n/m = %.2f units: %s",
                       p.chen_units, gui_plot::human_bytes(static_cast<int64_t>(chen_bytes(v, p))).c_str());
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kModel), "M(m) = %s",
                       gui_plot::human_bytes(p.model_bytes).c_str());
  }
  if (!simulated) {
    ImGui::TextDisabled("not simulated yet");
    ImGui::EndTooltip();
    return;
  }
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kSim), "simulated peak %s",
                     gui_plot::human_bytes(p.simulated_bytes).c_str());
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kBlock), "simulated block-phase peak %s",
                     gui_plot::human_bytes(p.simulated_block_bytes).c_str());
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kTime), "step time %s, recompute %s",
                     gui_plot::human_time_ns(p.step_time_ns).c_str(),
                     gui_plot::human_si(static_cast<double>(p.recompute_flops), "FLOP").c_str());
  ImGui::EndTooltip();
}

}  // namespace

void valley_view(const AppState& st, ViewState& view) {
  // gui_pp: its cells are runs without pipeline stages (one graph each); rather than a figure
  // that ignores pp and the micro-batches, one line says so (nothing is requested: update.cpp).
  if (is_pipeline(st.inputs.setup)) {
    ImGui::TextDisabled("%s simulates runs without pipeline stages (pp 1, one micro-batch); set "
                        "pipeline stages and micro-batches to 1 to see it.", "The valley");
    return;
  }
  const float fh = ImGui::GetFontSize();
  int64_t n = valley_blocks(st);
  const int64_t n_max = std::max<int64_t>(8, 2 * st.inputs.model.layers);
  ImGui::SetNextItemWidth(18 * fh);
  const int64_t one = 1;
  if (ImGui::SliderScalar("blocks n", ImGuiDataType_S64, &n, &one, &n_max, "n = %lld"))
    view.valley_n = std::clamp<int64_t>(n, 1, n_max);
  ImGui::SameLine();
  if (ImGui::SmallButton("model's layers")) view.valley_n = 0;
  const ValleyData* vd = st.valley.get();
  const bool current = vd && vd->key.revision == st.revision && vd->key.n == n;
  ImGui::SameLine(0, 2 * fh);
  if (!vd) {
    ImGui::TextDisabled("computing...");
    return;
  }
  if (!current) ImGui::TextDisabled("updating (showing n = %lld)...", static_cast<long long>(vd->key.n));
  else ImGui::TextDisabled("%lld / %lld plans simulated in %.0f ms%s", static_cast<long long>(vd->valley.points.size()),
                           static_cast<long long>(vd->valley.n), vd->elapsed_ms, vd->complete ? "" : " ...");
  if (!vd->error.empty()) {
    ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", vd->error.c_str());
    return;
  }
  const sim::Valley& v = vd->valley;
  if (v.closed_form) {
    ImGui::Text("checkpoint c = %s, block activations A = %s, baseline %s:  m* = %lld (simulated %lld%s), sqrt(n) = %lld",
                gui_plot::human_bytes(v.c_bytes).c_str(), gui_plot::human_bytes(v.a_bytes).c_str(),
                gui_plot::human_bytes(v.baseline_bytes).c_str(), static_cast<long long>(v.m_star),
                static_cast<long long>(v.m_star_simulated), vd->complete ? "" : " so far",
                static_cast<long long>(v.sqrt_n));
    legend_item(kChen, "Chen m + n/m (c = A)");
    legend_item(kModel, "M(m) = m c + ceil(n/m) A + baseline");
  } else {  // census12: heterogeneous blocks: the simulated points alone
    ImGui::TextWrapped("No closed form: %s. Simulated least at m = %lld%s, sqrt(n) = %lld.",
                       v.why.c_str(), static_cast<long long>(v.m_star_simulated),
                       vd->complete ? "" : " so far", static_cast<long long>(v.sqrt_n));
  }
  legend_item(kSim, "simulated peak");
  legend_item(kBlock, "simulated block-phase peak");
  legend_item(kTime, "step time (right axis)");
  ImGui::NewLine();
  if (v.n <= 0) return;
  // The analytic curves are whole from the head on; simulated points fill in (a prefix of m).
  std::vector<sim::ValleyPoint> curve;
  if (v.closed_form)  // census12
    for (int64_t m = 1; m <= v.n; ++m) curve.push_back(sim::valley_model_point(v, m));

  int64_t capacity = 0;
  for (const Run& r : st.runs)
    if (r.data) capacity = capacity_bytes(r.data->result);
  // The data's own range (a valley is a few percent deep on top of a large baseline). The
  // capacity joins the range when it is near the data; far off, it is named at the top instead.
  double ymin = 1e300, ymax = 0, tmin = 1e300, tmax = 0;
  for (const sim::ValleyPoint& p : curve)
    for (double b : {chen_bytes(v, p), static_cast<double>(p.model_bytes)})
      ymin = std::min(ymin, b), ymax = std::max(ymax, b);
  for (const sim::ValleyPoint& p : v.points) {
    for (double b : {static_cast<double>(p.simulated_bytes), static_cast<double>(p.simulated_block_bytes)})
      ymin = std::min(ymin, b), ymax = std::max(ymax, b);
    tmin = std::min(tmin, static_cast<double>(p.step_time_ns));
    tmax = std::max(tmax, static_cast<double>(p.step_time_ns));
  }
  const auto cap = static_cast<double>(capacity);
  const bool cap_in_range = capacity > 0 && cap < 1.5 * ymax && cap > ymin / 1.5;
  if (cap_in_range) ymin = std::min(ymin, cap), ymax = std::max(ymax, cap);
  const double ypad = 0.06 * std::max(ymax - ymin, 0.02 * ymax);
  // Step times differ little between plans: at least a quarter of the time is shown, so small
  // differences look small.
  if (v.points.empty()) tmin = 0, tmax = 1;
  if (ymax <= 0) ymin = 0, ymax = 1;  // census12: no curve and no point yet
  const double tpad = 0.5 * std::max(tmax - tmin, 0.25 * tmax) - 0.5 * (tmax - tmin);
  const AxisSpec xs{{0.5, static_cast<double>(v.n) + 0.5}, gui_plot::Unit::kPlain, "m: evenly spaced checkpoints (segments)"};
  const AxisSpec ys{{std::max(0.0, ymin - ypad), ymax + ypad}, gui_plot::Unit::kBytes, "peak memory"};
  const PlotArea a = begin_plot("##valley", ImGui::GetContentRegionAvail(), xs, ys, 6 * fh);
  const gui_plot::Axis ta =
      right_axis(a, {{std::max(0.0, tmin - tpad - 0.05 * tmax), tmax + tpad + 0.05 * tmax},
                     gui_plot::Unit::kTimeNs, "step time"}, kTime);

  const auto px = [&](double m) { return static_cast<float>(a.x.to_px(m)); };
  const auto py = [&](double b) { return static_cast<float>(a.y.to_px(b)); };
  std::vector<ImVec2> chen, model, time;
  for (const sim::ValleyPoint& p : curve) {
    const double m = static_cast<double>(p.m);
    chen.push_back(ImVec2(px(m), py(chen_bytes(v, p))));
    model.push_back(ImVec2(px(m), py(static_cast<double>(p.model_bytes))));
  }
  for (const sim::ValleyPoint& p : v.points)
    time.push_back(ImVec2(px(static_cast<double>(p.m)), static_cast<float>(ta.to_px(static_cast<double>(p.step_time_ns)))));
  vline(a, static_cast<double>(v.sqrt_n), kChen, ("sqrt(n) = " + std::to_string(v.sqrt_n)).c_str(), 1.0f);
  const std::string mstar = "m* = " + std::to_string(v.m_star);
  if (v.closed_form) {
    // Label m* below sqrt(n)'s label when they are close.
    const float x = px(static_cast<double>(v.m_star));
    a.draw->AddLine(ImVec2(x, a.min.y), ImVec2(x, a.max.y), kModel, 1.0f);
    const float tx = std::min(x + 3, a.max.x - ImGui::CalcTextSize(mstar.c_str()).x - 3);
    a.draw->AddText(ImVec2(tx, a.min.y + 1.3f * fh), kModel, mstar.c_str());
  }
  if (cap_in_range) {
    hline(a, cap, capacity_color(), ("capacity " + gui_plot::human_bytes(capacity)).c_str());
  } else if (capacity > 0) {
    const std::string note = "capacity " + gui_plot::human_bytes(capacity) +
                             (cap > ymax ? " (above, off scale)" : " (below, off scale)");
    const ImVec2 ts = ImGui::CalcTextSize(note.c_str());
    a.draw->AddText(ImVec2(a.max.x - ts.x - 4, a.max.y - ts.y - 4), capacity_color(), note.c_str());
  }
  a.draw->AddPolyline(time.data(), static_cast<int>(time.size()), kTime, 0, 1.2f);
  a.draw->AddPolyline(chen.data(), static_cast<int>(chen.size()), kChen, 0, 2.0f);
  a.draw->AddPolyline(model.data(), static_cast<int>(model.size()), kModel, 0, 2.0f);
  const float r = std::clamp(static_cast<float>((a.max.x - a.min.x) / static_cast<float>(v.n)) * 0.3f, 2.0f, 4.5f);
  for (const sim::ValleyPoint& p : v.points) {
    const float x = px(static_cast<double>(p.m));
    a.draw->AddCircle(ImVec2(x, py(static_cast<double>(p.simulated_block_bytes))), r, kBlock, 10, 1.5f);
    a.draw->AddCircleFilled(ImVec2(x, py(static_cast<double>(p.simulated_bytes))), r, kSim, 10);
  }
  end_plot(a);
  if (a.hovered) {
    const auto m = std::clamp<int64_t>(std::llround(a.x.to_value(a.mouse.x)), 1, v.n);
    const bool simulated = m <= static_cast<int64_t>(v.points.size());
    const sim::ValleyPoint& p = simulated ? v.points[static_cast<size_t>(m - 1)] : curve[static_cast<size_t>(m - 1)];
    a.draw->AddLine(ImVec2(px(static_cast<double>(m)), a.min.y), ImVec2(px(static_cast<double>(m)), a.max.y),
                    IM_COL32(255, 255, 255, 80));
    tooltip(v, p, simulated);
  }
}

}  // namespace gui
