// The implementation table: every code base's row, and the resolution of a setup's defaults.
#include <array>
#include <string>

#include "rows.hpp"
#include "sim/error.hpp"
#include "../model_moe.hpp"

namespace sim {
namespace {

const std::array<ImplSpec, 4>& table() {
  // --impl's listing order. A fifth code base: its row file and one entry here.
  static const std::array<ImplSpec, 4> rows{impl_rows::hf(), impl_rows::torchtitan(),
                                            impl_rows::megatron(), impl_rows::nanogpt()};
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

std::optional<Impl> parse_impl(std::string_view s) {
  for (const ImplSpec& r : table())
    if (r.name == s) return r.id;
  return std::nullopt;
}

std::string impl_names() {
  std::string out;
  for (const ImplSpec& r : table()) out += (out.empty() ? "" : ", ") + std::string(r.name);
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
  const ImplSpec& sp = spec(*s.impl);
  if (!supports_family(sp, model.family))
    throw Unsupported("--impl", "impl",
                      "the " + model.family + " family under --impl " + std::string(sp.name) +
                          " (" + std::string(sp.code) + " runs: " + std::string(sp.families) +
                          ")");
  // implhf: the head the config's architectures names
  {
    const ImplSpec probe{.families = sp.heads};
    if (!supports_family(probe, head_name(model.head)))
      throw Unsupported("--impl", "impl",
                        "the " + std::string(head_name(model.head)) + " head (architectures) under "
                        "--impl " + std::string(sp.name) + " (" + std::string(sp.code) +
                            " trains: " + std::string(sp.heads) + ")");
  }
  if (s.tp > 1 && !sp.tensor_parallel)
    throw Unsupported("--tp", "tp",
                      "tensor parallelism under --impl " + std::string(sp.name) +
                          " (only megatron has it)");
  if ((s.pp > 1 || s.vpp > 1) && !sp.pipeline)
    throw Unsupported("--pp", "pp",
                      "pipeline parallelism under --impl " + std::string(sp.name) +
                          " (only megatron has it)");
  detail::check_moe_setup(model, s, &sp);  // moe: sim/src/setup_moe.cpp
  if (!s.precision) s.precision = sp.precision;
  // famenc: a family whose modeling code has no SDPA path (T5Attention) runs eager attention
  if (!model.sdpa) {
    if (s.attention && *s.attention == AttentionKind::kFlash)
      throw Unsupported("--attention", "attention",
                        "flash (SDPA) attention for " + model.family + " under --impl " +
                            std::string(sp.name) + " (its attention is eager only)");
    s.attention = AttentionKind::kStandard;
  }
  if (!s.attention) s.attention = sp.attention;
  if (!s.dropout && sp.dropout == DropoutDefault::kZero) s.dropout = 0.0;
  impl_rows::resolve_lora(model, sp, s);  // feat: LoRA / QLoRA
  if (s.fp8 != Fp8Recipe::kOff) {  // feat: --fp8, one precision regime per recipe
    const bool te = s.fp8 == Fp8Recipe::kTeDelayed || s.fp8 == Fp8Recipe::kTeCurrent;
    if (te ? !sp.fp8_te : !sp.fp8_torchao)
      throw Unsupported("--fp8", "fp8",
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
    throw Unsupported("--cp", "cp",
                      "context parallelism under --impl " + std::string(sp.name) +
                          " (megatron and torchtitan have it)");
  if (s.padding) {  // hfimpl (issue 10)
    if (!sp.model_masks)
      throw Unsupported("--padding", "padding",
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
  return s;
}

}  // namespace sim
