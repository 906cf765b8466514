// The strategies panel: several strategies at once, each with its kind, parameter and colour.
#include <array>
#include <charconv>
#include <string>

#include <imgui.h>
#include <imgui_stdlib.h>

#include "colors.hpp"
#include "panels.hpp"

namespace gui {
namespace {

// The kinds offered (every strategy sim::parse_strategy takes), as spec prefixes; a trailing ':'
// takes the integer parameter k, except budget: and custom:, whose specs are edited as text.
constexpr std::array<std::string_view, 13> kKinds{
    "none",   "full",           "every:",     "block:",  "sqrt",         "selective", "sac:mm",
    "sac:torchtitan", "layer-sac:", "offload", "offload+full", "budget:",   "custom:"};

bool text_kind(std::string_view k) { return k == "custom:" || k == "budget:"; }

int kind_of(const std::string& spec) {
  for (int i = 0; i < static_cast<int>(kKinds.size()); ++i) {
    const std::string_view k = kKinds[i];
    if (k.back() == ':' ? spec.rfind(k, 0) == 0 : spec == k) return i;
  }
  return static_cast<int>(kKinds.size()) - 1;  // anything else is edited as text
}

int64_t param_of(const std::string& spec) {
  const size_t colon = spec.find(':');
  int64_t k = 1;
  if (colon != std::string::npos)
    std::from_chars(spec.data() + colon + 1, spec.data() + spec.size(), k);
  return k;
}

const char* kind_label(std::string_view k) {
  if (k == "every:") return "every:k";
  if (k == "block:") return "block:k";
  if (k == "layer-sac:") return "layer-sac:k";
  if (k == "budget:") return "budget";
  if (k == "custom:") return "custom";
  return k.data();
}

// One entry's row; returns true when its spec changed. Sets `remove` when its button is pressed.
bool entry_row(StrategyEntry& e, int index, bool focused, bool& remove, bool& focus) {
  bool changed = false;
  const float fh = ImGui::GetFontSize();
  ImGui::PushID(index);
  ImGui::ColorEdit3("##color", e.color.data(),
                    ImGuiColorEditFlags_NoInputs | ImGuiColorEditFlags_NoLabel);
  ImGui::SameLine();
  if (ImGui::RadioButton("##focus", focused)) focus = true;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("focus: shades phases and stacks categories");
  ImGui::SameLine();
  const int kind = kind_of(e.spec);
  ImGui::SetNextItemWidth(7.5f * fh);
  if (ImGui::BeginCombo("##kind", kind_label(kKinds[kind]))) {
    for (int i = 0; i < static_cast<int>(kKinds.size()); ++i) {
      if (!ImGui::Selectable(kind_label(kKinds[i]), i == kind) || i == kind) continue;
      const std::string_view k = kKinds[i];
      e.spec = k == "custom:"   ? "custom:none@0-1+full@2-3"
               : k == "budget:" ? "budget:40GiB"
               : k.back() == ':' ? std::string(k) + (k == "layer-sac:" ? "2" : "4")
                                 : std::string(k);
      changed = true;
    }
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  const std::string_view k = kKinds[kind];
  const float remove_w = ImGui::GetFrameHeight();
  if (k == "every:" || k == "block:" || k == "layer-sac:") {
    int64_t p = param_of(e.spec);
    const int64_t step = 1;
    ImGui::SetNextItemWidth(-remove_w - ImGui::GetStyle().ItemSpacing.x);
    if (ImGui::InputScalar("##k", ImGuiDataType_S64, &p, &step, nullptr, "k = %lld")) {
      e.spec = std::string(k) + std::to_string(p < 0 ? 0 : p);
      changed = true;
    }
    ImGui::SameLine();
  } else if (text_kind(k)) {
    ImGui::SetNextItemWidth(-remove_w - ImGui::GetStyle().ItemSpacing.x);
    changed |= ImGui::InputText("##spec", &e.spec);
    ImGui::SameLine();
  } else {
    ImGui::Dummy(ImVec2(std::max(0.0f, ImGui::GetContentRegionAvail().x - remove_w -
                                           ImGui::GetStyle().ItemSpacing.x), 1));
    ImGui::SameLine();
  }
  if (ImGui::Button("x", ImVec2(remove_w, 0))) remove = true;
  if (!e.error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(255, 120, 120, 255));
    ImGui::TextWrapped("%s", e.error.c_str());
    ImGui::PopStyleColor();
  }
  ImGui::PopID();
  return changed;
}

}  // namespace

bool strategies_panel(AppState& st) {
  bool changed = false;
  auto& list = st.inputs.strategies;
  for (int i = 0; i < static_cast<int>(list.size()); ++i) {
    bool remove = false, focus = false;
    changed |= entry_row(list[i], i, i == st.view.focused, remove, focus);
    if (focus) st.view.focused = i;
    if (remove) {
      list.erase(list.begin() + i);
      if (st.view.focused >= i && st.view.focused > 0) --st.view.focused;
      changed = true;
      break;
    }
  }
  if (ImGui::Button("+ add strategy")) {
    // The first of these not yet listed, so each click adds something new to compare.
    std::string spec = "every:2";
    for (const char* s : {"none", "full", "selective", "sqrt", "every:4", "sac:mm", "every:2"}) {
      bool present = false;
      for (const StrategyEntry& e : list) present |= e.spec == s;
      if (!present) {
        spec = s;
        break;
      }
    }
    StrategyEntry e;
    e.spec = spec;
    e.color = default_strategy_color(static_cast<int>(list.size()));
    list.push_back(std::move(e));
    changed = true;
  }
  return changed;
}

}  // namespace gui
