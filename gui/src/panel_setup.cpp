// The training set-up panel: every knob of sim::TrainSetup.
#include <array>
#include <span>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <imgui.h>

#include "impl_fields.hpp"
#include "panels.hpp"
#include "sim/error.hpp"
#include "sim/impl.hpp"
#include "widgets.hpp"

namespace gui {
namespace {

constexpr std::array<std::string_view, 2> kProfiles{"pytorch", "paper"};
constexpr std::array<std::string_view, 7> kPrecisions{"impl default", "bf16-mixed", "bf16-amp",
                                                      "fp16-amp",     "fp32",       "fsdp2-bf16",
                                                      "deepspeed-bf16"};  // hfds
constexpr std::array<std::string_view, 3> kAttention{"impl default", "standard", "flash"};
constexpr std::array<std::string_view, 2> kNormKernels{"default", "triton"};  // sim::NormKernel
constexpr std::array<std::string_view, 5> kOptimizers{"impl default", "adam", "adam-fused", "sgd",
                                                      "adam-loop"};  // sim::Optimizer order

// implver: "model default" and every release (sim::implementations(): NAME@VERSION)
std::span<const std::string_view> impl_choices() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v{"model default"};
    for (const sim::ImplSpec& r : sim::implementations())
      v.push_back(std::string(r.name) + "@" + std::string(r.version_key));
    return v;
  }();
  static const std::vector<std::string_view> views(names.begin(), names.end());
  return views;
}
constexpr std::array<std::string_view, 3> kAllocators{"exact", "caching", "caching-expandable"};

}  // namespace

