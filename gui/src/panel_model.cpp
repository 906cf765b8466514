// The model panel: a preset from models/, a HuggingFace config.json opened by path, and every
// field of sim::ModelConfig editable.
#include <array>
#include <string>

#include <imgui.h>
#include <imgui_stdlib.h>

#include "gui_plot/format.hpp"
#include "panels.hpp"
#include "sim/error.hpp"
#include "sim_io/load.hpp"
#include "widgets.hpp"

namespace gui {
namespace {

// Loads a model by preset name or path into the inputs; errors go to the status message.
bool load_into(AppState& st, const std::string& name_or_path) {
  try {
    st.inputs.model = sim_io::load_model(name_or_path, st.catalog.dirs);
    st.inputs.model_label = name_or_path;
    // famenc: a ViT's sequence is its token count; shown as such until the user edits it
    if (sim::is_vision(st.inputs.model)) {
      st.inputs.setup.seq = st.inputs.model.max_positions;
      st.inputs.setup.seq_default = true;
    }
    st.view.valley_n = 0;
    st.view.message = "loaded model " + name_or_path;
    return true;
  } catch (const sim::ConfigError& e) {
    st.view.message = std::string("error: ") + e.what();
    return false;
  }
}

constexpr std::array<std::string_view, 4> kMlp{"gelu", "swiglu", "relu", "geglu"};  // sim::MlpKind
constexpr std::array<std::string_view, 2> kNorm{"layernorm", "rmsnorm"};
constexpr std::array<std::string_view, 3> kPositions{"learned", "rope", "relative bias"};

bool edit_fields(sim::ModelConfig& m) {
  bool changed = false;
  constexpr int64_t kBig = int64_t{1} << 40;
  changed |= edit_i64("layers", m.layers, 1, 100000);
  changed |= edit_i64("hidden", m.hidden, 1, kBig, 64);
  changed |= edit_i64("heads", m.heads, 1, 1 << 20);
  changed |= edit_i64("kv heads", m.kv_heads, 1, 1 << 20);
  changed |= edit_i64("head dim", m.head_dim, 1, 1 << 20);
  changed |= edit_i64("ffn hidden", m.ffn_hidden, 1, kBig, 64);
  changed |= edit_i64("vocab", m.vocab, 1, kBig, 64);
  changed |= edit_i64("max positions", m.max_positions, 0, kBig, 512);
  changed |= edit_i64("type vocab", m.type_vocab, 0, kBig, 0);
  int mlp = static_cast<int>(m.mlp), norm = static_cast<int>(m.norm),
      pos = static_cast<int>(m.positions);
  if (edit_choice("mlp", mlp, kMlp)) m.mlp = static_cast<sim::MlpKind>(mlp), changed = true;
  if (edit_choice("norm", norm, kNorm)) m.norm = static_cast<sim::NormKind>(norm), changed = true;
  if (edit_choice("positions", pos, kPositions))
    m.positions = static_cast<sim::PosEmbedding>(pos), changed = true;
  changed |= edit_real("attn dropout", m.attn_dropout, 0, 0.999, "%.3f");
  changed |= edit_real("hidden dropout", m.hidden_dropout, 0, 0.999, "%.3f");
  changed |= edit_real("embd dropout", m.embd_dropout, 0, 0.999, "%.3f");
  changed |= ImGui::Checkbox("causal", &m.causal);
  ImGui::SameLine();
  if (ImGui::Checkbox("post-norm", &m.post_norm)) {
    changed = true;
    // implhf: an LM head follows the blocks' kind (BERT-style post-norm: the masked-LM head)
    if (m.head == sim::Head::kCausalLm || m.head == sim::Head::kMaskedLm)
      m.head = m.post_norm ? sim::Head::kMaskedLm : sim::Head::kCausalLm;
  }
  ImGui::SameLine();
  changed |= ImGui::Checkbox("tied embeddings", &m.tied_embeddings);
  changed |= ImGui::Checkbox("qkv bias", &m.qkv_bias);
  ImGui::SameLine();
  changed |= ImGui::Checkbox("linear bias", &m.linear_bias);
  ImGui::SameLine();
  changed |= ImGui::Checkbox("norm bias", &m.norm_bias);
  return changed;
}

}  // namespace

bool model_panel(AppState& st) {
  bool changed = false;
  form_label("preset");
  if (ImGui::BeginCombo("##model preset", st.inputs.model_label.c_str())) {
    for (const std::string& name : st.catalog.models) {
      if (ImGui::Selectable(name.c_str(), name == st.inputs.model_label))
        changed |= load_into(st, name);
    }
    ImGui::EndCombo();
  }
  form_label("config.json");
  const float open_w = ImGui::CalcTextSize("Open").x + ImGui::GetStyle().FramePadding.x * 2;
  ImGui::SetNextItemWidth(-open_w - ImGui::GetStyle().ItemSpacing.x);
  const bool enter = ImGui::InputTextWithHint("##hf path", "path/to/config.json", &st.view.hf_path,
                                              ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  if ((ImGui::Button("Open") || enter) && !st.view.hf_path.empty())
    changed |= load_into(st, st.view.hf_path);

  ImGui::TextDisabled("%s", st.inputs.model.family.c_str());
  ImGui::SameLine();
  try {
    const int64_t params = sim::parameter_count(st.inputs.model);
    ImGui::TextDisabled("%s parameters", gui_plot::human_si(static_cast<double>(params), "").c_str());
  } catch (const sim::ConfigError&) {
    ImGui::TextDisabled("(invalid)");
  }
  const sim::ModelConfig& m = st.inputs.model;
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyle().Colors[ImGuiCol_TextDisabled]);
  ImGui::TextWrapped("%lld layers, h %lld, %lld/%lld heads, ffn %lld, vocab %lld",
                     static_cast<long long>(m.layers), static_cast<long long>(m.hidden),
                     static_cast<long long>(m.heads), static_cast<long long>(m.kv_heads),
                     static_cast<long long>(m.ffn_hidden), static_cast<long long>(m.vocab));
  ImGui::PopStyleColor();
  // Folded by default so that the strategies stay in view; every field is one click away.
  if (!ImGui::TreeNode("architecture (every field editable)")) return changed;
  if (edit_fields(st.inputs.model)) {
    changed = true;
    if (st.inputs.model_label.find(" (edited)") == std::string::npos)
      st.inputs.model_label += " (edited)";
  }
  ImGui::TreePop();
  return changed;
}

}  // namespace gui
