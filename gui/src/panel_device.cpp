// The device panel: a preset from models/devices/, or a custom device (any edited field).
#include <string>

#include <imgui.h>

#include "gui_plot/format.hpp"
#include "panels.hpp"
#include "sim/error.hpp"
#include "sim_io/load.hpp"
#include "widgets.hpp"

namespace gui {

bool device_panel(AppState& st) {
  bool changed = false;
  sim::Device& d = st.inputs.device;
  form_label("preset");
  if (ImGui::BeginCombo("##device preset", st.inputs.device_label.c_str())) {
    for (const std::string& name : st.catalog.devices) {
      if (!ImGui::Selectable(name.c_str(), name == st.inputs.device_label)) continue;
      try {
        d = sim_io::load_device(name, st.catalog.dirs);
        st.inputs.device_label = name;
        changed = true;
      } catch (const sim::ConfigError& e) {
        st.view.message = std::string("error: ") + e.what();
      }
    }
    ImGui::EndCombo();
  }
  if (!d.label.empty()) ImGui::TextDisabled("%s", d.label.c_str());
  ImGui::SameLine();
  ImGui::TextDisabled("%s HBM", gui_plot::human_bytes(d.hbm_bytes).c_str());
  // The figures fold away: presets are what most people want, and the strategies panel below
  // should stay in view.
  if (!ImGui::TreeNode("figures (edit for a custom device)")) return changed;
  bool edited = false;
  edited |= edit_bytes("HBM", d.hbm_bytes, true);
  edited |= edit_bytes("CUDA context", d.cuda_context_bytes, false);
  edited |= edit_bytes("NCCL buffers", d.nccl_buffer_bytes, false);
  edited |= edit_bytes("cuBLAS workspace", d.cublas_workspace_bytes, false);
  edited |= edit_int("SM arch (x10)", d.sm_arch, 10, 200);
  edited |= edit_real("bf16 peak", d.peak_bf16_flops_per_s, 1e9, 1e18, "%.0f TFLOP/s", 1e-12);
  edited |= edit_real("tf32 peak", d.peak_tf32_flops_per_s, 1e9, 1e18, "%.0f TFLOP/s", 1e-12);
  edited |= edit_real("fp32 peak", d.peak_fp32_flops_per_s, 1e9, 1e18, "%.1f TFLOP/s", 1e-12);
  edited |= edit_real("HBM bandwidth", d.hbm_bytes_per_s, 1e9, 1e15, "%.2f TB/s", 1e-12);
  edited |= edit_real("host link", d.host_link_bytes_per_s, 1e6, 1e15, "%.1f GB/s", 1e-9);
  edited |= edit_real("NVLink", d.nvlink_bytes_per_s, 1e6, 1e15, "%.1f GB/s", 1e-9);
  edited |= edit_real("compute eff.", d.compute_efficiency, 0.01, 1, "%.3f");
  edited |= edit_real("memory eff.", d.memory_efficiency, 0.01, 1, "%.3f");
  edited |= edit_i64("launch (ns)", d.launch_overhead_ns, 0, 1'000'000'000, 500);
  ImGui::TreePop();
  if (edited) {
    st.inputs.device_label = "custom";
    d.name = "custom";
    d.label = "custom device";
  }
  return changed || edited;
}

}  // namespace gui
