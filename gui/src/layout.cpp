// The window's layout: config panels in a scrolling column on the left; on the right a status
// line and one tab per view. The only place that bumps the inputs' revision.
#include <string>
#include <utility>

#include <imgui.h>

#include "gui_plot/format.hpp"
#include "panels.hpp"
#include "sim/error.hpp"
#include "sim/impl.hpp"
#include "sim/setup.hpp"

namespace gui {
namespace {

void status_line(const AppState& st) {
  // The set-up with the implementation's defaults made explicit (as the CLI prints it), resolved
  // once per edit (apply_edits); as edited when it does not resolve (the graph error says why).
  const sim::TrainSetup& s =
      st.resolved_revision == st.revision ? st.resolved_setup : st.inputs.setup;
  const std::string impl =
      s.impl ? std::string(sim::name(*s.impl)) +
                   (s.impl_version.empty() ? std::string()  // not resolved: the error says why
                                           : "@" + std::string(s.impl_version)) +
                   ", "  // implver
             : std::string();
  // census12 (issue 12): the decoder length (T5) and issue 13's features, as `run`'s setup line
  const std::string tseq = s.target_seq && st.inputs.model.decoder_layers > 0
                               ? ", target-seq " + std::to_string(*s.target_seq)
                               : std::string();
  std::string extra;
  if (s.pp > 1) extra += ", pp " + std::to_string(s.pp);  // gui_pp
  if (s.vpp > 1) extra += ", vpp " + std::to_string(s.vpp);
  if (s.microbatches > 1) extra += ", " + std::to_string(s.microbatches) + " micro-batches";
  if (s.cp > 1) extra += ", cp " + std::to_string(s.cp);
  if (s.ep > 1) extra += ", ep " + std::to_string(s.ep);
  if (s.etp > 0) extra += ", etp " + std::to_string(s.etp);  // etp (issue 13)
  if (s.fp8 != sim::Fp8Recipe::kOff) extra += ", fp8 " + std::string(sim::name(s.fp8));
  if (s.norm_kernel != sim::NormKernel::kDefault)  // polish: as `run`'s set-up line says it
    extra += ", norm kernel " + std::string(sim::name(s.norm_kernel));
  if (s.compile) extra += ", torch.compile";
  if (!s.grad_accum_fusion) extra += ", no grad-accum fusion";
  if (s.cross_entropy_loss_fusion) extra += ", fused cross entropy";  // te_norm (issue 10)
  if (s.moe_shared_expert_overlap) extra += ", shared experts overlapped";  // moetp (issue 13)
  // ds3b (issue 10): the DeepSpeed knobs set (elements), as the --ds-* flags name them
  for (auto [v, name] : {std::pair{s.ds_reduce_bucket, "ds-reduce-bucket"},
                         std::pair{s.ds_prefetch_bucket, "ds-prefetch-bucket"},
                         std::pair{s.ds_persistence_threshold, "ds-persistence-threshold"},
                         std::pair{s.ds_max_live, "ds-max-live"},
                         std::pair{s.ds_max_reuse_distance, "ds-max-reuse-distance"}})
    if (v >= 0) extra += ", " + std::string(name) + " " + std::to_string(v);
  if (s.local_spec) extra += ", local layer spec";  // tece (issue 10)
  if (s.deterministic) extra += ", deterministic mode";  // polish: time7's --deterministic
  if (s.padding) extra += ", padding mask";              // polish: hfimpl's --padding
  if (s.lora_rank > 0)
    extra += ", LoRA rank " + std::to_string(s.lora_rank) +
             (s.lora_targets != 0 ? " on " + sim::lora_targets_name(s.lora_targets) : std::string()) +
             (s.qlora ? ", QLoRA (NF4 base)" : "") +
             (s.lora_dropout > 0.0  // feat13: PEFT's lora_dropout
                  ? ", lora_dropout " + std::to_string(s.lora_dropout).substr(0, 4)
                  : std::string());
  ImGui::Text("%s on %s:  micro-batch %lld, seq %lld%s, tp %lld%s, dp %lld, ZeRO %d, %s%s, %s%s",
              st.inputs.model_label.c_str(), st.inputs.device_label.c_str(),
              static_cast<long long>(s.micro_batch), static_cast<long long>(s.seq), tseq.c_str(),
              static_cast<long long>(s.tp), s.sp ? " + sp" : "", static_cast<long long>(s.dp),
              s.zero, impl.c_str(), std::string(sim::name(s.profile)).c_str(),
              std::string(sim::name(sim::resolved_precision(s))).c_str(), extra.c_str());
  if (!st.graph_error.empty()) {
    ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", st.graph_error.c_str());
  } else {
    double sim_ms = 0;
    for (const Run& r : st.runs)
      if (r.data) sim_ms += r.data->simulate_ms;
    ImGui::TextDisabled("%zu strategies simulated in %.1f ms%s", st.runs.size(), sim_ms,
                        st.stats.pending > 0 ? " (more next frame)" : "");
  }
  if (!st.view.message.empty()) {
    ImGui::SameLine(0, ImGui::GetFontSize() * 2);
    const bool error = st.view.message.rfind("error", 0) == 0;
    ImGui::TextColored(error ? ImVec4(1, 0.45f, 0.45f, 1) : ImVec4(0.6f, 0.9f, 0.6f, 1), "%s",
                       st.view.message.c_str());
  }
}

void views(AppState& st) {
  ViewState& view = st.view;
  if (!ImGui::BeginTabBar("views")) return;
  constexpr const char* kTitles[] = {"Valley", "Memory over the step", "Op timeline", "Fit map",
                                     "Comparison"};
  for (int i = 0; i < static_cast<int>(View::kCount); ++i) {
    const View v = static_cast<View>(i);
    const ImGuiTabItemFlags flags =
        view.select_active && v == view.active ? ImGuiTabItemFlags_SetSelected : 0;
    if (!ImGui::BeginTabItem(kTitles[i], nullptr, flags)) continue;
    if (!view.select_active) view.active = v;
    switch (v) {
      case View::kValley: valley_view(st, view); break;
      case View::kMemory: memory_view(st, view); break;
      case View::kTimeline: timeline_view(st, view); break;
      case View::kFitMap: fitmap_view(st, view); break;
      case View::kCompare: compare_view(st, view); break;
      case View::kCount: break;
    }
    ImGui::EndTabItem();
  }
  view.select_active = false;
  ImGui::EndTabBar();
}

}  // namespace

void draw_app(AppState& st) {
  const ImGuiIO& io = ImGui::GetIO();
  const float fh = ImGui::GetFontSize();
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(io.DisplaySize);
  constexpr ImGuiWindowFlags kMain = ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                                     ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoSavedSettings |
                                     ImGuiWindowFlags_NoBringToFrontOnFocus;
  ImGui::Begin("actsim", nullptr, kMain);
  bool changed = false;
  ImGui::BeginChild("config", ImVec2(25 * fh, 0), true);
  ImGui::Text("actsim");
  ImGui::SameLine();
  ImGui::TextDisabled("activation memory of one training step");
  ImGui::SetNextItemOpen(true, ImGuiCond_Once);
  if (ImGui::CollapsingHeader("Model")) changed |= model_panel(st);
  ImGui::SetNextItemOpen(true, ImGuiCond_Once);
  if (ImGui::CollapsingHeader("Training setup")) changed |= setup_panel(st);
  ImGui::SetNextItemOpen(true, ImGuiCond_Once);
  if (ImGui::CollapsingHeader("Device")) changed |= device_panel(st);
  ImGui::SetNextItemOpen(true, ImGuiCond_Once);
  if (ImGui::CollapsingHeader("Strategies")) changed |= strategies_panel(st);
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("views", ImVec2(0, 0), false);
  status_line(st);
  ImGui::SameLine(ImGui::GetContentRegionAvail().x - 6 * fh);
  if (ImGui::Button("Save PNG")) st.view.png_requested = true;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("saves this window to %s", st.view.png_path.c_str());
  views(st);
  ImGui::EndChild();
  ImGui::End();
  if (changed) ++st.revision;
}

}  // namespace gui