bool setup_panel(AppState& st) {
  sim::TrainSetup& s = st.inputs.setup;
  bool changed = false;
  changed |= edit_i64("micro-batch", s.micro_batch, 1, 1 << 20);
  if (edit_i64("sequence", s.seq, 1, int64_t{1} << 24, 256)) {
    s.seq_default = false;  // famenc: the user's sequence, even for a ViT (refused unless its tokens)
    changed = true;
  }
  // census12 (issue 12): T5's decoder length (--target-seq; by default the encoder's --seq)
  if (st.inputs.model.decoder_layers > 0) {
    form_label("decoder sequence");
    bool own = s.target_seq.has_value();
    if (ImGui::Checkbox("own length##targetseq", &own)) {
      if (own) s.target_seq = s.seq;
      else s.target_seq.reset();
      changed = true;
    }
    if (s.target_seq) changed |= edit_i64("  target-seq", *s.target_seq, 1, int64_t{1} << 24, 256);
  }
  int profile = static_cast<int>(s.profile);
  if (edit_choice("profile", profile, kProfiles))
    s.profile = static_cast<sim::Profile>(profile), changed = true;
  // implver: the release chosen (the row of sim::implementations())
  const std::span<const sim::ImplSpec> rows = sim::implementations();
  int impl = 0;
  if (s.impl) {
    const sim::ImplSpec* cur = &sim::spec(*s.impl, s.impl_version);
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (&rows[i] == cur) impl = static_cast<int>(i) + 1;
  }
  if (edit_choice("implementation", impl, impl_choices())) {
    if (impl == 0) {
      s.impl.reset();
      s.impl_version = {};
    } else {
      s.impl = rows[static_cast<std::size_t>(impl - 1)].id;
      s.impl_version = rows[static_cast<std::size_t>(impl - 1)].version_key;
    }
    changed = true;
  }
  // polish: implementation-specific fields only under a code base whose ImplSpec row has their
  // setting (impl_fields.hpp); a knob set where the code base lacks it stays shown, with the
  // one-line error naming its flag, so that it can be undone in place
  const ImplFields has = impl_fields(st.inputs.model, s);
  int precision = s.precision ? 1 + static_cast<int>(*s.precision) : 0;
  if (edit_choice("precision", precision, kPrecisions)) {
    if (precision == 0) s.precision.reset();
    else s.precision = static_cast<sim::Precision>(precision - 1);
    changed = true;
  }
  int attention = s.attention ? 1 + static_cast<int>(*s.attention) : 0;
  if (edit_choice("attention", attention, kAttention)) {
    if (attention == 0) s.attention.reset();
    else s.attention = static_cast<sim::AttentionKind>(attention - 1);
    changed = true;
  }
  // polish: --norm-kernel (torchtitan's fused Triton RMSNorm where the release has it; elsewhere
  // an error naming --norm-kernel, shown like any other)
  int norm_kernel = static_cast<int>(s.norm_kernel);
  if ((has.norm_kernel || s.norm_kernel != sim::NormKernel::kDefault) &&
      edit_choice("norm kernel", norm_kernel, kNormKernels))
    s.norm_kernel = static_cast<sim::NormKernel>(norm_kernel), changed = true;
  // --compile (torchtitan's training.compile) and --grad-accum-fusion (Megatron's
  // --[no-]gradient-accumulation-fusion): where the implementation's code has no such setting
  // resolve_setup's one-line error naming the flag is shown like any other
  if (has.compile || s.compile) {
    form_label("torch.compile");
    changed |= ImGui::Checkbox("##compile", &s.compile);
  }
  if (has.grad_accum_fusion || !s.grad_accum_fusion) {
    form_label("grad-accum fusion");
    changed |= ImGui::Checkbox("##gradaccumfusion", &s.grad_accum_fusion);
  }
  // te_norm (issue 10): Megatron's --cross-entropy-loss-fusion, refused the same way elsewhere
  if (has.ce_loss_fusion || s.cross_entropy_loss_fusion) {
    form_label("fused CE loss");
    changed |= ImGui::Checkbox("##cefusion", &s.cross_entropy_loss_fusion);
  }
  // tece (issue 10): Megatron's --transformer-impl local, refused the same way elsewhere
  if (has.local_spec || s.local_spec) {
    form_label("local layer spec");
    changed |= ImGui::Checkbox("##localspec", &s.local_spec);
  }
  // time7 (issue 11): Megatron's --deterministic-mode (polish: the field was missing)
  if (has.deterministic || s.deterministic) {
    form_label("deterministic mode");
    changed |= ImGui::Checkbox("##deterministic", &s.deterministic);
  }
  form_label("dropout");
  bool override_dropout = s.dropout.has_value();
  if (ImGui::Checkbox("override##dropout", &override_dropout)) {
    if (override_dropout) s.dropout = 0.1;
    else s.dropout.reset();
    changed = true;
  }
  if (s.dropout) changed |= edit_real("  probability", *s.dropout, 0, 0.999, "%.3f");
  if (has.tensor_parallel || s.tp > 1) changed |= edit_i64("tensor parallel", s.tp, 1, 4096);
  if (has.tensor_parallel || s.sp) {
    form_label("seq. parallel");
    changed |= ImGui::Checkbox("##sp", &s.sp);
  }
  changed |= edit_i64("data parallel", s.dp, 1, 1 << 20);
  // The stage the implementation takes when none is given (fsdp2-bf16 always shards: 3, as
  // resolve_setup decides for `--zero` left out); an edit makes the stage explicit, as --zero.
  if (edit_int("ZeRO stage", s.zero, 0, 3)) s.zero_default = false, changed = true;
  // polish: the set-up as apply_edits resolved it for this revision (not resolved every frame);
  // when it does not resolve, the set-up's error is shown with the others
  if (s.zero_default && st.resolved_revision == st.revision && st.resolved_setup.zero != s.zero)
    ImGui::TextDisabled("  ZeRO %d: the implementation's default", st.resolved_setup.zero);
  // ds3b (issue 10): DeepSpeed's zero_optimization knobs (--ds-*, elements), shown only when
  // the set-up resolves to the deepspeed-bf16 regime (the HF Trainer under DeepSpeed), the
  // stage-3 ones at ZeRO 3 and the reduce bucket from ZeRO 1; each "auto" (-1: the HF
  // Trainer's "auto" value, or DeepSpeed's default) until the box is unticked. A knob set stays
  // shown wherever the set-up goes (it is then refused in one line naming it, and can be reset).
  {
    const bool ds = st.resolved_revision == st.revision &&
                    sim::resolved_precision(st.resolved_setup) == sim::Precision::kDeepspeedBf16;
    const int zero = ds ? st.resolved_setup.zero : -1;
    auto knob = [&](const char* label, const char* box, const char* edit, int64_t& v,
                    int64_t start, const char* dflt, int from_stage) {
      if (zero < from_stage && v < 0) return;
      form_label(label);
      bool dflt_on = v < 0;
      if (ImGui::Checkbox(box, &dflt_on)) {
        v = dflt_on ? -1 : start;
        changed = true;
      }
      if (dflt_on) {
        ImGui::SameLine();
        ImGui::TextDisabled("%s", dflt);
      } else {
        changed |= edit_i64(edit, v, 0, int64_t{1} << 50);
      }
    };
    knob("DS reduce bucket", "auto##dsrb", "  reduce elements", s.ds_reduce_bucket,
         500'000'000, "hidden^2", 1);
    knob("DS prefetch bucket", "auto##dspb", "  prefetch elements", s.ds_prefetch_bucket,
         50'000'000, "0.9 hidden^2", 3);
    knob("DS persistence", "auto##dspt", "  persist elements", s.ds_persistence_threshold,
         100'000, "10 hidden", 3);
    knob("DS max live", "default##dsml", "  max live elements", s.ds_max_live, 1'000'000'000,
         "1e9", 3);
    knob("DS reuse distance", "default##dsrd", "  reuse elements", s.ds_max_reuse_distance,
         1'000'000'000, "1e9", 3);
  }
  // gui_pp: pipeline parallelism (--pp, --vpp, --num-microbatches): with pp > 1 or more than one
  // micro-batch each strategy is simulated per stage (sim::simulate_pipeline), and the views show
  // one stage (bad combinations are an error naming the flag, shown like any other)
  if (has.pipeline || s.pp > 1) changed |= edit_i64("pipeline stages", s.pp, 1, 4096);
  if (has.pipeline || s.vpp > 1) changed |= edit_i64("virtual stages", s.vpp, 1, 4096);
  changed |= edit_i64("micro-batches", s.microbatches, 1, 1 << 20);
  if (s.pp > 1 || s.microbatches > 1) {
    std::vector<std::string> names{"worst (each strategy's)"};
    for (int64_t i = 0; i < s.pp; ++i) names.push_back("stage " + std::to_string(i));
    const std::vector<std::string_view> views(names.begin(), names.end());
    int shown = st.inputs.stage_shown < 0 || st.inputs.stage_shown >= s.pp
                    ? 0
                    : static_cast<int>(st.inputs.stage_shown) + 1;
    if (edit_choice("stage shown", shown, views)) {
      // Which stage the views show: the pipelines already simulated are shown again at the
      // stage (update.cpp resimulate), so this is not an edit of what is simulated.
      st.inputs.stage_shown = shown - 1;
      ++st.stage_revision;
    }
  }
  // moe: expert parallelism and routing of MoE models (--ep, --moe-imbalance, --moe-capacity;
  // a dense model with ep > 1 is an error naming --ep, shown like any other)
  // polish: shown for an MoE model under a code base with an MoE layer (the dispatcher's own
  // knobs under Megatron's all-to-all only)
  if (has.moe_dispatcher || s.ep > 1) changed |= edit_i64("expert parallel", s.ep, 1, 4096);
  if (has.moe_routing || s.moe_imbalance != 1.0)
    changed |= edit_real("MoE imbalance", s.moe_imbalance, 1.0, 4096.0, "%.2f");
  // mla5: Megatron's --moe-aux-loss-coeff (0: no load-balancing loss)
  if (has.moe_dispatcher || s.moe_aux_loss_coeff != 0.0)
    changed |= edit_real("MoE aux loss coeff", s.moe_aux_loss_coeff, 0.0, 1e6, "%.4g");
  // etp (issue 13): Megatron's --expert-tensor-parallel-size; 0: --tp (its default)
  if (has.moe_dispatcher || s.etp != 0) changed |= edit_i64("expert TP (0: tp)", s.etp, 0, 4096);
  // moetp (issue 13): Megatron's --moe-shared-expert-overlap; refused in one line elsewhere
  if (has.shared_expert_overlap || s.moe_shared_expert_overlap) {
    form_label("MoE shared overlap");
    changed |= ImGui::Checkbox("##sharedoverlap", &s.moe_shared_expert_overlap);
  }
  if (has.moe_dispatcher || s.moe_capacity) {
    form_label("MoE capacity");
    bool capacity = s.moe_capacity.has_value();
    if (ImGui::Checkbox("drop and pad##moecap", &capacity)) {
      if (capacity) s.moe_capacity = 1.25;
      else s.moe_capacity.reset();
      changed = true;
    }
    if (s.moe_capacity) changed |= edit_real("  factor", *s.moe_capacity, 0.01, 64.0, "%.2f");
  }
  int optimizer = s.optimizer ? 1 + static_cast<int>(*s.optimizer) : 0;  // implver: 0: impl's
  if (edit_choice("optimizer", optimizer, kOptimizers)) {
    if (optimizer == 0) s.optimizer.reset();
    else s.optimizer = static_cast<sim::Optimizer>(optimizer - 1);
    changed = true;
  }
  int allocator = static_cast<int>(s.allocator);
  if (edit_choice("allocator", allocator, kAllocators))
    s.allocator = static_cast<sim::AllocatorKind>(allocator), changed = true;
  // feat (issue 13): context parallelism, LoRA / QLoRA (targets: PEFT's default for the family)
  if (has.context_parallel || s.cp > 1) changed |= edit_i64("context parallel", s.cp, 1, 1 << 10);
  if (has.fp8 || s.fp8 != sim::Fp8Recipe::kOff) {
    static constexpr std::string_view kFp8[] = {"off", "te-delayed", "te-current", "torchao-tensorwise",
                                       "torchao-rowwise"};
    int fp8 = static_cast<int>(s.fp8);
    if (edit_choice("fp8 linears", fp8, kFp8)) s.fp8 = static_cast<sim::Fp8Recipe>(fp8), changed = true;
  }
  if (has.lora || s.lora_rank > 0) changed |= edit_i64("LoRA rank", s.lora_rank, 0, 1 << 16);
  if (s.lora_rank > 0) {
    form_label("QLoRA (4-bit)");
    changed |= ImGui::Checkbox("##qlora", &s.qlora);
    // feat13 (issue 13): PEFT's lora_dropout (0: nn.Identity, PEFT's default)
    changed |= edit_real("LoRA dropout", s.lora_dropout, 0.0, 0.99, "%.2f");
    // feat3: --lora-targets (0: PEFT's default for the family, resolved by resolve_setup; a
    // target naming no module is an error naming --lora-targets, shown like any other)
    form_label("LoRA targets");
    bool peft_default = s.lora_targets == 0;
    if (ImGui::Checkbox("PEFT default##loratargets", &peft_default)) {
      s.lora_targets = peft_default ? 0 : (sim::kLoraQ | sim::kLoraV);
      changed = true;
    }
    if (!peft_default) {
      // lora6: MLA's q_a, q_b, kv_a, kv_b, Phi-3's gate_up and all-linear on rows of their own
      static constexpr std::pair<const char*, uint32_t> kTargets[] = {
          {"q##lt", sim::kLoraQ},       {"k##lt", sim::kLoraK},   {"v##lt", sim::kLoraV},
          {"o##lt", sim::kLoraO},       {"gate##lt", sim::kLoraGate},
          {"up##lt", sim::kLoraUp},     {"down##lt", sim::kLoraDown},
          {"gate_up##lt", sim::kLoraGateUp}, {"q_a##lt", sim::kLoraQA},
          {"q_b##lt", sim::kLoraQB},    {"kv_a##lt", sim::kLoraKvA}, {"kv_b##lt", sim::kLoraKvB},
          {"all-linear##lt", sim::kLoraAllLinear}};
      for (size_t i = 0; i < std::size(kTargets); ++i) {
        // rows: attention; MLP; Phi-3's fused MLP; MLA's queries; MLA's latent; all-linear
        if (i == 0 || i == 4 || i == 7 || i == 8 || i == 10 || i == 12) form_label("");
        else ImGui::SameLine();
        unsigned int mask = s.lora_targets;
        if (ImGui::CheckboxFlags(kTargets[i].first, &mask, kTargets[i].second) && mask != 0) {
          // kLoraOther (the routers) belongs to all-linear alone: no name sets it
          if (mask != sim::kLoraAllLinear) mask &= ~static_cast<unsigned int>(sim::kLoraOther);
          if (mask != 0) s.lora_targets = mask, changed = true;  // an empty set stays as it was
        }
      }
    }
  } else if (s.qlora || s.lora_targets != 0 || s.lora_dropout != 0.0) {
    s.qlora = false, s.lora_targets = 0, s.lora_dropout = 0.0, changed = true;  // feat13: dropout
  }
  // hfimpl (issue 10): a padding attention mask (--padding; refused outside --impl hf, shown as
  // any other error)
  if (has.padding || s.padding) {
    form_label("padding mask");
    changed |= ImGui::Checkbox("##padding", &s.padding);
  }
  return changed;
}

}  // namespace gui
