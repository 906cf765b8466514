// The implementation table: every code base's row, and the resolution of a setup's defaults.
#include <array>
#include <utility>
#include <string>

#include "rows.hpp"
#include "sim/error.hpp"
#include "../model_moe.hpp"

namespace sim {
namespace {

const std::array<ImplSpec, 6>& table() {
  // --impl's listing order. A fifth code base: its row file and one entry here.
  // implver: a code base's releases follow its default row (--impl NAME@KEY).
  static const std::array<ImplSpec, 6> rows{
      impl_rows::hf(),       impl_rows::hf_v4_16(), impl_rows::torchtitan(),
      impl_rows::torchtitan_9dec370(), impl_rows::megatron(), impl_rows::nanogpt()};
  return rows;
}

}  // namespace

std::span<const ImplSpec> implementations() { return table(); }

const ImplSpec& spec(Impl impl) {
  for (const ImplSpec& s : table())
    if (s.id == impl) return s;
  throw std::logic_error("no ImplSpec row for an Impl value");
}

std::string_view name(Impl impl) { return spec(impl).name; }

// --- implver: releases ---
const ImplSpec& spec(Impl impl, std::string_view version) {
  if (version.empty()) return spec(impl);
  for (const ImplSpec& s : table())
    if (s.id == impl && s.version_key == version) return s;
  throw std::logic_error("no ImplSpec row for a release of an Impl value");
}

std::string impl_versions(Impl impl) {
  std::string out;
  for (const ImplSpec& r : table())
    if (r.id == impl)
      out += (out.empty() ? std::string(r.version_key) + " (default)"
                          : ", " + std::string(r.version_key));
  return out;
}

std::optional<ImplChoice> parse_impl_choice(std::string_view s, std::string* version_error) {
  const auto at = s.find('@');
  const std::optional<Impl> impl = parse_impl(s.substr(0, at));
  if (!impl) return std::nullopt;
  if (at == std::string_view::npos) return ImplChoice{*impl, {}};
  const std::string_view want = s.substr(at + 1);
  for (const ImplSpec& r : table())
    if (r.id == *impl && r.version_key == want) return ImplChoice{*impl, r.version_key};
  if (version_error)
    *version_error = "'" + std::string(want) + "' is not a release of " + std::string(name(*impl)) +
                     " modeled here: " + impl_versions(*impl);
  return std::nullopt;
}
std::string release_name(const ImplSpec& s, std::string_view family) {
  std::string_view rest = s.family_sources;
  while (!rest.empty()) {
    const auto sp = rest.find(' ');
    const std::string_view item = rest.substr(0, sp);
    const auto eq = item.find('=');
    if (eq != std::string_view::npos && item.substr(0, eq) == family)
      return std::string(s.version) + ": " + std::string(item.substr(eq + 1));
    if (sp == std::string_view::npos) break;
    rest.remove_prefix(sp + 1);
  }
  return std::string(s.version);
}
// --- end implver ---

std::optional<Impl> parse_impl(std::string_view s) {
  for (const ImplSpec& r : table())
    if (r.name == s) return r.id;
  return std::nullopt;
}

std::string impl_names() {
  std::string out;
  for (const ImplSpec& r : table())
    if (&spec(r.id) == &r)  // implver: each code base once (its default row)
      out += (out.empty() ? "" : ", ") + std::string(r.name);
  return out;
}

bool supports_family(const ImplSpec& s, std::string_view family) {
  std::string_view rest = s.families;
  while (!rest.empty()) {
    const auto sp = rest.find(' ');
    if (rest.substr(0, sp) == family) return true;
    if (sp == std::string_view::npos) break;
    rest.remove_prefix(sp + 1);
  }
  return false;
}

Impl default_impl(const ModelConfig& model, const TrainSetup& setup) {
  if (model.family == "megatron-gpt" || setup.tp > 1 || setup.pp > 1 || setup.vpp > 1 ||
      setup.cp > 1)  // feat: --cp
    return Impl::kMegatron;
  return Impl::kHf;
}

TrainSetup resolve_setup(const ModelConfig& model, const TrainSetup& in) {
  TrainSetup s = in;
  // famenc: ViT's sequence is its token count; T5's decoder length defaults to the encoder's
  if (is_vision(model) && s.seq_default) s.seq = model.max_positions;
  if (model.decoder_layers > 0 && !s.target_seq) s.target_seq = s.seq;
  if (s.profile == Profile::kPaper) {
    // Korthikanti et al.'s closed form is no code base's op list.
    if (s.impl)
      throw ConfigError("--impl", "impl",
                        "the paper profile is Korthikanti et al.'s closed form; --impl applies to "
                        "the pytorch profile");
    if (!s.attention) s.attention = AttentionKind::kStandard;
    if (s.cp > 1)  // feat
      throw ConfigError("--cp", "cp",
                        "the paper profile has no context parallelism; --cp applies to the "
                        "pytorch profile");
    if (s.lora_rank > 0 || s.qlora)  // feat
      throw ConfigError("--lora-rank", "lora_rank",
                        "the paper profile is full training; LoRA applies to the pytorch profile");
    if (s.padding)  // hfimpl
      throw ConfigError("--padding", "padding",
                        "the paper profile has no padding mask; --padding applies to --impl hf");
    if (s.reentrant && !*s.reentrant)
      throw ConfigError("--reentrant", "reentrant",
                        "the paper profile recomputes as Megatron does, reentrant");
    detail::check_moe_setup(model, s, nullptr);  // moe
    return s;
  }
  if (!s.impl) s.impl = default_impl(model, s);
  const ImplSpec& sp = spec(*s.impl, s.impl_version);
  s.impl_version = sp.version_key;  // implver: the release made explicit
  if (!supports_family(sp, model.family))
    throw Unsupported("--impl", "impl",
                      "the " + model.family + " family under --impl " + std::string(sp.name) +
                          " (" + std::string(sp.code) + " runs: " + std::string(sp.families) +
                          ")");
  // implhf: the head the config's architectures names
  {
    ImplSpec probe;
    probe.families = sp.heads;
    if (!supports_family(probe, head_name(model.head)))
      throw Unsupported("--impl", "impl",
                        "the " + std::string(head_name(model.head)) + " head (architectures) under "
                        "--impl " + std::string(sp.name) + " (" + std::string(sp.code) +
                            " trains: " + std::string(sp.heads) + ")");
  }
  if (s.tp > 1 && !sp.tensor_parallel)
    throw NotInCode("--tp", "tp",
                    "tensor parallelism under --impl " + std::string(sp.name) +
                        " (only megatron has it)");
  if ((s.pp > 1 || s.vpp > 1) && !sp.pipeline)
    throw NotInCode("--pp", "pp",
                    "pipeline parallelism under --impl " + std::string(sp.name) +
                        " (only megatron has it)");
  detail::check_moe_setup(model, s, &sp);  // moe: sim/src/setup_moe.cpp
  if (!s.precision) s.precision = resolved_precision(s);  // hfds: sp.dp_precision under --dp
  // --- hfds (issue 10): deepspeed-bf16 is the regime of a code base launched with DeepSpeed
  // (ImplSpec::dp_precision); there, autocast over fp32 weights has no ZeRO path: accelerate
  // (accelerator.py @ v1.2.1, Accelerator.__init__) sets native_amp only when the distributed
  // type is not DEEPSPEED, and DeepSpeed v0.16.2's config has no torch autocast section.
  if (*s.precision == Precision::kDeepspeedBf16 && sp.dp_precision != Precision::kDeepspeedBf16)
    throw NotInCode("--precision", "precision",
                    "deepspeed-bf16 under --impl " + std::string(sp.name) +
                        " (it is HF's Trainer with DeepSpeed: --impl hf)");
  if (sp.dp_precision == Precision::kDeepspeedBf16 && s.zero >= 1 && s.dp > 1 &&
      (*s.precision == Precision::kBf16Amp || *s.precision == Precision::kFp16Amp))
    throw ConfigError("--precision", "precision",
                      std::string(name(*s.precision)) + " under --zero " + std::to_string(s.zero) +
                          ": HF's Trainer with DeepSpeed runs no autocast (accelerate turns it off "
                          "under DeepSpeed); its bf16 regime is deepspeed-bf16 (leave "
                          "--precision out)");
  // --- end hfds ---
  // --- ds3 (issue 10): the --ds-* knobs size DeepSpeed's buffers, so they need DeepSpeed
  // (deepspeed-bf16 at --dp > 1) and, but for the reduce bucket, stage 3
  {
    const bool ds = *s.precision == Precision::kDeepspeedBf16 && s.dp * s.cp > 1;
    const std::pair<int64_t, const char*> z3[] = {
        {s.ds_prefetch_bucket, "--ds-prefetch-bucket"},
        {s.ds_persistence_threshold, "--ds-persistence-threshold"},
        {s.ds_max_live, "--ds-max-live"},
        {s.ds_max_reuse_distance, "--ds-max-reuse-distance"}};
    for (const auto& [v, flag] : z3)
      if (v >= 0 && (!ds || s.zero < 3))
        throw ConfigError(flag, flag + 2,
                          "a DeepSpeed ZeRO-3 setting: needs --zero 3 under deepspeed-bf16 "
                          "(--impl hf --dp > 1)");
    if (s.ds_reduce_bucket >= 0 && (!ds || s.zero < 1))
      throw ConfigError("--ds-reduce-bucket", "ds-reduce-bucket",
                        "a DeepSpeed ZeRO setting: needs --zero 1-3 under deepspeed-bf16 "
                        "(--impl hf --dp > 1)");
  }
  // --- end ds3 ---
  // feat3: FSDP2 shards whenever there are data-parallel ranks (torchtitan's apply_fsdp runs
  // whenever dp_shard > 1): without --zero, fsdp2-bf16 means ZeRO 3 (run prints a note)
  if (s.zero_default && s.zero == 0 && *s.precision == Precision::kFsdp2Bf16 && s.dp * s.cp > 1)
    s.zero = 3;
  // famenc: a family whose modeling code has no SDPA path (T5Attention) runs eager attention
  if (!model.sdpa) {
    if (s.attention && *s.attention == AttentionKind::kFlash)
      throw NotInCode("--attention", "attention",
                      "flash (SDPA) attention for " + model.family + " under --impl " +
                          std::string(sp.name) + " (its attention is eager only)");
    s.attention = AttentionKind::kStandard;
  }
  // tece (issue 10): the local spec's core attention is Megatron's own (unfused) DotProductAttention
  if (!s.attention && s.local_spec && sp.local_spec) s.attention = AttentionKind::kStandard;
  if (!s.attention) s.attention = sp.attention;
  if (!s.dropout && sp.dropout == DropoutDefault::kZero) s.dropout = 0.0;
  // implver: the release's optimizer (ImplSpec::optimizer, its eager-path default under
  // --attention standard) when --optimizer is not given
  if (!s.optimizer) s.optimizer = resolved_optimizer(s);
  if (!s.set_to_none) s.set_to_none = resolved_set_to_none(s);  // exec10: the release's
  impl_rows::resolve_lora(model, sp, s);  // feat: LoRA / QLoRA
  if (s.fp8 != Fp8Recipe::kOff) {  // feat: --fp8, one precision regime per recipe
    const bool te = s.fp8 == Fp8Recipe::kTeDelayed || s.fp8 == Fp8Recipe::kTeCurrent;
    if (te ? !sp.fp8_te : !sp.fp8_torchao)
      throw NotInCode("--fp8", "fp8",
                      std::string(name(s.fp8)) + " under --impl " + std::string(sp.name) +
                          (te ? " (Transformer Engine's recipes run under megatron)"
                              : " (torchao's Float8Linear runs under torchtitan)"));
    const Precision want = te ? Precision::kBf16Mixed : Precision::kFsdp2Bf16;
    if (*s.precision != want)
      throw ConfigError("--precision", "precision",
                        std::string(name(s.fp8)) + " runs its other ops in " +
                            std::string(name(want)) + ", not " + std::string(name(*s.precision)));
  }
  if (s.cp > 1 && !sp.context_parallel)  // feat: --cp
    throw NotInCode("--cp", "cp",
                    "context parallelism under --impl " + std::string(sp.name) +
                        " (megatron and torchtitan have it)");
  if (s.padding) {  // hfimpl (issue 10)
    if (!sp.model_masks)
      throw NotInCode("--padding", "padding",
                      "a padding mask under --impl " + std::string(sp.name) + " (" +
                          std::string(sp.code) +
                          " trains on packed sequences and takes no attention mask)");
    if (is_vision(model) || model.decoder_layers > 0)
      throw Unsupported("--padding", "padding",
                        "a padding mask for the " + model.family +
                            " family (" + (is_vision(model) ? "ViT takes no attention mask"
                                                            : "T5's masks are not modeled yet") +
                            ")");
  }
  // time5 (issue 11): --norm-kernel triton, where the release has torchtitan's Triton RMSNorm
  if (s.norm_kernel == NormKernel::kTriton) {
    if (!sp.triton_rmsnorm)
      throw NotInCode("--norm-kernel", "norm_kernel",
                      "the Triton fused RMSNorm under --impl " + std::string(sp.name) + "@" +
                          std::string(sp.version_key) +
                          " (torchtitan 9dec370's norm_type = \"fused_rmsnorm\")");
    if (model.norm != NormKind::kRmsNorm || model.norm_weight_fp32)
      throw Unsupported("--norm-kernel", "norm_kernel",
                        "the Triton fused RMSNorm for the " + model.family +
                            " family (it replaces a plain RMSNorm)");
  }
  // fp8sac (issue 10): --compile on, where the code base compiles its blocks
  if (s.compile && !sp.compile_blocks)
    throw Unsupported("--compile", "compile",
                      "torch.compile under --impl " + std::string(sp.name) +
                          " (modeled for torchtitan's per-block training.compile only)");
  // time6 (issue 11): --grad-accum-fusion off is Megatron's --no-gradient-accumulation-fusion
  if (!s.grad_accum_fusion && !sp.grad_accum_fusion_flag)  // polish: the row's data
    throw NotInCode("--grad-accum-fusion", "grad_accum_fusion",
                    "off under --impl " + std::string(sp.name) +
                        " (Megatron's --no-gradient-accumulation-fusion; only Megatron fuses "
                        "the weight gradient's accumulation)");
  // te_norm (issue 10): Megatron's --cross-entropy-loss-fusion
  if (s.cross_entropy_loss_fusion && !sp.ce_loss_fusion)
    throw NotInCode("--cross-entropy-loss-fusion", "cross_entropy_loss_fusion",
                    "on under --impl " + std::string(sp.name) +
                        " (Megatron's --cross-entropy-loss-fusion; this code base computes its "
                        "own loss)");
  // time7 (issue 11): --deterministic on is Megatron's --deterministic-mode (the fill it times
  // falls on Transformer Engine's allocations: graph_builder.cpp)
  if (s.deterministic && !sp.deterministic_mode)  // polish: the row's data
    throw NotInCode("--deterministic", "deterministic",
                    "on under --impl " + std::string(sp.name) +
                        " (Megatron's --deterministic-mode; its NaN fill of new tensors is "
                        "timed on Transformer Engine's outputs only)");
  // --- tece (issue 10): --transformer-impl local, Megatron's get_gpt_layer_local_spec
  // (gpt_layer_specs.py @ d98e8a64dd): no Transformer Engine module in the layer ---
  if (s.local_spec) {
    if (!sp.local_spec)  // polish: the row's data
      throw NotInCode("--transformer-impl", "transformer_impl",
                      "local under --impl " + std::string(sp.name) +
                          " (Megatron's --transformer-impl)");
    if (*s.attention == AttentionKind::kFlash)
      throw NotInCode("--attention", "attention",
                      "flash attention under --transformer-impl local (the local spec's core "
                      "attention is Megatron's unfused DotProductAttention)");
    if (s.fp8 != Fp8Recipe::kOff)
      throw NotInCode("--fp8", "fp8",
                      "FP8 under --transformer-impl local (Transformer Engine's recipes run in "
                      "its own layers)");
    if (s.cp > 1)
      throw NotInCode("--cp", "cp",
                      "context parallelism under --transformer-impl local (the ring is Transformer "
                      "Engine's attention)");
    if (model.norm == NormKind::kRmsNorm && s.sp && s.tp > 1)
      throw NotInCode("--sp", "sp",
                      "sequence parallelism with RMSNorm under --transformer-impl local "
                      "(transformer/torch_norm.py WrappedTorchNorm asserts not sequence_parallel)");
    if (model.experts > 0 || is_mla(model))
      throw Unsupported("--transformer-impl", "transformer_impl",
                        "local for the " + model.family +
                            " family (the local spec's MoE and MLA layers are not modeled)");
  }
  // --- end tece ---
  return s;
}

}  // namespace sim
