// Model files: actsim's own strict format ("format": "actsim-model-v1") and, for anything
// without "format", a HuggingFace config.json (load_hf.cpp).
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "hf_config.hpp"
#include "json_reader.hpp"
#include "sim/error.hpp"
#include "sim/model.hpp"
#include "sim_io/load.hpp"

namespace sim_io {
namespace {

using detail::ObjectReader;

constexpr std::string_view kModelFormat = "actsim-model-v1";

template <typename Enum>
struct Choice {
  std::string_view name;
  Enum value;
};

template <typename Enum, size_t N>
Enum read_choice(const ObjectReader& in, std::string_view key, const Choice<Enum> (&choices)[N],
                 Enum fallback) {
  if (!in.has(key)) return fallback;
  const std::string got = in.string(key);
  std::string expected;
  for (const auto& c : choices) {
    if (c.name == got) return c.value;
    expected += (expected.empty() ? "\"" : ", \"") + std::string(c.name) + "\"";
  }
  in.fail(key, "expected one of " + expected + ", got \"" + got + "\"");
}

constexpr Choice<sim::MlpKind> kMlps[] = {{"gelu", sim::MlpKind::kGelu},
                                          {"swiglu", sim::MlpKind::kSwiglu}};
constexpr Choice<sim::NormKind> kNorms[] = {{"layernorm", sim::NormKind::kLayerNorm},
                                            {"rmsnorm", sim::NormKind::kRmsNorm}};
constexpr Choice<sim::PosEmbedding> kPositions[] = {{"learned", sim::PosEmbedding::kLearned},
                                                    {"rope", sim::PosEmbedding::kRope}};

// actsim-model-v1: every ModelConfig field by its own name. Strict: unknown keys (typos), nulls
// and wrong types are errors. Defaults: kv_heads = heads, head_dim = hidden / heads,
// ffn_hidden = 4 hidden, type_vocab = 0, and ModelConfig's own defaults for the rest.
sim::ModelConfig model_from_actsim(const ObjectReader& in) {
  // clang-format off
  in.reject_unknown({"format", "description", "provenance", "family", "layers", "hidden", "heads",
                     "kv_heads", "head_dim", "ffn_hidden", "vocab", "max_positions", "type_vocab",
                     "mlp", "norm", "positions", "post_norm", "causal", "tied_embeddings",
                     "qkv_bias", "linear_bias", "norm_bias", "attn_dropout", "hidden_dropout",
                     "embd_dropout"});
  // clang-format on
  if (const std::string format = in.string("format"); format != kModelFormat)
    in.fail("format",
            "unknown format \"" + format + "\"; expected \"" + std::string(kModelFormat) + "\"");
  (void)in.opt_string("description");  // documentation only, but must be a string
  (void)in.opt_string("provenance");

  sim::ModelConfig m;
  m.family = in.string("family");
  if (m.family.empty()) in.fail("family", "must not be empty");
  m.layers = in.integer("layers");
  m.hidden = in.integer("hidden");
  m.heads = in.integer("heads");
  m.kv_heads = in.integer_or("kv_heads", m.heads);
  if (const auto head_dim = in.opt_integer("head_dim")) {
    m.head_dim = *head_dim;
  } else if (m.heads > 0) {  // heads <= 0 is reported by validate(), naming heads
    if (m.hidden % m.heads != 0)
      in.fail("heads", "hidden (" + std::to_string(m.hidden) + ") is not divisible by heads (" +
                           std::to_string(m.heads) + "); give head_dim explicitly");
    m.head_dim = m.hidden / m.heads;
  }
  if (in.has("ffn_hidden")) {
    m.ffn_hidden = in.integer("ffn_hidden");
  } else {
    if (m.hidden > std::numeric_limits<int64_t>::max() / 4) in.fail("hidden", "too large");
    m.ffn_hidden = 4 * m.hidden;
  }
  m.vocab = in.integer("vocab");
  m.type_vocab = in.integer_or("type_vocab", 0);

  m.mlp = read_choice(in, "mlp", kMlps, m.mlp);
  m.norm = read_choice(in, "norm", kNorms, m.norm);
  m.positions = read_choice(in, "positions", kPositions, m.positions);
  if (m.positions == sim::PosEmbedding::kLearned && !in.has("max_positions"))
    in.fail("max_positions", "missing (required with learned positions)");
  m.max_positions = in.integer_or("max_positions", 0);

  m.post_norm = in.boolean_or("post_norm", m.post_norm);
  // implhf: a post-norm (BERT-style) actsim model file trains with the masked-LM head, as before
  // the head became a field
  if (m.post_norm) m.head = sim::Head::kMaskedLm;
  m.causal = in.boolean_or("causal", m.causal);
  m.tied_embeddings = in.boolean_or("tied_embeddings", m.tied_embeddings);
  m.qkv_bias = in.boolean_or("qkv_bias", m.qkv_bias);
  m.linear_bias = in.boolean_or("linear_bias", m.linear_bias);
  // RMSNorm has no bias: default it off rather than make every RMSNorm file say so.
  m.norm_bias = in.boolean_or("norm_bias", m.norm == sim::NormKind::kLayerNorm);

  m.attn_dropout = in.number_or("attn_dropout", m.attn_dropout);
  m.hidden_dropout = in.number_or("hidden_dropout", m.hidden_dropout);
  m.embd_dropout = in.number_or("embd_dropout", m.embd_dropout);
  return m;
}

// sim::validate, with the overflow check's placeholder "<setup>" replaced by the file: the
// checked arithmetic in sim/units.cpp does not know which file the sizes came from.
void validate_loaded(const sim::ModelConfig& m) {
  try {
    sim::validate(m);
  } catch (const sim::ConfigError& e) {
    if (e.where() == m.source) throw;
    throw sim::ConfigError(m.source, e.field(), e.message() + " (sizes too large)");
  }
}

}  // namespace

sim::ModelConfig parse_model(std::string_view json_text, std::string_view name,
                             std::string_view source) {
  // famenc: HF's label2id may repeat a label (the last wins, as in Python); nothing else may
  const detail::Json doc = detail::parse_json_object(json_text, source, "label2id");
  const bool actsim_format = doc.contains("format");
  const ObjectReader in(
      doc, std::string(source),
      actsim_format ? ObjectReader::Nulls::kStrict : ObjectReader::Nulls::kNullIsAbsent);
  sim::ModelConfig m = actsim_format ? model_from_actsim(in) : detail::model_from_hf(in);
  m.name = std::string(name);
  m.source = std::string(source);
  validate_loaded(m);
  return m;
}

}  // namespace sim_io
