#include "sim/setup.hpp"

#include <array>
#include <string>
#include <utility>

#include "sim/error.hpp"

namespace sim {
namespace {

// One table per enum: the names the CLI, CSV and JSON use.
constexpr std::array<std::pair<Precision, std::string_view>, 6> kPrecisions{{
    {Precision::kBf16Mixed, "bf16-mixed"},
    {Precision::kBf16Amp, "bf16-amp"},
    {Precision::kFp16Amp, "fp16-amp"},
    {Precision::kFp32, "fp32"},
    {Precision::kFsdp2Bf16, "fsdp2-bf16"},
    {Precision::kDeepspeedBf16, "deepspeed-bf16"},  // hfds
}};
constexpr std::array<std::pair<AttentionKind, std::string_view>, 2> kAttentions{{
    {AttentionKind::kStandard, "standard"},
    {AttentionKind::kFlash, "flash"},
}};
constexpr std::array<std::pair<Profile, std::string_view>, 2> kProfiles{{
    {Profile::kPytorch, "pytorch"},
    {Profile::kPaper, "paper"},
}};
constexpr std::array<std::pair<Optimizer, std::string_view>, 4> kOptimizers{{
    {Optimizer::kAdamForeach, "adam"},
    {Optimizer::kAdamFused, "adam-fused"},
    {Optimizer::kSgd, "sgd"},
    {Optimizer::kAdamLoop, "adam-loop"},
}};
constexpr std::array<std::pair<AllocatorKind, std::string_view>, 3> kAllocators{{
    {AllocatorKind::kExact, "exact"},
    {AllocatorKind::kCaching, "caching"},
    {AllocatorKind::kCachingExpandable, "caching-expandable"},
}};

template <typename E, std::size_t N>
std::string_view lookup(const std::array<std::pair<E, std::string_view>, N>& table, E e) {
  for (const auto& [k, v] : table)
    if (k == e) return v;
  return "?";
}

template <typename E, std::size_t N>
std::optional<E> reverse(const std::array<std::pair<E, std::string_view>, N>& table,
                         std::string_view s) {
  for (const auto& [k, v] : table)
    if (v == s) return k;
  return std::nullopt;
}

void require(bool ok, const char* flag, const char* field, const std::string& message) {
  if (!ok) throw ConfigError(flag, field, message);
}

}  // namespace

std::string_view name(Precision p) { return lookup(kPrecisions, p); }
std::string_view name(AttentionKind a) { return lookup(kAttentions, a); }
std::string_view name(Profile p) { return lookup(kProfiles, p); }
std::string_view name(Optimizer o) { return lookup(kOptimizers, o); }
std::string_view name(AllocatorKind a) { return lookup(kAllocators, a); }
std::optional<Precision> parse_precision(std::string_view s) { return reverse(kPrecisions, s); }
std::optional<AttentionKind> parse_attention(std::string_view s) { return reverse(kAttentions, s); }
std::optional<Profile> parse_profile(std::string_view s) { return reverse(kProfiles, s); }
std::optional<Optimizer> parse_optimizer(std::string_view s) { return reverse(kOptimizers, s); }
std::optional<AllocatorKind> parse_allocator(std::string_view s) { return reverse(kAllocators, s); }

Precision resolved_precision(const TrainSetup& setup) {
  if (setup.precision) return *setup.precision;
  if (setup.impl && setup.profile != Profile::kPaper) {
    const ImplSpec& sp = spec(*setup.impl, setup.impl_version);
    // hfds: the code base's regime under data parallelism (HF: the Trainer with DeepSpeed)
    if (sp.dp_precision && setup.dp > 1) return *sp.dp_precision;
    return sp.precision;
  }
  return setup.profile == Profile::kPaper ? Precision::kBf16Mixed : Precision::kBf16Amp;
}

AttentionKind resolved_attention(const TrainSetup& setup) {
  if (setup.attention) return *setup.attention;
  if (setup.impl && setup.profile != Profile::kPaper) return spec(*setup.impl, setup.impl_version).attention;
  return AttentionKind::kStandard;
}

// implver
Optimizer resolved_optimizer(const TrainSetup& setup) {
  if (setup.optimizer) return *setup.optimizer;
  if (setup.impl && setup.profile != Profile::kPaper) {
    const ImplSpec& sp = spec(*setup.impl, setup.impl_version);
    return resolved_attention(setup) == AttentionKind::kStandard ? sp.optimizer_eager
                                                                 : sp.optimizer;
  }
  return Optimizer::kAdamForeach;
}

// exec10
bool resolved_set_to_none(const TrainSetup& setup) {
  if (setup.set_to_none) return *setup.set_to_none;
  if (setup.impl && setup.profile != Profile::kPaper)
    return spec(*setup.impl, setup.impl_version).set_to_none;
  return true;
}

void validate(const ModelConfig& model, const TrainSetup& s) {
  require(s.micro_batch > 0, "--batch", "batch", "must be a positive integer");
  require(s.seq > 0, "--seq", "seq", "must be a positive integer");
  require(s.tp > 0, "--tp", "tp", "must be a positive integer");
  require(s.dp > 0, "--dp", "dp", "must be a positive integer");
  require(s.zero >= 0 && s.zero <= 3, "--zero", "zero", "must be 0, 1, 2 or 3");
  require(s.prefetch >= 0 && s.prefetch <= model.layers, "--prefetch", "prefetch",
          "must be between 0 and the model's " + std::to_string(model.layers) + " blocks");
  require(s.pp >= 1, "--pp", "pp", "must be a positive integer");
  require(s.vpp >= 1, "--vpp", "vpp", "must be a positive integer");
  require(s.microbatches >= 1, "--num-microbatches", "num_microbatches", "must be a positive integer");
  if (s.pp > 1 || s.vpp > 1) {
    require(s.pp <= model.layers && model.layers % (s.pp * s.vpp) == 0, "--pp", "pp",
            "the model's " + std::to_string(model.layers) + " blocks must divide into pp x vpp = " +
                std::to_string(s.pp * s.vpp) + " equal chunks");
    // Megatron-core's interleaved schedule needs p > 1 and N a multiple of p.
    if (s.vpp > 1)
      require(s.pp > 1 && s.microbatches % s.pp == 0, "--vpp", "vpp",
              "the interleaved schedule needs --pp > 1 and --num-microbatches a multiple of --pp");
  }
  if (s.dropout) {
    require(*s.dropout >= 0.0 && *s.dropout < 1.0, "--dropout", "dropout",
            "must be in [0, 1)");
  }
  // famenc: ViT's tokens are fixed by its config; only encoder-decoder models have a decoder length
  if (is_vision(model) && s.seq != model.max_positions)
    throw ConfigError("--seq", "seq",
                      std::to_string(s.seq) + " tokens: " + model.family + " sees " +
                          std::to_string(model.max_positions) + " ((image_size / patch_size)^2 + 1 "
                          "in " + model.source + "; another image size is another config): give "
                          "--seq " + std::to_string(model.max_positions) + " or leave it out");
  if (s.target_seq) {
    require(model.decoder_layers > 0, "--target-seq", "target_seq",
            "only encoder-decoder models have a decoder length (" + model.family + " has none)");
    require(*s.target_seq > 0, "--target-seq", "target_seq", "must be a positive integer");
  }
  if (model.positions == PosEmbedding::kLearned && model.max_positions > 0 &&
      s.seq > model.max_positions) {
    throw ConfigError("--seq", "seq",
                      "sequence " + std::to_string(s.seq) + " exceeds the model's " +
                          std::to_string(model.max_positions) +
                          " learned positions (max_position_embeddings in " + model.source + ")");
  }
  // Tensor parallelism splits heads, KV heads and the MLP across ranks (Megatron-core).
  if (s.tp > 1) {
    require(model.heads % s.tp == 0, "--tp", "tp",
            "attention heads (" + std::to_string(model.heads) + ") must divide by tp");
    require(model.kv_heads % s.tp == 0 || s.tp % model.kv_heads == 0, "--tp", "tp",
            "KV heads (" + std::to_string(model.kv_heads) + ") and tp must divide one another");
    require(model.ffn_hidden % s.tp == 0, "--tp", "tp",
            "MLP width (" + std::to_string(model.ffn_hidden) + ") must divide by tp");
  }
  if (s.sp) {
    require(s.tp > 1, "--sp", "sp", "sequence parallelism needs --tp > 1");
    require((s.seq / s.cp) % s.tp == 0, "--sp", "sp",
            s.cp > 1 ? "each context-parallel rank's sequence (seq / cp) must divide by tp"
                     : "sequence length must divide by tp");
  }
  // feat (issue 13): context parallelism. Megatron-core splits each sequence into 2 cp chunks
  // and gives rank r chunks r and 2cp-1-r when causal (load balance: get_batch_on_this_cp_rank),
  // cp chunks otherwise.
  require(s.cp >= 1, "--cp", "cp", "must be a positive integer");
  if (s.cp > 1) {
    const int64_t chunks = model.causal ? 2 * s.cp : s.cp;
    require(s.seq % chunks == 0, "--cp", "cp",
            "sequence " + std::to_string(s.seq) + " must divide into " + std::to_string(chunks) +
                (model.causal ? " chunks (2 x cp, load-balanced causal ring attention)"
                              : " chunks (cp)"));
    require(resolved_attention(s) == AttentionKind::kFlash, "--cp", "cp",
            "ring attention runs on the fused/flash kernel: --attention standard has no "
            "context-parallel path");
  }
  // (feat: context-parallel ranks shard with the data-parallel ones: dp x cp ranks)
  if (s.zero > 0) require(s.dp * s.cp > 1, "--zero", "zero", "ZeRO needs --dp > 1");
  if (resolved_precision(s) == Precision::kFsdp2Bf16)  // feat3: --zero 3 is its default
    require(s.dp * s.cp == 1 || s.zero == 3, "--zero", "zero",
            "fsdp2-bf16 (FSDP2) always shards parameters, gradients and optimizer state over "
            "--dp: --zero " + std::to_string(s.zero) + " is not its regime (leave --zero out, or 3)");

  if (s.profile == Profile::kPaper) {
    // The paper profile is Korthikanti et al. 2022 exactly and only (DESIGN.md §3 Profiles).
    const char* w = "--profile";
    if (resolved_precision(s) != Precision::kBf16Mixed)
      throw Unsupported(w, "precision", "--precision other than bf16-mixed in the paper profile");
    if (resolved_attention(s) != AttentionKind::kStandard)
      throw Unsupported(w, "attention", "flash attention in the paper profile");
    if (model.mlp != MlpKind::kGelu)
      throw Unsupported(w, "mlp", "a SwiGLU MLP in the paper profile");
    if (model.norm != NormKind::kLayerNorm)
      throw Unsupported(w, "norm", "RMSNorm in the paper profile");
    if (model.kv_heads != model.heads)
      throw Unsupported(w, "kv_heads", "grouped-query attention in the paper profile");
    if (model.head_dim * model.heads != model.hidden)
      throw Unsupported(w, "head_dim", "head_dim * heads != hidden in the paper profile");
    if (model.ffn_hidden != 4 * model.hidden)
      throw Unsupported(w, "ffn_hidden", "an MLP width other than 4h in the paper profile");
    if (model.head != Head::kCausalLm)  // implhf
      throw Unsupported(w, "head", "the " + std::string(head_name(model.head)) +
                                       " head (architectures) in the paper profile");
    if (model.post_norm || !model.causal)
      throw Unsupported(w, "family", "a post-norm or bidirectional encoder in the paper profile");
    if (model.positions != PosEmbedding::kLearned)
      throw Unsupported(w, "positions", "rotary positions in the paper profile");
    if (s.dropout && *s.dropout == 0.0)
      throw Unsupported(w, "dropout", "dropout off in the paper profile (it assumes three sites)");
  }
}

}  // namespace sim
