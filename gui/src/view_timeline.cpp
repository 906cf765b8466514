// The op timeline: per strategy one lane per stream (0 compute, 1 collective), one bar per op
// coloured by phase (recompute in its own colour), narrow bars merged per pixel; wheel zoom,
// drag pan and the time range shared with the memory view; hover for the op.
#include <algorithm>
#include <string>

#include <imgui.h>

#include "canvas.hpp"
#include "colors.hpp"
#include "gui_plot/decimate.hpp"
#include "gui_plot/format.hpp"
#include "op_text.hpp"
#include "panels.hpp"
#include "update.hpp"  // gui_pp: is_pipeline

namespace gui {
namespace {

constexpr const char* kStreamNames[6] = {"compute", "collective", "copy to host", "copy to device",
                                         "host", "data-parallel"};
// Lane labels in the margin, per stream (compute shows the strategy).
constexpr const char* kLaneLabels[6] = {"", "comm", "d2h", "h2d", "host", "dp comm"};

struct Lane {
  int run = 0;
  int stream = 0;
};

void span_tooltip(const AppState& st, const Lane& lane, int32_t span_index) {
  const RunData& run = *st.runs[lane.run].data;
  const sim::OpSpan& s = run.result.spans[span_index];
  ImGui::BeginTooltip();
  ImGui::Text("%s  (%s, %s stream)", op_name(*run.graph, s.op).c_str(),
              std::string(sim::phase_name(s.phase)).c_str(), kStreamNames[lane.stream]);
  ImGui::TextDisabled("%s", st.inputs.strategies[lane.run].spec.c_str());
  ImGui::Text("start %s, duration %s", gui_plot::human_time_ns(s.start_ns).c_str(),
              gui_plot::human_time_ns(s.duration_ns).c_str());
  if (s.op >= 0 && s.op < static_cast<int32_t>(run.graph->ops.size())) {
    const sim::Op& op = run.graph->ops[s.op];
    const sim::OpCost& c = s.phase == sim::Phase::kBackward ? op.bwd : op.fwd;
    if (op.block >= 0) ImGui::Text("layer %d", op.block);
    else ImGui::TextUnformatted("outside the blocks");
    ImGui::Text("%s, %s moved", gui_plot::human_si(static_cast<double>(c.flops), "FLOP").c_str(),
                gui_plot::human_bytes(c.bytes).c_str());
    if (lane.stream == 1)
      ImGui::Text("collective payload %s", gui_plot::human_bytes(c.comm_bytes).c_str());
  }
  ImGui::EndTooltip();
}

}  // namespace

void timeline_view(const AppState& st, ViewState& view) {
  // gui_pp: a pipeline's lanes are one stage's micro-batch (the stage shown, per strategy)
  if (is_pipeline(st.inputs.setup))
    for (size_t i = 0; i < st.runs.size(); ++i)
      if (const RunData* run = st.runs[i].data.get(); run && run->pipeline && i == static_cast<size_t>(view.focused))
        ImGui::TextColored(ImVec4(0.95f, 0.85f, 0.55f, 1), "pipeline: the ops of stage %lld of %zu for one micro-batch in the steady "
                           "state; the step (%s) runs %lld micro-batches plus the bubble",
                           static_cast<long long>(run->stage), run->pipeline->stages.size(),
                           gui_plot::human_time_ns(run->pipeline->summary.step_time_ns).c_str(),
                           static_cast<long long>(st.inputs.setup.microbatches));
  std::vector<Lane> lanes;
  int64_t end_ns = 0;
  for (int i = 0; i < static_cast<int>(st.runs.size()); ++i) {
    const RunData* run = st.runs[i].data.get();
    if (!run) continue;
    end_ns = std::max(end_ns, run->result.step_time_ns);
    lanes.push_back({i, 0});
    for (int s = 1; s < static_cast<int>(run->lanes.size()); ++s)
      if (!run->lanes[static_cast<size_t>(s)].empty()) lanes.push_back({i, s});
  }
  for (sim::Phase p : {sim::Phase::kForward, sim::Phase::kBackward, sim::Phase::kRecompute,
                       sim::Phase::kOptimizer})
    legend_item(phase_color(p, 1), std::string(sim::phase_name(p)).c_str());
  ImGui::TextDisabled("(lighter: several ops merged in one pixel)");
  if (lanes.empty()) {
    ImGui::TextDisabled("no simulation yet (see the errors on the left)");
    return;
  }
  const float fh = ImGui::GetFontSize();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  // Lanes at most 3 lines tall, in at most half the height; the memory plot below shares the
  // time axis.
  const float lane_h = std::clamp((0.5f * avail.y - 3.5f * fh) / static_cast<float>(lanes.size()),
                                  1.6f * fh, 3.0f * fh);
  const float height = lane_h * static_cast<float>(lanes.size()) + 3.2f * fh;
  const AxisSpec xs{view.time, gui_plot::Unit::kTimeNs, "simulated time (wheel: zoom, drag: pan, double-click: whole step)"};
  const AxisSpec ys{{0, static_cast<double>(lanes.size())}, gui_plot::Unit::kPlain, "", false};
  const PlotArea a = begin_plot("##timeline", ImVec2(avail.x, height), xs, ys);
  int32_t hovered_span = -1;
  Lane hovered_lane;
  for (size_t l = 0; l < lanes.size(); ++l) {
    const Lane& lane = lanes[l];
    const RunData& run = *st.runs[lane.run].data;
    const float y0 = a.min.y + lane_h * static_cast<float>(l) + 2;
    const float y1 = y0 + lane_h - 4;
    if (l % 2 == 1) a.draw->AddRectFilled(ImVec2(a.min.x, y0 - 2), ImVec2(a.max.x, y1 + 2), IM_COL32(255, 255, 255, 8));
    const auto& idx = run.lanes[lane.stream];
    const auto& spans = run.result.spans;
    const auto items = gui_plot::decimate_bars(
        idx.size(), [&](std::size_t i) { return spans[idx[i]].start_ns; },
        [&](std::size_t i) { return spans[idx[i]].duration_ns; },
        [&](std::size_t i) { return spans[idx[i]].phase; }, a.x, 3.0);
    for (const gui_plot::BarItem& it : items) {
      const sim::OpSpan& s = spans[idx[it.first]];
      const ImU32 col = phase_color(s.phase, it.count == 1 ? 1.0f : 0.55f);
      const float x0 = static_cast<float>(it.px0), x1 = static_cast<float>(it.px1);
      a.draw->AddRectFilled(ImVec2(x0, y0), ImVec2(x1, y1), col);
      if (it.count == 1 && x1 - x0 > 4) a.draw->AddRect(ImVec2(x0, y0), ImVec2(x1, y1), IM_COL32(0, 0, 0, 120));
      if (it.count == 1 && x1 - x0 > 40) {
        const std::string name = op_name(*run.graph, s.op);
        const ImVec2 ts = ImGui::CalcTextSize(name.c_str());
        if (ts.x < x1 - x0 - 6)
          a.draw->AddText(ImVec2(x0 + 3, (y0 + y1 - ts.y) / 2), IM_COL32(0, 0, 0, 255), name.c_str());
      }
    }
    if (a.hovered && a.mouse.y >= y0 && a.mouse.y < y1) {
      const int32_t span = span_at(run, lane.stream, static_cast<int64_t>(a.x.to_value(a.mouse.x)));
      if (span >= 0) hovered_span = span, hovered_lane = lane;
    }
  }
  end_plot(a);
  // Lane labels in the left margin: strategy colour and stream.
  for (size_t l = 0; l < lanes.size(); ++l) {
    const Lane& lane = lanes[l];
    const float y = a.min.y + lane_h * (static_cast<float>(l) + 0.5f);
    const ImU32 col = to_u32(st.inputs.strategies[lane.run].color);
    const std::string& spec = st.inputs.strategies[lane.run].spec;
    const float max_w = a.min.x - ImGui::GetWindowPos().x - 0.8f * fh;
    const std::string label = lane.stream == 0 ? fit_text(spec, max_w) : kLaneLabels[lane.stream];
    const ImVec2 ts = ImGui::CalcTextSize(label.c_str());
    a.draw->AddText(ImVec2(a.min.x - ts.x - 0.4f * fh, y - ts.y / 2), col, label.c_str());
  }
  time_axis_input(a, view, static_cast<double>(end_ns));
  if (hovered_span >= 0) span_tooltip(st, hovered_lane, hovered_span);
  memory_plot(st, view, ImGui::GetContentRegionAvail());
}

}  // namespace gui
