#include "widgets.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include <imgui.h>

namespace gui {

void form_label(const char* text) {
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted(text);
  ImGui::SameLine(ImGui::GetFontSize() * 9.5f);
  ImGui::SetNextItemWidth(-1);
}

bool edit_i64(const char* label, int64_t& value, int64_t min_value, int64_t max_value,
              int64_t step) {
  form_label(label);
  int64_t v = value;
  const int64_t fast = step * 8;
  const std::string id = std::string("##") + label;
  ImGui::InputScalar(id.c_str(), ImGuiDataType_S64, &v, step > 0 ? &step : nullptr,
                     step > 0 ? &fast : nullptr, "%lld");
  v = std::clamp(v, min_value, max_value);
  if (v == value) return false;
  value = v;
  return true;
}

bool edit_int(const char* label, int& value, int min_value, int max_value) {
  int64_t v = value;
  if (!edit_i64(label, v, min_value, max_value)) return false;
  value = static_cast<int>(v);
  return true;
}

bool edit_real(const char* label, double& value, double min_value, double max_value,
               const char* format, double scale) {
  form_label(label);
  double shown = value * scale;
  const std::string id = std::string("##") + label;
  if (!ImGui::InputDouble(id.c_str(), &shown, 0, 0, format)) return false;
  const double v = std::clamp(shown / scale, min_value, max_value);
  if (v == value || !std::isfinite(v)) return false;
  value = v;
  return true;
}

bool edit_bytes(const char* label, int64_t& bytes, bool gib) {
  const double unit = gib ? 1024.0 * 1024 * 1024 : 1024.0 * 1024;
  double v = static_cast<double>(bytes) / unit;
  if (!edit_real(label, v, 0, 1e9, gib ? "%.3f GiB" : "%.1f MiB")) return false;
  const auto b = static_cast<int64_t>(std::llround(v * unit));
  if (b == bytes) return false;
  bytes = b;
  return true;
}

bool edit_choice(const char* label, int& index, std::span<const std::string_view> names) {
  form_label(label);
  const std::string id = std::string("##") + label;
  const std::string current =
      index >= 0 && index < static_cast<int>(names.size()) ? std::string(names[index]) : "?";
  bool changed = false;
  if (ImGui::BeginCombo(id.c_str(), current.c_str())) {
    for (int i = 0; i < static_cast<int>(names.size()); ++i) {
      const std::string n(names[i]);
      if (ImGui::Selectable(n.c_str(), i == index) && i != index) {
        index = i;
        changed = true;
      }
    }
    ImGui::EndCombo();
  }
  return changed;
}

}  // namespace gui
