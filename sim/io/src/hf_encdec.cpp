// famenc (issue 12): HuggingFace T5 and ViT configs. Key names and defaults follow the
// transformers configuration classes (models/t5/configuration_t5.py, models/vit/
// configuration_vit.py); the op lists these fields drive are docs/memory-model.md "T5" and "ViT".
#include <cstdint>
#include <string>
#include <string_view>

#include "hf_config.hpp"
#include "json_reader.hpp"
#include "sim/error.hpp"
#include "sim/model.hpp"

namespace sim_io::detail {
namespace {

// The first entry of `architectures` (absent: `fallback`); anything but `supported` is refused.
void require_architecture(const ObjectReader& in, std::string_view supported,
                          std::string_view type) {
  if (!in.has("architectures")) return;
  const Json& a = in.json().at("architectures");
  if (!a.is_array() || a.empty() || !a.front().is_string())
    in.fail("architectures", "expected a list of class names");
  const std::string arch = a.front().get<std::string>();
  if (arch != supported)
    refuse(in, "architectures",
           "the " + arch + " head (" + std::string(type) + ": " + std::string(supported) +
               " is modeled)");
}

}  // namespace

// T5Config (configuration_t5.py). T5ForConditionalGeneration (modeling_t5.py): a shared word
// embedding, an encoder stack and a decoder stack of pre-norm blocks with T5LayerNorm (RMS, no
// bias), no biases anywhere, a relative position bias table in each stack's first block, and an
// lm_head tied to the shared embedding (rescaled by d_model**-0.5) unless tie_word_embeddings is
// false. feed_forward_proj: "relu" (T5DenseActDense) or "gated-gelu" (T5DenseGatedActDense with
// gelu_new, t5 v1.1 / flan-t5).
sim::ModelConfig t5_from_hf(const ObjectReader& in) {
  require_architecture(in, "T5ForConditionalGeneration", "t5");
  sim::ModelConfig m;
  m.family = "t5";
  m.hidden = size_or(in, "d_model", 512);
  m.head_dim = size_or(in, "d_kv", 64);
  m.ffn_hidden = size_or(in, "d_ff", 2048);
  const int64_t enc = size_or(in, "num_layers", 6);
  const int64_t dec = in.has("num_decoder_layers") ? size_or(in, "num_decoder_layers", enc) : enc;
  if (enc > sim::kMaxLayers || dec > sim::kMaxLayers) in.fail("num_layers", "too many blocks");
  m.layers = enc + dec;
  m.decoder_layers = dec;
  m.heads = size_or(in, "num_heads", 8);
  m.kv_heads = m.heads;
  m.vocab = size_or(in, "vocab_size", 32128);
  m.relative_buckets = size_or(in, "relative_attention_num_buckets", 32);
  const std::string ff = in.string_or("feed_forward_proj", "relu");
  if (ff == "relu") {
    m.mlp = sim::MlpKind::kRelu;
  } else if (ff == "gated-gelu") {  // T5Config: dense_act_fn = "gelu_new" for "gated-gelu"
    m.mlp = sim::MlpKind::kGeglu;
    m.activation = sim::Activation::kGeluNew;
  } else {
    refuse(in, "feed_forward_proj",
           "feed_forward_proj " + ff + " (t5: relu and gated-gelu are modeled)");
  }
  if (!in.boolean_or("is_encoder_decoder", true))
    refuse(in, "is_encoder_decoder", "T5 as one stack (t5)");
  m.norm = sim::NormKind::kRmsNorm;
  m.norm_bias = false;
  m.positions = sim::PosEmbedding::kRelativeBias;
  m.post_norm = false;
  m.causal = false;  // the encoder's; decoder blocks are causal (blocks_encdec.cpp)
  m.tied_embeddings = in.boolean_or("tie_word_embeddings", true);
  m.scale_tied_head = m.tied_embeddings;  // T5ForConditionalGeneration.forward
  m.qkv_bias = m.linear_bias = false;
  m.sdpa = false;  // T5Attention: eager matmuls only (no _supports_sdpa)
  const double p = probability(in, "dropout_rate", 0.1);
  m.attn_dropout = m.hidden_dropout = m.embd_dropout = p;
  return m;
}

// ViTConfig (configuration_vit.py). ViTForImageClassification (modeling_vit.py): a conv patch
// embedding, a class token, learned positions for the patches and the class token, pre-norm
// LayerNorm blocks with q/k/v biases and a GeLU MLP, a final LayerNorm (no pooler), and a linear
// classifier on the class token. num_labels is len(id2label) (PretrainedConfig; label2id may
// repeat a label), else num_labels, else 2.
sim::ModelConfig vit_from_hf(const ObjectReader& in) {
  require_architecture(in, "ViTForImageClassification", "vit");
  sim::ModelConfig m;
  m.family = "vit";
  m.hidden = size_or(in, "hidden_size", 768);
  m.layers = size_or(in, "num_hidden_layers", 12);
  m.heads = size_or(in, "num_attention_heads", 12);
  m.kv_heads = m.heads;
  if (m.hidden % m.heads != 0)
    in.fail("num_attention_heads", "hidden_size (" + std::to_string(m.hidden) +
                                       ") is not divisible by num_attention_heads");
  m.head_dim = m.hidden / m.heads;
  m.ffn_hidden = size_or(in, "intermediate_size", 3072);
  m.image_size = size_or(in, "image_size", 224);
  m.patch_size = size_or(in, "patch_size", 16);
  m.channels = size_or(in, "num_channels", 3);
  if (m.image_size % m.patch_size != 0)
    in.fail("image_size",
            "must be a multiple of patch_size (" + std::to_string(m.patch_size) + ")");
  const int64_t side = m.image_size / m.patch_size;
  if (side > 65536) in.fail("image_size", "too many patches");
  m.max_positions = side * side + 1;  // the patches and the class token
  if (in.has("id2label")) {
    const Json& labels = in.json().at("id2label");
    if (!labels.is_object() || labels.empty()) in.fail("id2label", "expected a non-empty object");
    m.num_labels = static_cast<int64_t>(labels.size());
  } else {
    m.num_labels = size_or(in, "num_labels", 2);
  }
  const std::string act = in.string_or("hidden_act", "gelu");
  if (act != "gelu") refuse(in, "hidden_act", "hidden_act " + act + " (vit)");
  if (in.boolean_or("use_mask_token", false))
    refuse(in, "use_mask_token", "masked image modeling (vit)");
  m.vocab = 0;
  m.mlp = sim::MlpKind::kGelu;
  m.activation = sim::Activation::kGelu;
  m.norm = sim::NormKind::kLayerNorm;
  m.positions = sim::PosEmbedding::kLearned;
  m.post_norm = false;
  m.causal = false;
  m.tied_embeddings = true;  // no lm head
  m.qkv_bias = in.boolean_or("qkv_bias", true);
  m.linear_bias = m.norm_bias = true;
  m.attn_dropout = probability(in, "attention_probs_dropout_prob", 0.0);
  m.hidden_dropout = probability(in, "hidden_dropout_prob", 0.0);
  m.embd_dropout = m.hidden_dropout;  // ViTEmbeddings' dropout
  return m;
}

}  // namespace sim_io::detail
