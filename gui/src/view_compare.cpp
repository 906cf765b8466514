// The comparison: a table of every strategy (sortable by any column) and a stacked bar of the
// ledger's breakdown at each strategy's peak, with the device capacity marked; CSV export.
#include <algorithm>
#include <string>

#include <imgui.h>
#include <imgui_stdlib.h>

#include "canvas.hpp"
#include "colors.hpp"
#include "compare.hpp"
#include "export.hpp"
#include "gui_plot/format.hpp"
#include "panels.hpp"
#include "update.hpp"  // gui_pp: step_result

namespace gui {
namespace {

void table(const AppState& st, std::vector<CompareRow>& rows) {
  constexpr int kCols = static_cast<int>(CompareColumn::kCount);
  const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_SortTristate |
                                ImGuiTableFlags_RowBg |
                                ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_BordersOuter |
                                ImGuiTableFlags_SizingStretchProp;
  if (!ImGui::BeginTable("compare", kCols, flags)) return;
  for (int c = 0; c < kCols; ++c) {
    const auto col = static_cast<CompareColumn>(c);
    ImGui::TableSetupColumn(column_label(col), 0, col == CompareColumn::kStrategy ? 1.6f : 1.0f);
  }
  ImGui::TableHeadersRow();
  // The table keeps its sort specs itself (none at first: strategy order); re-sorting a handful
  // of rows every frame is free.
  if (const ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs(); specs && specs->SpecsCount > 0)
    sort_rows(rows, static_cast<CompareColumn>(specs->Specs[0].ColumnIndex),
              specs->Specs[0].SortDirection == ImGuiSortDirection_Descending);
  for (const CompareRow& r : rows) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(to_u32(st.inputs.strategies[r.run].color)), "%s",
                       r.strategy.c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(gui_plot::human_bytes(r.peak_bytes).c_str());
    ImGui::TableNextColumn();
    ImGui::TextColored(r.fits ? ImVec4(0.5f, 0.9f, 0.5f, 1) : ImVec4(1, 0.45f, 0.45f, 1), "%s (%s)",
                       r.fits ? "yes" : "no", gui_plot::human_bytes(r.headroom_bytes).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(gui_plot::human_si(static_cast<double>(r.recompute_flops), "FLOP").c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%.1f %%", 100 * r.recompute_share);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(gui_plot::human_time_ns(r.step_time_ns).c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%.1f %%", 100 * r.mfu);
    ImGui::TableNextColumn();
    ImGui::Text("%.1f %%", 100 * r.hfu);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(gui_plot::human_si(r.tokens_per_s, "").c_str());
    ImGui::TableNextColumn();  // polish: defined only where fp8 GEMMs ran
    if (r.fp8_model_flops > 0) ImGui::Text("%.1f %%", 100 * r.mfu_fp8_mixed);
    else ImGui::TextDisabled("no fp8");
  }
  ImGui::EndTable();
  // polish: what MFU and HFU divide by (sim/src/utilization.cpp), and the fp8 share of the work
  if (!rows.empty()) {
    const CompareRow& r0 = rows.front();
    ImGui::TextDisabled("MFU and HFU: against the dense 16-bit peak, %.0f TFLOP/s per GPU",
                        r0.mfu_peak_flops_per_s * 1e-12);
    if (r0.fp8_model_flops > 0)
      ImGui::TextDisabled("MFU (mixed): fp8 GEMMs, %s of the model FLOPs, at the fp8 peak, the "
                          "rest at the 16-bit one",
                          gui_plot::human_si(static_cast<double>(r0.fp8_model_flops), "FLOP").c_str());
  }
}

void breakdown_bars(const AppState& st, const std::vector<CompareRow>& rows) {
  const float fh = ImGui::GetFontSize();
  int64_t top = 0, capacity = 0;
  for (const CompareRow& r : rows) {
    top = std::max(top, r.peak_bytes);
    capacity = capacity_bytes(step_result(*st.runs[r.run].data));
  }
  for (int c = 0; c < sim::kCategoryCount; ++c)
    legend_item(category_color(static_cast<sim::Category>(c)),
                std::string(sim::category_name(static_cast<sim::Category>(c))).c_str());
  ImGui::NewLine();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float want = static_cast<float>(rows.size()) * 2.4f * fh + 4.7f * fh;
  const AxisSpec xs{{0, static_cast<double>(std::max(top, capacity)) * 1.05}, gui_plot::Unit::kBytes,
                    "breakdown of allocated memory at each strategy's peak"};
  const AxisSpec ys{{0, static_cast<double>(rows.size())}, gui_plot::Unit::kPlain, "", false};
  const PlotArea a = begin_plot("##breakdown", ImVec2(avail.x, std::min(avail.y, want)), xs, ys);
  // Rows below a line of room for the capacity label.
  const float rows_top = a.min.y + 1.2f * fh;
  const float bar_h = (a.max.y - rows_top) / static_cast<float>(std::max<size_t>(rows.size(), 1));
  int hovered_row = -1, hovered_cat = -1;
  for (size_t i = 0; i < rows.size(); ++i) {
    const sim::Breakdown& b = step_result(*st.runs[rows[i].run].data).peak_breakdown;
    const float y0 = rows_top + bar_h * static_cast<float>(i) + 0.2f * bar_h;
    const float y1 = y0 + 0.6f * bar_h;
    double base = 0;
    for (int c = 0; c < sim::kCategoryCount; ++c) {
      if (b[c] == 0) continue;
      const float x0 = static_cast<float>(a.x.to_px(base));
      base += static_cast<double>(b[c]);
      const float x1 = static_cast<float>(a.x.to_px(base));
      a.draw->AddRectFilled(ImVec2(x0, y0), ImVec2(std::max(x1, x0 + 1), y1),
                            category_color(static_cast<sim::Category>(c)));
      if (a.hovered && a.mouse.x >= x0 && a.mouse.x < x1 && a.mouse.y >= y0 && a.mouse.y < y1)
        hovered_row = static_cast<int>(i), hovered_cat = c;
    }
  }
  vline(a, static_cast<double>(capacity), capacity_color(), "capacity", 2);
  end_plot(a);
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string s = fit_text(rows[i].strategy, a.min.x - ImGui::GetWindowPos().x - 0.8f * fh);
    const ImVec2 ts = ImGui::CalcTextSize(s.c_str());
    a.draw->AddText(ImVec2(a.min.x - ts.x - 0.4f * fh, rows_top + bar_h * (static_cast<float>(i) + 0.5f) - ts.y / 2),
                    to_u32(st.inputs.strategies[rows[i].run].color), s.c_str());
  }
  if (hovered_row >= 0) {
    const sim::Result& r = step_result(*st.runs[rows[hovered_row].run].data);
    ImGui::BeginTooltip();
    ImGui::Text("%s: %s %s of %s at the peak (%s)", rows[hovered_row].strategy.c_str(),
                std::string(sim::category_name(static_cast<sim::Category>(hovered_cat))).c_str(),
                gui_plot::human_bytes(r.peak_breakdown[hovered_cat]).c_str(),
                gui_plot::human_bytes(r.peak_allocated_bytes).c_str(), r.peak_op.c_str());
    ImGui::EndTooltip();
  }
}

// gui_pp: each pipeline run's stages (as `actsim run --pp` prints them): blocks, micro-batches in
// flight, one micro-batch's stash, all in flight, the stage's peak and whether it fits; budget:
// each stage's plan. The step's time and throughput above are the pipeline summary's.
void stage_tables(const AppState& st, const std::vector<CompareRow>& rows) {
  bool any = false;
  for (const CompareRow& row : rows) {
    const RunData& d = *st.runs[row.run].data;
    if (!d.pipeline) continue;
    if (!any) {
      ImGui::Separator();
      const sim::TrainSetup& s = st.inputs.setup;
      ImGui::Text("Pipeline stages: pp %lld, vpp %lld, %lld micro-batches; step time = (N + (p-1)/vpp) "
                  "x the slowest stage's micro-batch + its optimizer step",
                  static_cast<long long>(s.pp), static_cast<long long>(s.vpp),
                  static_cast<long long>(s.microbatches));
      any = true;
    }
    const sim::PipelineResult& p = *d.pipeline;
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(to_u32(st.inputs.strategies[row.run].color)),
                       "%s", row.strategy.c_str());
    ImGui::SameLine();
    ImGui::TextDisabled("worst stage %lld, step %s, %s tokens/s; the views show stage %lld",
                        static_cast<long long>(p.worst),
                        gui_plot::human_time_ns(p.summary.step_time_ns).c_str(),
                        gui_plot::human_si(p.summary.tokens_per_s, "").c_str(),
                        static_cast<long long>(d.stage));
    const bool plans = d.stage_plans.size() == p.stages.size();
    const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                                  ImGuiTableFlags_BordersOuter | ImGuiTableFlags_SizingStretchProp;
    const std::string id = "##stages" + std::to_string(row.run);
    if (!ImGui::BeginTable(id.c_str(), plans ? 9 : 8, flags)) continue;
    for (const char* h : {"stage", "blocks", "in flight", "stash (1 micro-batch)", "in-flight stash",
                          "peak allocated", "peak reserved", "fits (headroom)"})
      ImGui::TableSetupColumn(h);
    if (plans) ImGui::TableSetupColumn("plan", 0, 3.0f);
    ImGui::TableHeadersRow();
    for (const sim::StageResult& sr : p.stages) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::Text("%lld%s", static_cast<long long>(sr.stage), sr.stage == p.worst ? " (worst)" : "");
      ImGui::TableNextColumn();
      ImGui::Text("%lld", static_cast<long long>(sr.blocks));
      ImGui::TableNextColumn();
      ImGui::Text("%lld", static_cast<long long>(sr.in_flight));
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(gui_plot::human_bytes(sr.stash_bytes).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(gui_plot::human_bytes(sr.in_flight_bytes).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(gui_plot::human_bytes(sr.result.peak_allocated_bytes).c_str());
      ImGui::TableNextColumn();  // what `actsim run --pp` prints, and ranks the worst stage by
      ImGui::TextUnformatted(gui_plot::human_bytes(sr.result.peak_reserved_bytes).c_str());
      ImGui::TableNextColumn();
      ImGui::TextColored(sr.result.fits ? ImVec4(0.5f, 0.9f, 0.5f, 1) : ImVec4(1, 0.45f, 0.45f, 1),
                         "%s (%s)", sr.result.fits ? "yes" : "no",
                         gui_plot::human_bytes(sr.result.headroom_bytes).c_str());
      if (plans) {
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(d.stage_plans[static_cast<size_t>(sr.stage)].c_str());
      }
    }
    ImGui::EndTable();
  }
}

// One grouped list (bytes each, count, label) as a table.
void grouped_table(const char* id, const char* label_header,
                   const std::vector<std::pair<int64_t, std::string>>& items) {
  constexpr std::size_t kRows = 20;
  const auto groups = actsim_cli::grouped_by_label(items, kRows);
  if (groups.empty()) {
    ImGui::TextDisabled("  none");
    return;
  }
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersOuter |
                                ImGuiTableFlags_SizingStretchProp;
  if (!ImGui::BeginTable(id, 4, flags)) return;
  ImGui::TableSetupColumn("bytes each", 0, 1.0f);
  ImGui::TableSetupColumn("count", 0, 0.6f);
  ImGui::TableSetupColumn("total", 0, 1.0f);
  ImGui::TableSetupColumn(label_header, 0, 5.0f);
  ImGui::TableHeadersRow();
  for (const auto& [bytes, n, label] : groups) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(gui_plot::human_bytes(bytes).c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%lld", static_cast<long long>(n));
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(gui_plot::human_bytes(bytes * n).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(label.c_str());
  }
  ImGui::EndTable();
}

// The opened snapshot against the focused strategy: peaks, and the tensors live at both peaks
// matched as `actsim compare` matches them (what actsim missed, what it invented).
void snapshot_section(const AppState& st) {
  const SnapshotOverlay& o = *st.overlay;
  const actsim_cli::SnapshotPeaks& pk = o.snapshot->peaks;
  const sim::Result& r = o.run->result;
  ImGui::Separator();
  ImGui::TextUnformatted("Snapshot against the focused strategy");
  ImGui::Text("%s (CUDA device %lld) against %s", o.snapshot->file.c_str(),
              static_cast<long long>(pk.device),
              st.inputs.strategies[static_cast<std::size_t>(o.strategy)].spec.c_str());
  const auto peak_row = [](const char* what, int64_t measured, int64_t simulated) {
    const double err = measured > 0 ? 100.0 * static_cast<double>(simulated - measured) /
                                          static_cast<double>(measured)
                                    : 0.0;
    ImGui::Text("  %-15s measured %-11s simulated %-11s %+.1f %%", what,
                gui_plot::human_bytes(measured).c_str(), gui_plot::human_bytes(simulated).c_str(), err);
  };
  peak_row("peak allocated", pk.allocated.bytes, r.peak_allocated_bytes);
  peak_row("peak requested", pk.requested.bytes, r.peak_requested_bytes);
  peak_row("peak reserved", pk.reserved.bytes, r.peak_reserved_bytes);
  int64_t matched_bytes = 0;
  std::vector<std::pair<int64_t, std::string>> matched, sim_only, measured_only;
  for (const auto& [si, mi] : o.match.matched) {
    matched_bytes += o.simulated[si].bytes;
    const std::string& frame = pk.at_peak[mi].frame;
    matched.emplace_back(o.simulated[si].bytes,
                         o.simulated[si].label + "  <->  " + (frame.empty() ? "(no user frame)" : frame));
  }
  for (std::size_t si : o.match.simulated_only)
    sim_only.emplace_back(o.simulated[si].bytes, o.simulated[si].label);
  for (std::size_t mi : o.match.measured_only)
    measured_only.emplace_back(pk.at_peak[mi].allocated_bytes,
                               pk.at_peak[mi].frame.empty() ? "(no user frame)" : pk.at_peak[mi].frame);
  ImGui::Text("Tensors live at the peaks: %zu matched (%s), %zu simulated only, %zu measured only",
              o.match.matched.size(), gui_plot::human_bytes(matched_bytes).c_str(),
              o.match.simulated_only.size(), o.match.measured_only.size());
  if (ImGui::CollapsingHeader("Simulated only (actsim invented it, or PyTorch laid it out differently)",
                              ImGuiTreeNodeFlags_DefaultOpen))
    grouped_table("##sim only", "simulated storage", sim_only);
  if (ImGui::CollapsingHeader("Measured only (actsim missed it)", ImGuiTreeNodeFlags_DefaultOpen))
    grouped_table("##measured only", "deepest user frame", measured_only);
  if (ImGui::CollapsingHeader("Matched (same rounded size; the frame names the op where it can)"))
    grouped_table("##matched", "simulated storage  <->  measured frame", matched);
}

}  // namespace

void compare_view(const AppState& st, ViewState& view) {
  const float fh = ImGui::GetFontSize();
  std::vector<CompareRow> rows = compare_rows(st);
  ImGui::SetNextItemWidth(20 * fh);
  ImGui::InputText("##csv path", &view.csv_path);
  ImGui::SameLine();
  if (ImGui::Button("Export CSV")) {
    const std::string err = write_file(view.csv_path, compare_csv(st));
    view.message = err.empty() ? "wrote " + view.csv_path : "error: " + err;
  }
  if (rows.empty()) {
    ImGui::TextDisabled("no simulation yet (see the errors on the left)");
    return;
  }
  table(st, rows);
  ImGui::Spacing();
  const bool pipeline = is_pipeline(st.inputs.setup);  // gui_pp: stages need the room
  if (st.overlay || pipeline) {
    // The snapshot's lists need the room: the bars stay above them at their natural height.
    ImGui::BeginChild("##compare scroll", ImVec2(0, 0), false);
    breakdown_bars(st, rows);
    stage_tables(st, rows);  // gui_pp
    if (st.overlay) snapshot_section(st);
    ImGui::EndChild();
  } else {
    breakdown_bars(st, rows);
  }
}

}  // namespace gui
