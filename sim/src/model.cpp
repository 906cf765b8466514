#include "sim/model.hpp"

#include <string>

#include "sim/error.hpp"
#include "sim/units.hpp"

namespace sim {
namespace {

void positive(const ModelConfig& m, int64_t v, const char* field) {
  if (v <= 0)
    throw ConfigError(m.source, field, "must be a positive integer, got " + std::to_string(v));
}

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
  // implhf: a classification head needs its labels
  if (classification_head(m) && m.num_labels <= 0)
    throw ConfigError(m.source, "num_labels", "a classification head needs num_labels >= 1");
  if (!(m.classifier_dropout >= 0.0 && m.classifier_dropout < 1.0))
    throw ConfigError(m.source, "classifier_dropout", "dropout probability must be in [0, 1)");
  if (m.norm == NormKind::kRmsNorm && m.norm_bias)
    throw ConfigError(m.source, "norm_bias", "RMSNorm has no bias");
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
  block = checked_add(block, 2 * norm, f);  // two norms per block

  int64_t total = checked_mul(block, m.layers, f);
  total = checked_add(total, checked_mul(m.vocab, h, f), f);  // word embeddings
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
  int64_t block = 2 * norm;
  if (m.qkv_bias) block += (a + 2 * g) * d;
  if (m.linear_bias) block += h + (m.mlp == MlpKind::kSwiglu ? 2 : 1) * ff + h;
  int64_t total = block * m.layers + norm;
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
