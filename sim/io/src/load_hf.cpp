// HuggingFace config.json as is: an allow-list of model_type values, each mapped to the features
// it implies (DESIGN.md §3 "Model families and their knobs"). Key names and defaults follow the
// transformers configuration classes (models/<type>/configuration_<type>.py): a key absent from
// the file takes the class default. Everything outside the allow-list is refused with
// sim::Unsupported ("not supported yet: <feature> (<model_type>)"), never simulated wrongly.
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "hf_config.hpp"
#include "json_reader.hpp"
#include "sim/error.hpp"
#include "sim/model.hpp"

namespace sim_io::detail {
// The shared readers of hf_config.hpp.
[[noreturn]] void refuse(const ObjectReader& in, std::string_view key, const std::string& feature) {
  throw sim::Unsupported(in.source(), std::string(key), feature);
}

int64_t size_or(const ObjectReader& in, std::string_view key, int64_t fallback) {
  const int64_t v = in.integer_or(key, fallback);
  if (v <= 0) in.fail(key, "must be a positive integer, got " + std::to_string(v));
  return v;
}

int64_t size(const ObjectReader& in, std::string_view key) {
  const int64_t v = in.integer(key);
  if (v <= 0) in.fail(key, "must be a positive integer, got " + std::to_string(v));
  return v;
}

double probability(const ObjectReader& in, std::string_view key, double fallback) {
  const double p = in.number_or(key, fallback);
  if (!(p >= 0.0 && p < 1.0)) in.fail(key, "dropout probability must be in [0, 1)");
  return p;
}

// hidden / heads, for configs without head_dim.
int64_t head_dim(const ObjectReader& in, int64_t hidden, int64_t heads, std::string_view hidden_key,
                 std::string_view heads_key) {
  if (hidden % heads != 0)
    in.fail(heads_key, std::string(hidden_key) + " (" + std::to_string(hidden) +
                           ") is not divisible by " + std::string(heads_key) + " (" +
                           std::to_string(heads) + ")");
  return hidden / heads;
}

int64_t four_times(const ObjectReader& in, int64_t hidden, std::string_view hidden_key) {
  if (hidden > std::numeric_limits<int64_t>::max() / 4) in.fail(hidden_key, "too large");
  return 4 * hidden;
}

namespace {

constexpr std::string_view kEncoderDecoder = "encoder-decoder";
constexpr std::string_view kMoe = "mixture of experts";
constexpr std::string_view kVision = "vision or multimodal";
constexpr std::string_view kParallel = "parallel residual";
constexpr std::string_view kQkNorm = "per-head q/k norms";
constexpr std::string_view kRecurrent = "recurrent blocks";

// Known model types with a feature actsim does not model yet, as space-separated lists. Any
// type neither here nor allowed below is refused too ("model_type <x>"); this table only makes
// the reason precise.
struct Refusal {
  std::string_view feature;
  std::string_view model_types;
};
constexpr Refusal kRefused[] = {
    {kEncoderDecoder,
     "mt5 umt5 longt5 bart mbart pegasus pegasus_x marian whisper led blenderbot "
     "blenderbot-small m2m_100 fsmt prophetnet plbart bigbird_pegasus encoder-decoder "
     "speech-encoder-decoder seamless_m4t"},
    {kMoe,
     "qwen3_moe deepseek_v3 dbrx jamba olmoe granitemoe "
     "granitemoeshared phimoe jetmoe gpt_oss minimax switch_transformers nllb-moe llama4"},
    {kVision,
     "clip clip_vision_model siglip siglip2 siglip_vision_model llava llava_next "
     "llava_onevision idefics idefics2 idefics3 blip blip-2 instructblip paligemma qwen2_vl "
     "qwen2_5_vl mllama pixtral chameleon fuyu kosmos-2 deit swin beit dinov2 convnext sam "
     "owlvit git vision-encoder-decoder gemma3"},
    {kParallel, "gpt_neox_japanese gptj phi codegen cohere"},
    {kQkNorm, "qwen3"},
    {kRecurrent, "recurrent_gemma"},
};

// Whether the space-separated `list` contains `word`.
bool lists(std::string_view list, std::string_view word) {
  while (!list.empty()) {
    const size_t space = list.find(' ');
    if (list.substr(0, space) == word) return true;
    if (space == std::string_view::npos) break;
    list.remove_prefix(space + 1);
  }
  return false;
}

// Keys that count routed experts; more than one expert is MoE whatever the model_type says.
constexpr std::string_view kExpertKeys[] = {"num_local_experts", "num_experts", "n_routed_experts"};

// HF's GeLU variants (exact, tanh approximations). F.gelu (exact or tanh) is one op; gelu_new
// is pointwise Python ops whose saves the hf implementation models (sim::Activation).
constexpr std::string_view kGelus[] = {"gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast"};

bool is_gelu(std::string_view act) {
  for (std::string_view g : kGelus)
    if (g == act) return true;
  return false;
}

// One of kGelus (checked first) as the simulator's activation variant.
sim::Activation activation_of(std::string_view act) {
  if (act == "gelu_new") return sim::Activation::kGeluNew;
  if (act == "gelu_pytorch_tanh") return sim::Activation::kGeluTanh;
  if (act == "gelu_fast") return sim::Activation::kGeluFast;
  return sim::Activation::kGelu;
}

void refuse_cross_attention(const ObjectReader& in, std::string_view type) {
  if (in.boolean_or("add_cross_attention", false))
    refuse(in, "add_cross_attention", "cross-attention (" + std::string(type) + ")");
}

// GPT2Config (transformers/models/gpt2/configuration_gpt2.py). GPT2LMHeadModel: LayerNorm with
// bias, learned positions, fused c_attn with bias, 4h GeLU MLP, tied LM head.
sim::ModelConfig gpt2(const ObjectReader& in) {
  sim::ModelConfig m;
  m.family = "gpt2";
  m.hidden = size(in, "n_embd");
  m.layers = size(in, "n_layer");
  m.heads = size(in, "n_head");
  m.kv_heads = m.heads;
  m.head_dim = head_dim(in, m.hidden, m.heads, "n_embd", "n_head");
  m.ffn_hidden = in.has("n_inner") ? size(in, "n_inner") : four_times(in, m.hidden, "n_embd");
  m.vocab = size(in, "vocab_size");
  if (in.has("n_positions")) {
    m.max_positions = size(in, "n_positions");
  } else if (in.has("n_ctx")) {  // older configs name the context n_ctx only
    m.max_positions = size(in, "n_ctx");
  } else {
    in.fail("n_positions", "missing (required, or n_ctx)");
  }
  const std::string act = in.string_or("activation_function", "gelu_new");
  if (!is_gelu(act)) refuse(in, "activation_function", "activation " + act + " (gpt2)");
  m.activation = activation_of(act);
  refuse_cross_attention(in, "gpt2");

  m.mlp = sim::MlpKind::kGelu;
  m.norm = sim::NormKind::kLayerNorm;
  m.positions = sim::PosEmbedding::kLearned;
  m.post_norm = false;
  m.causal = true;
  m.tied_embeddings = in.boolean_or("tie_word_embeddings", true);
  m.qkv_bias = m.linear_bias = m.norm_bias = true;
  m.attn_dropout = probability(in, "attn_pdrop", 0.1);
  m.hidden_dropout = probability(in, "resid_pdrop", 0.1);
  m.embd_dropout = probability(in, "embd_pdrop", 0.1);
  read_head(in, m, "gpt2");  // implhf
  m.causal_buffer_per_layer = true;  // hfimpl: GPT2Attention's `bias` buffer
  m.shift_logits_copy = true;        // exec10: GPT2LMHeadModel's shifted logits and labels copies
  m.scale_by_tensor = true;          // exec10: _attn's `/ torch.full([], d ** 0.5)`, saved
  return m;
}

}  // namespace

// LlamaConfig, MistralConfig, Qwen2Config: pre-norm RMSNorm blocks, rotary positions, SwiGLU
// (gate, up, down), optional GQA. Qwen2 hard-codes a bias on q/k/v (modeling_qwen2.py) and reads
// no attention_bias. Llama's attention_bias also puts a bias on o_proj, which ModelConfig folds
// into linear_bias with the MLP's; it is taken from mlp_bias here (h extra parameters per
// layer when only attention_bias is set). Mistral's sliding_window does not change what is
// stored for backward under standard attention.
sim::ModelConfig llama_like(const ObjectReader& in, const std::string& type) {
  sim::ModelConfig m;
  m.family = type;
  m.hidden = size(in, "hidden_size");
  m.layers = size(in, "num_hidden_layers");
  m.heads = size(in, "num_attention_heads");
  m.kv_heads = in.has("num_key_value_heads") ? size(in, "num_key_value_heads") : m.heads;
  if (m.heads % m.kv_heads != 0)
    in.fail("num_key_value_heads", "num_attention_heads (" + std::to_string(m.heads) +
                                       ") must be a multiple of num_key_value_heads (" +
                                       std::to_string(m.kv_heads) + ")");
  m.head_dim = in.has("head_dim")
                   ? size(in, "head_dim")
                   : head_dim(in, m.hidden, m.heads, "hidden_size", "num_attention_heads");
  m.ffn_hidden = size(in, "intermediate_size");
  m.vocab = size(in, "vocab_size");
  m.max_positions = size(in, "max_position_embeddings");
  const std::string act = in.string_or("hidden_act", "silu");
  if (act != "silu") refuse(in, "hidden_act", "hidden_act " + act + " (" + type + ")");

  m.mlp = sim::MlpKind::kSwiglu;
  m.norm = sim::NormKind::kRmsNorm;
  m.norm_bias = false;
  m.positions = sim::PosEmbedding::kRope;
  m.post_norm = false;
  m.causal = true;
  m.tied_embeddings = in.boolean_or("tie_word_embeddings", false);
  m.qkv_bias = type == "qwen2" ? true : in.boolean_or("attention_bias", false);
  m.linear_bias = in.boolean_or("mlp_bias", false);
  m.attn_dropout = probability(in, "attention_dropout", 0.0);
  m.hidden_dropout = 0.0;
  m.embd_dropout = 0.0;
  read_head(in, m, type);  // implhf
  m.additive_causal_mask = true;  // hfimpl: _update_causal_mask's 4-D additive mask (exec10: on)
  m.eager_softmax_fp32 = true;  // fam12: eager_attention_forward (modeling_llama.py @ 5dd4a635)
  return m;
}

namespace {

// BertConfig (transformers/models/bert/configuration_bert.py). BertForMaskedLM: post-norm
// blocks, LayerNorm on the embeddings, token-type embeddings, bidirectional attention, the MLM
// head's transform tied to the word embeddings.
sim::ModelConfig bert(const ObjectReader& in) {
  sim::ModelConfig m;
  m.family = "bert";
  m.hidden = size(in, "hidden_size");
  m.layers = size(in, "num_hidden_layers");
  m.heads = size(in, "num_attention_heads");
  m.kv_heads = m.heads;
  m.head_dim = head_dim(in, m.hidden, m.heads, "hidden_size", "num_attention_heads");
  m.ffn_hidden = size(in, "intermediate_size");
  m.vocab = size(in, "vocab_size");
  m.max_positions = size(in, "max_position_embeddings");
  m.type_vocab = in.integer_or("type_vocab_size", 2);
  if (m.type_vocab < 0) in.fail("type_vocab_size", "must not be negative");
  const std::string act = in.string_or("hidden_act", "gelu");
  if (!is_gelu(act)) refuse(in, "hidden_act", "hidden_act " + act + " (bert)");
  m.activation = activation_of(act);
  const std::string pos = in.string_or("position_embedding_type", "absolute");
  if (pos != "absolute")
    refuse(in, "position_embedding_type", "relative position embeddings " + pos + " (bert)");
  if (in.boolean_or("is_decoder", false)) refuse(in, "is_decoder", "BERT as a decoder (bert)");
  refuse_cross_attention(in, "bert");

  m.mlp = sim::MlpKind::kGelu;
  m.norm = sim::NormKind::kLayerNorm;
  m.positions = sim::PosEmbedding::kLearned;
  m.post_norm = true;
  m.causal = false;
  m.tied_embeddings = in.boolean_or("tie_word_embeddings", true);
  m.qkv_bias = m.linear_bias = m.norm_bias = true;
  m.attn_dropout = probability(in, "attention_probs_dropout_prob", 0.1);
  m.hidden_dropout = probability(in, "hidden_dropout_prob", 0.1);
  m.embd_dropout = m.hidden_dropout;  // BertEmbeddings uses hidden_dropout_prob
  read_head(in, m, "bert");  // implhf
  m.extended_mask_always = true;  // hfimpl: BertModel's extended attention mask
  return m;
}

}  // namespace

sim::ModelConfig model_from_hf(const ObjectReader& in) {
  if (!in.has("model_type"))
    in.fail("model_type",
            "missing: a HuggingFace config.json names its model_type (an actsim model file "
            "starts with \"format\": \"actsim-model-v1\")");
  const std::string type = in.string("model_type");
  if (type.empty()) in.fail("model_type", "must not be empty");
  for (const Refusal& r : kRefused)
    if (lists(r.model_types, type))
      refuse(in, "model_type", std::string(r.feature) + " (" + type + ")");
  // famenc: T5 (encoder-decoder) and ViT (hf_encdec.cpp)
  if (type == "t5") return t5_from_hf(in);
  if (type == "vit") return vit_from_hf(in);
  if (in.boolean_or("is_encoder_decoder", false))
    refuse(in, "is_encoder_decoder", std::string(kEncoderDecoder) + " (" + type + ")");
  if (const auto moe = model_from_hf_moe(in, type)) return *moe;  // moe: hf_moe.cpp
  for (std::string_view key : kExpertKeys) {
    if (const int64_t experts = in.integer_or(key, 0); experts > 1)
      refuse(in, key,
             std::string(kMoe) + " (" + type + " with " + std::string(key) + " " +
                 std::to_string(experts) + ")");
  }

  if (type == "gpt2") return gpt2(in);
  if (type == "llama" || type == "mistral" || type == "qwen2") return llama_like(in, type);
  if (type == "bert") return bert(in);
  if (is_decoder_family(type)) return decoder_from_hf(in, type);  // famdec: hf_decoders.cpp
  refuse(in, "model_type", "model_type " + type);
}

}  // namespace sim_io::detail
