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
  if (!is_vision(m)) positive(m, m.vocab, "vocab");  // famenc: ViT has no vocabulary
  if (m.positions == PosEmbedding::kLearned) positive(m, m.max_positions, "max_positions");
  // famenc: T5 and ViT
  if (m.decoder_layers < 0 || m.decoder_layers >= m.layers)
    throw ConfigError(m.source, "decoder_layers", "must leave at least one encoder block");
  if (m.positions == PosEmbedding::kRelativeBias)
    positive(m, m.relative_buckets, "relative_buckets");
  if (is_vision(m)) {
    positive(m, m.patch_size, "patch_size");
    positive(m, m.channels, "channels");
    positive(m, m.num_labels, "num_labels");
    if (m.image_size % m.patch_size != 0)
      throw ConfigError(m.source, "image_size", "must be a multiple of patch_size");
  }
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
  // implhf: a classification head needs its labels
  if (classification_head(m) && m.num_labels <= 0)
    throw ConfigError(m.source, "num_labels", "a classification head needs num_labels >= 1");
  if (!(m.classifier_dropout >= 0.0 && m.classifier_dropout < 1.0))
    throw ConfigError(m.source, "classifier_dropout", "dropout probability must be in [0, 1)");
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
  // gate and up, or fc1
  const int64_t mlp_in = m.mlp == MlpKind::kSwiglu || m.mlp == MlpKind::kGeglu ? 2 : 1;
  block = checked_add(block, checked_product({mlp_in, h, ff}, f), f);
  block = checked_add(block, checked_mul(ff, h, f), f);
  if (m.linear_bias) block = checked_add(block, checked_add(mlp_in * ff, h, f), f);
  const int64_t norm = m.norm_bias ? 2 * h : h;
  // famdec: norms per block (2; Falcon-7B's shared one; Gemma 2/3's four) and q/k norms
  block = checked_add(block, checked_add(checked_mul(norms_per_block(m), norm, f),
                                         qk_norm_parameters(m), f), f);

  int64_t total = checked_mul(block, m.layers, f);
  // famenc: a decoder block's cross-attention (q, k, v, o of inner width a*d; its own norm)
  if (m.decoder_layers > 0) {
    int64_t cross = checked_mul(checked_mul(4, h, f), checked_mul(a, d, f), f);
    if (m.qkv_bias) cross = checked_add(cross, 3 * a * d, f);
    if (m.linear_bias) cross = checked_add(cross, h, f);
    cross = checked_add(cross, norm, f);
    total = checked_add(total, checked_mul(cross, m.decoder_layers, f), f);
    total = checked_add(total, norm, f);  // the second stack's final norm
  }
  if (m.positions == PosEmbedding::kRelativeBias)  // one [buckets, heads] table per stack
    total = checked_add(
        total, checked_product({m.decoder_layers > 0 ? 2 : 1, m.relative_buckets, a}, f), f);
  if (is_moe(m) || is_mla(m)) total = detail::moe_blocks_parameter_count(m);  // moe
  if (is_vision(m)) {
    // ViT: patch conv (weight [h, c, p, p] and bias), class token; the classifier on it
    const int64_t conv = checked_product({h, m.channels, m.patch_size, m.patch_size}, f);
    total = checked_add(total, checked_add(conv, 2 * h, f), f);
    total = checked_add(total, checked_add(checked_mul(h, m.num_labels, f), m.num_labels, f), f);
  } else {
    total = checked_add(total, checked_mul(m.vocab, h, f), f);  // word embeddings
  }
  if (m.positions == PosEmbedding::kLearned)
    total = checked_add(total, checked_mul(m.max_positions, h, f), f);
  if (m.type_vocab > 0) total = checked_add(total, checked_mul(m.type_vocab, h, f), f);
  total = checked_add(total, norm, f);  // final norm (BERT: the embedding norm)
  // implhf: the head (graph_blocks.cpp build_head, blocks_heads.cpp)
  if (classification_head(m)) {
    // no vocabulary projection: the classifier h -> num_labels (+ bias), and BertPooler's dense
    // h -> h with bias for a pooled sequence-classification head
    total = checked_add(total, checked_mul(h, m.num_labels, f), f);
    if (m.classifier_bias) total = checked_add(total, m.num_labels, f);
    if (m.head == Head::kSequenceClassification && m.seq_pool == SeqPool::kFirstTokenPooler)
      total = checked_add(total, checked_add(checked_mul(h, h, f), h, f), f);
    return total;
  }
  if (!m.tied_embeddings) total = checked_add(total, checked_mul(m.vocab, h, f), f);
  if (m.head == Head::kMaskedLm) {
    // BERT's MLM head: dense h->h with bias, a LayerNorm, and the decoder's bias.
    total = checked_add(total, checked_add(checked_mul(h, h, f), h + norm + m.vocab, f), f);
  }
  return total;
}

std::string_view head_name(Head head) {
  switch (head) {
    case Head::kCausalLm: return "causal-lm";
    case Head::kMaskedLm: return "masked-lm";
    case Head::kSequenceClassification: return "sequence-classification";
    case Head::kTokenClassification: return "token-classification";
  }
  return "?";
}

int64_t vector_parameter_count(const ModelConfig& m) {
  // parameter_count's biases and norms, term by term (it has checked the sizes for overflow)
  const int64_t h = m.hidden, d = m.head_dim, a = m.heads, g = m.kv_heads, ff = m.ffn_hidden;
  const int64_t norm = m.norm_bias ? 2 * h : h;
  int64_t block = norms_per_block(m) * norm + qk_norm_parameters(m);
  if (m.qkv_bias) block += (a + 2 * g) * d;
  const int64_t mlp_in = m.mlp == MlpKind::kSwiglu || m.mlp == MlpKind::kGeglu ? 2 : 1;
  if (m.linear_bias) block += h + mlp_in * ff + h;
  int64_t total = block * m.layers + norm;
  if (is_moe(m) || is_mla(m)) total = detail::moe_blocks_vector_count(m) + norm;  // moe
  // famenc: cross-attention's biases and norm per decoder block, the second final norm; ViT's
  // patch-conv bias and classifier bias (the class token and positions are decayed: they are
  // neither biases nor norm weights, HF Trainer get_decay_parameter_names)
  if (m.decoder_layers > 0)
    total += m.decoder_layers * (norm + (m.qkv_bias ? 3 * a * d : 0) + (m.linear_bias ? h : 0)) +
             norm;
  if (is_vision(m)) total += h + m.num_labels;
  if (classification_head(m)) {  // implhf: the classifier's bias, the pooler's dense bias
    if (m.classifier_bias) total += m.num_labels;
    if (m.head == Head::kSequenceClassification && m.seq_pool == SeqPool::kFirstTokenPooler)
      total += h;
    return total;
  }
  if (m.head == Head::kMaskedLm) total += h + norm + m.vocab;  // BERT's MLM head: dense bias, norm, decoder bias
  return total;
}

}  // namespace sim
