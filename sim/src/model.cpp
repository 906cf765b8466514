#include "sim/model.hpp"

#include <string>

#include "sim/error.hpp"
#include "sim/units.hpp"
#include "model_moe.hpp"

namespace sim {
namespace {

void positive(const ModelConfig& m, int64_t v, const char* field) {
  if (v <= 0)
    throw ConfigError(m.source, field, "must be a positive integer, got " + std::to_string(v));
}

// --- famdec (issue 12) ---
// LayerNorms/RMSNorms of one block: two, but one for Falcon-7B's shared input_layernorm and four
// for Gemma 2/3's pre and post norms.
int64_t norms_per_block(const ModelConfig& m) {
  if (m.sub_norms == ModelConfig::SubNorms::kPrePost) return 4;
  if (m.residual == ModelConfig::Residual::kParallelOneNorm) return 1;
  return 2;
}
// Weights of the q/k norms: OLMo 2 normalizes the whole projections (a*d and g*d), Gemma 3 each
// head (d and d, shared by the heads).
int64_t qk_norm_parameters(const ModelConfig& m) {
  switch (m.qk_norm) {
    case ModelConfig::QkNorm::kFull: return (m.heads + m.kv_heads) * m.head_dim;
    case ModelConfig::QkNorm::kPerHead: return 2 * m.head_dim;
    case ModelConfig::QkNorm::kNone: break;
  }
  return 0;
}
// --- end famdec ---

}  // namespace

void validate(const ModelConfig& m) {
  positive(m, m.layers, "layers");
  if (m.layers > kMaxLayers)
    throw ConfigError(m.source, "layers",
                      std::to_string(m.layers) + " blocks: at most " + std::to_string(kMaxLayers) +
                          " are simulated");
  positive(m, m.hidden, "hidden");
  positive(m, m.heads, "heads");
  positive(m, m.kv_heads, "kv_heads");
  positive(m, m.head_dim, "head_dim");
  positive(m, m.ffn_hidden, "ffn_hidden");
  positive(m, m.vocab, "vocab");
  if (m.positions == PosEmbedding::kLearned) positive(m, m.max_positions, "max_positions");
  if (m.type_vocab < 0) throw ConfigError(m.source, "type_vocab", "must not be negative");
  if (m.heads % m.kv_heads != 0)
    throw ConfigError(m.source, "kv_heads",
                      "query heads (" + std::to_string(m.heads) + ") must be a multiple of KV heads (" +
                          std::to_string(m.kv_heads) + ")");
  for (auto [p, field] : {std::pair{m.attn_dropout, "attn_dropout"},
                          std::pair{m.hidden_dropout, "hidden_dropout"},
                          std::pair{m.embd_dropout, "embd_dropout"}}) {
    if (!(p >= 0.0 && p < 1.0))
      throw ConfigError(m.source, field, "dropout probability must be in [0, 1)");
  }
  if (m.norm == NormKind::kRmsNorm && m.norm_bias)
    throw ConfigError(m.source, "norm_bias", "RMSNorm has no bias");
  // famdec: partial rotary and windows
  if (m.rotary_dim < 0 || m.rotary_dim > m.head_dim || m.rotary_dim % 2 != 0)
    throw ConfigError(m.source, "rotary_dim",
                      "must be even and within head_dim (" + std::to_string(m.head_dim) +
                          "), got " + std::to_string(m.rotary_dim));
  if (m.sliding_window < 0 || m.global_every < 0)
    throw ConfigError(m.source, "sliding_window", "must not be negative");
  if (m.attn_softcap < 0 || m.final_softcap < 0)
    throw ConfigError(m.source, "softcapping", "must not be negative");
  if (is_moe(m) || is_mla(m) || m.experts != 0) detail::validate_moe(m);  // moe
  (void)parameter_count(m);  // overflow check
}

int64_t parameter_count(const ModelConfig& m) {
  const char* f = "params";
  const int64_t h = m.hidden, d = m.head_dim, a = m.heads, g = m.kv_heads, ff = m.ffn_hidden;
  const int64_t qkv_out = checked_mul(checked_add(a, 2 * g, f), d, f);
  int64_t block = checked_mul(h, qkv_out, f);               // fused Q/K/V
  if (m.qkv_bias) block = checked_add(block, qkv_out, f);
  block = checked_add(block, checked_mul(checked_mul(a, d, f), h, f), f);  // output projection
  if (m.linear_bias) block = checked_add(block, h, f);
  const int64_t mlp_in = m.mlp == MlpKind::kSwiglu ? 2 : 1;  // gate and up, or fc1
  block = checked_add(block, checked_product({mlp_in, h, ff}, f), f);
  block = checked_add(block, checked_mul(ff, h, f), f);
  if (m.linear_bias) block = checked_add(block, checked_add(mlp_in * ff, h, f), f);
  const int64_t norm = m.norm_bias ? 2 * h : h;
  // famdec: norms per block (2; Falcon-7B's shared one; Gemma 2/3's four) and q/k norms
  block = checked_add(block, checked_add(checked_mul(norms_per_block(m), norm, f),
                                         qk_norm_parameters(m), f), f);

  int64_t total = checked_mul(block, m.layers, f);
  if (is_moe(m) || is_mla(m)) total = detail::moe_blocks_parameter_count(m);  // moe
  total = checked_add(total, checked_mul(m.vocab, h, f), f);  // word embeddings
  if (m.positions == PosEmbedding::kLearned)
    total = checked_add(total, checked_mul(m.max_positions, h, f), f);
  if (m.type_vocab > 0) total = checked_add(total, checked_mul(m.type_vocab, h, f), f);
  total = checked_add(total, norm, f);  // final norm (BERT: the embedding norm)
  if (!m.tied_embeddings) total = checked_add(total, checked_mul(m.vocab, h, f), f);
  if (m.post_norm) {
    // BERT's MLM head: dense h->h with bias, a LayerNorm, and the decoder's bias.
    total = checked_add(total, checked_add(checked_mul(h, h, f), h + norm + m.vocab, f), f);
  }
  return total;
}

int64_t vector_parameter_count(const ModelConfig& m) {
  // parameter_count's biases and norms, term by term (it has checked the sizes for overflow)
  const int64_t h = m.hidden, d = m.head_dim, a = m.heads, g = m.kv_heads, ff = m.ffn_hidden;
  const int64_t norm = m.norm_bias ? 2 * h : h;
  int64_t block = norms_per_block(m) * norm + qk_norm_parameters(m);
  if (m.qkv_bias) block += (a + 2 * g) * d;
  if (m.linear_bias) block += h + (m.mlp == MlpKind::kSwiglu ? 2 : 1) * ff + h;
  int64_t total = block * m.layers + norm;
  if (is_moe(m) || is_mla(m)) total = detail::moe_blocks_vector_count(m) + norm;  // moe
  if (m.post_norm) total += h + norm + m.vocab;  // BERT's MLM head: dense bias, norm, decoder bias
  return total;
}

}  // namespace sim
