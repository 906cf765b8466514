// famdec (issue 12): HuggingFace configs of the decoder families GPT-NeoX (Pythia), Falcon (both
// config generations), Gemma 1/2/3, Phi-3 and OLMo 2. Keys and defaults follow each
// transformers configuration class (models/<type>/configuration_<type>.py); a key absent from the
// file takes the class default. Fields that change the model and are not modeled are refused with
// one line naming them; fields that change neither memory nor time (rope bases, eps, scaling of
// the rotary frequencies, query_pre_attn_scalar) are ignored.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "hf_config.hpp"
#include "json_reader.hpp"
#include "sim/error.hpp"
#include "sim/model.hpp"

namespace sim_io::detail {
namespace {

using Residual = sim::ModelConfig::Residual;
using SubNorms = sim::ModelConfig::SubNorms;
using QkNorm = sim::ModelConfig::QkNorm;

// transformers ACT2FN names of a single-op GeLU (F.gelu exact or tanh), or gelu_new (pointwise
// ops, Activation::kGeluNew).
bool gelu_activation(std::string_view act, sim::Activation* out) {
  if (act == "gelu") *out = sim::Activation::kGelu;
  else if (act == "gelu_pytorch_tanh") *out = sim::Activation::kGeluTanh;
  else if (act == "gelu_new") *out = sim::Activation::kGeluNew;
  else if (act == "gelu_fast") *out = sim::Activation::kGeluFast;
  else return false;
  return true;
}

void kv_heads(const ObjectReader& in, sim::ModelConfig& m, std::string_view key) {
  m.kv_heads = size_or(in, key, m.heads);
  if (m.heads % m.kv_heads != 0)
    in.fail(key, "num_attention_heads (" + std::to_string(m.heads) +
                     ") must be a multiple of " + std::string(key) + " (" +
                     std::to_string(m.kv_heads) + ")");
}

// rope_scaling types that only rescale frequencies change neither memory nor time; LongRoPE
// (Phi-3's "longrope"/"su") keeps two factor lists, also only frequencies. All are ignored.

// GPTNeoXConfig (configuration_gpt_neox.py): GPTNeoXForCausalLM with LayerNorm (bias), a fused
// query_key_value with bias (attention_bias), rotary on rotary_pct of each head, the parallel
// residual x + attn(ln1(x)) + mlp(ln2(x)) (use_parallel_residual), a 4h MLP, an untied embed_out.
sim::ModelConfig gpt_neox(const ObjectReader& in) {
  sim::ModelConfig m;
  m.family = "gpt_neox";
  m.hidden = size_or(in, "hidden_size", 6144);
  m.layers = size_or(in, "num_hidden_layers", 44);
  m.heads = size_or(in, "num_attention_heads", 64);
  m.kv_heads = m.heads;
  m.head_dim = head_dim(in, m.hidden, m.heads, "hidden_size", "num_attention_heads");
  m.ffn_hidden = size_or(in, "intermediate_size", 24576);
  m.vocab = size_or(in, "vocab_size", 50432);
  m.max_positions = size_or(in, "max_position_embeddings", 2048);
  const std::string act = in.string_or("hidden_act", "gelu");
  if (!gelu_activation(act, &m.activation))
    refuse(in, "hidden_act", "hidden_act " + act + " (gpt_neox)");
  const double pct = in.number_or("rotary_pct", 0.25);
  if (!(pct > 0.0 && pct <= 1.0)) in.fail("rotary_pct", "must be in (0, 1]");
  // GPTNeoXAttention: rotary_ndims = int(head_size * rotary_pct)
  m.rotary_dim = static_cast<int64_t>(static_cast<double>(m.head_dim) * pct);
  if (m.rotary_dim <= 0 || m.rotary_dim % 2 != 0)
    in.fail("rotary_pct", "gives " + std::to_string(m.rotary_dim) +
                              " rotary dimensions per head: must be even and positive");
  m.residual = in.boolean_or("use_parallel_residual", true) ? Residual::kParallel
                                                             : Residual::kSequential;
  m.mlp = sim::MlpKind::kGelu;
  m.norm = sim::NormKind::kLayerNorm;
  m.positions = sim::PosEmbedding::kRope;
  m.causal = true;
  m.tied_embeddings = in.boolean_or("tie_word_embeddings", false);
  m.qkv_bias = in.boolean_or("attention_bias", true);  // on query_key_value and dense
  // ModelConfig's linear_bias covers the attention output and the MLP; GPT-NeoX's MLP always has
  // biases, so attention_bias false (no published checkpoint) is refused rather than miscounted.
  if (!m.qkv_bias) refuse(in, "attention_bias", "attention_bias false (gpt_neox)");
  m.linear_bias = true;
  m.norm_bias = true;
  m.fused_qkv = true;
  m.attn_dropout = probability(in, "attention_dropout", 0.0);
  m.hidden_dropout = probability(in, "hidden_dropout", 0.0);
  m.embd_dropout = m.hidden_dropout;  // GPTNeoXModel.emb_dropout = Dropout(hidden_dropout)
  return m;
}

// FalconConfig (configuration_falcon.py), and the first generation's RWConfig (model_type
// "RefinedWebModel" for 7B, "RefinedWeb" for 40B; keys n_embed, n_layer, n_head, n_head_kv, which
// FalconConfig maps too). FalconForCausalLM: LayerNorm with bias, fused query_key_value, rotary
// (alibi refused), MQA (multi_query: one K/V head) or new_decoder_architecture's grouped K/V,
// parallel attention with one shared input_layernorm (or ln_attn and ln_mlp), a 4h GeLU MLP,
// biases only when `bias`, the LM head tied to the word embeddings.
sim::ModelConfig falcon(const ObjectReader& in, const std::string& type) {
  sim::ModelConfig m;
  m.family = "falcon";
  m.hidden = in.has("n_embed") ? size_or(in, "n_embed", 4544) : size_or(in, "hidden_size", 4544);
  m.layers = in.has("n_layer") ? size_or(in, "n_layer", 32) : size_or(in, "num_hidden_layers", 32);
  const std::string_view heads_key = in.has("n_head") ? "n_head" : "num_attention_heads";
  m.heads = size_or(in, heads_key, 71);
  m.head_dim = head_dim(in, m.hidden, m.heads, in.has("n_embed") ? "n_embed" : "hidden_size",
                      heads_key);
  if (in.boolean_or("alibi", false)) refuse(in, "alibi", "ALiBi position biases (" + type + ")");
  if (in.boolean_or("apply_residual_connection_post_layernorm", false))
    refuse(in, "apply_residual_connection_post_layernorm",
           "the residual taken after the LayerNorm (" + type + ")");
  const bool new_arch = in.boolean_or("new_decoder_architecture", false);
  const bool multi_query = in.boolean_or("multi_query", true);
  const bool parallel = in.boolean_or("parallel_attn", true);
  // FalconAttention: num_kv_heads = config.num_kv_heads if (new_decoder_architecture or not
  // multi_query) else 1; config.num_kv_heads defaults to num_attention_heads.
  if (new_arch || !multi_query) {
    kv_heads(in, m, in.has("n_head_kv") ? "n_head_kv" : "num_kv_heads");
  } else {
    m.kv_heads = 1;
  }
  m.ffn_hidden = in.has("ffn_hidden_size") ? size_or(in, "ffn_hidden_size", 1)
                                           : four_times(in, m.hidden, "hidden_size");
  m.vocab = size_or(in, "vocab_size", 65024);
  m.max_positions = size_or(in, "max_position_embeddings", 2048);
  const std::string act = in.string_or("activation", "gelu");
  if (!gelu_activation(act, &m.activation))
    refuse(in, "activation", "activation " + act + " (" + type + ")");
  if (new_arch) {
    // FalconDecoderLayer: ln_attn and ln_mlp when num_ln_in_parallel_attn == 2 (None counts as
    // 2), else one input_layernorm; new_decoder_architecture is always parallel.
    const int64_t lns = in.integer_or("num_ln_in_parallel_attn", 2);
    if (lns != 1 && lns != 2) in.fail("num_ln_in_parallel_attn", "must be 1 or 2");
    m.residual = lns == 2 ? Residual::kParallel : Residual::kParallelOneNorm;
  } else {
    m.residual = parallel ? Residual::kParallelOneNorm : Residual::kSequential;
  }
  m.mlp = sim::MlpKind::kGelu;
  m.norm = sim::NormKind::kLayerNorm;
  m.norm_bias = true;
  m.positions = sim::PosEmbedding::kRope;
  m.causal = true;
  m.tied_embeddings = in.boolean_or("tie_word_embeddings", true);
  m.qkv_bias = m.linear_bias = in.boolean_or("bias", false);
  m.fused_qkv = true;
  m.attn_dropout = probability(in, "attention_dropout", 0.0);
  m.hidden_dropout = probability(in, "hidden_dropout", 0.0);
  m.embd_dropout = 0.0;  // FalconModel has no embedding dropout
  // census12: multi_query without new_decoder_architecture indexes K/V (copies) and passes one
  // K/V head on; the rotary path never drops attention probabilities
  m.kv_index_split = !new_arch && multi_query;
  m.no_attention_dropout = true;
  m.eager_inplace = true;
  return m;
}

// Llama-shaped sizes (hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
// head_dim, intermediate_size, vocab_size, max_position_embeddings) with a class's defaults.
struct Defaults {
  int64_t hidden, layers, heads, kv, head_dim, ffn, vocab, positions;  // head_dim 0: h / a
};
void llama_sizes(const ObjectReader& in, sim::ModelConfig& m, const Defaults& d) {
  m.hidden = size_or(in, "hidden_size", d.hidden);
  m.layers = size_or(in, "num_hidden_layers", d.layers);
  m.heads = size_or(in, "num_attention_heads", d.heads);
  if (in.has("num_key_value_heads")) {
    kv_heads(in, m, "num_key_value_heads");
  } else {
    m.kv_heads = d.kv > 0 ? d.kv : m.heads;
    if (m.heads % m.kv_heads != 0)
      in.fail("num_key_value_heads", "missing: the default does not divide num_attention_heads");
  }
  if (in.has("head_dim") || d.head_dim > 0)
    m.head_dim = size_or(in, "head_dim", d.head_dim);
  else
    m.head_dim = head_dim(in, m.hidden, m.heads, "hidden_size", "num_attention_heads");
  m.ffn_hidden = size_or(in, "intermediate_size", d.ffn);
  m.vocab = size_or(in, "vocab_size", d.vocab);
  m.max_positions = size_or(in, "max_position_embeddings", d.positions);
  m.mlp = sim::MlpKind::kSwiglu;
  m.norm = sim::NormKind::kRmsNorm;
  m.norm_bias = false;
  m.positions = sim::PosEmbedding::kRope;
  m.causal = true;
  m.hidden_dropout = m.embd_dropout = 0.0;
}

// Gemma's MLP activation: GemmaMLP/Gemma2MLP/Gemma3MLP take ACT2FN[hidden_activation]: F.gelu,
// exact or tanh, one op saving its input either way. fam12: GemmaMLP.__init__
// (modeling_gemma.py @ 0125ac68) ignores hidden_act: when hidden_activation is None (gemma-7b's
// config has only hidden_act "gelu") it sets "gelu_pytorch_tanh" (PR 29402).
void gemma_activation(const ObjectReader& in, sim::ModelConfig& m, const std::string& type) {
  const std::string_view key = "hidden_activation";
  const std::string act = in.string_or(key, "gelu_pytorch_tanh");
  if (!gelu_activation(act, &m.activation))
    refuse(in, key, std::string(key) + " " + act + " (" + type + ")");
  m.gated_gelu = true;
}

// GemmaConfig, Gemma2Config, Gemma3TextConfig (configuration_gemma*.py). Gemma*ForCausalLM:
// RMSNorm with (1 + w) applied in fp32, GeGLU MLP, embeddings scaled by sqrt(hidden), head_dim
// given (256 for 7B/9B, != h/a), tied LM head. Gemma 2: pre and post norms around both
// sub-layers, attention and final logit soft-capping, sliding-window attention on every other
// layer (layer_idx % 2 == 0). Gemma 3: Gemma 2's norms, per-head q/k RMSNorms, five local layers
// to one global ((layer_idx + 1) % sliding_window_pattern != 0), local and global rotary tables.
sim::ModelConfig gemma(const ObjectReader& in, const std::string& type) {
  sim::ModelConfig m;
  m.family = type == "gemma3_text" ? "gemma3" : type;
  if (type == "gemma") {
    llama_sizes(in, m, {3072, 28, 16, 16, 256, 24576, 256000, 8192});
  } else if (type == "gemma2") {
    llama_sizes(in, m, {2304, 26, 8, 4, 256, 9216, 256000, 8192});
  } else {
    llama_sizes(in, m, {2304, 26, 8, 4, 256, 9216, 262208, 131072});
  }
  gemma_activation(in, m, type);
  m.eager_softmax_fp32 = true;  // fam12: eager_attention_forward, softmax in fp32 cast back
  m.embed_scale = true;
  m.norm_weight_fp32 = true;
  m.tied_embeddings = in.boolean_or("tie_word_embeddings", true);
  m.qkv_bias = m.linear_bias = in.boolean_or("attention_bias", false);
  if (m.linear_bias) refuse(in, "attention_bias", "attention biases (" + type + ")");
  m.attn_dropout = probability(in, "attention_dropout", 0.0);
  if (type == "gemma") return m;

  m.sub_norms = SubNorms::kPrePost;
  // Soft-capping: Gemma 2 defaults 50 and 30, Gemma 3 None (null reads as absent: none).
  const double attn_cap = in.number_or("attn_logit_softcapping", type == "gemma2" ? 50.0 : 0.0);
  const double final_cap = in.number_or("final_logit_softcapping", type == "gemma2" ? 30.0 : 0.0);
  if (attn_cap < 0) in.fail("attn_logit_softcapping", "must not be negative");
  if (final_cap < 0) in.fail("final_logit_softcapping", "must not be negative");
  m.attn_softcap = attn_cap;
  m.final_softcap = final_cap;
  m.sliding_window = size_or(in, "sliding_window", 4096);
  if (type == "gemma2") {
    m.global_every = 2;
  } else {
    m.global_every = size_or(in, "sliding_window_pattern", 6);
    m.qk_norm = QkNorm::kPerHead;
    m.local_rope_tables = true;
  }
  return m;
}

// Phi3Config (configuration_phi3.py). Phi3ForCausalLM: Llama's blocks with a fused qkv_proj
// (split by slicing: views) and a fused gate_up_proj (chunked: views), resid_pdrop after both
// sub-layers, embd_pdrop on the embeddings, untied head, rotary on partial_rotary_factor of each
// head.
sim::ModelConfig phi3(const ObjectReader& in) {
  sim::ModelConfig m;
  m.family = "phi3";
  llama_sizes(in, m, {3072, 32, 32, 0, 0, 8192, 32064, 4096});
  const std::string act = in.string_or("hidden_act", "silu");
  if (act != "silu") refuse(in, "hidden_act", "hidden_act " + act + " (phi3)");
  const double pct = in.number_or("partial_rotary_factor", 1.0);
  if (!(pct > 0.0 && pct <= 1.0)) in.fail("partial_rotary_factor", "must be in (0, 1]");
  const auto rd = static_cast<int64_t>(static_cast<double>(m.head_dim) * pct);
  if (rd <= 0 || rd % 2 != 0)
    in.fail("partial_rotary_factor", "gives " + std::to_string(rd) +
                                         " rotary dimensions per head: must be even and positive");
  m.rotary_dim = rd == m.head_dim ? 0 : rd;
  m.tied_embeddings = in.boolean_or("tie_word_embeddings", false);
  m.qkv_bias = m.linear_bias = false;
  m.fused_qkv = true;
  m.fused_gate_up = true;
  m.eager_softmax_fp32 = true;  // fam12: eager_attention_forward, softmax in fp32 cast back
  // sliding_window (default None): the window of every layer; under SDPA it makes HF pass a mask
  // once the sequence reaches it (Phi-3-mini-4k: 2047)
  if (in.has("sliding_window")) m.sliding_window = size_or(in, "sliding_window", 1);
  m.attn_dropout = probability(in, "attention_dropout", 0.0);
  m.hidden_dropout = probability(in, "resid_pdrop", 0.0);
  m.embd_dropout = probability(in, "embd_pdrop", 0.0);
  return m;
}

// Olmo2Config (configuration_olmo2.py). Olmo2ForCausalLM: Llama's projections with RMSNorm on the
// whole q and k projections (q_norm over a*d, k_norm over g*d), norms after each sub-layer and
// before its residual add (post_attention_layernorm, post_feedforward_layernorm; no pre-norms),
// Olmo2RMSNorm's weight applied in fp32 before the cast back, untied head.
sim::ModelConfig olmo2(const ObjectReader& in) {
  sim::ModelConfig m;
  m.family = "olmo2";
  llama_sizes(in, m, {4096, 32, 32, 0, 0, 11008, 50304, 2048});
  const std::string act = in.string_or("hidden_act", "silu");
  if (act != "silu") refuse(in, "hidden_act", "hidden_act " + act + " (olmo2)");
  if (in.boolean_or("attention_bias", false))
    refuse(in, "attention_bias", "attention biases (olmo2)");
  m.tied_embeddings = in.boolean_or("tie_word_embeddings", false);
  m.qkv_bias = m.linear_bias = false;
  m.sub_norms = SubNorms::kPost;
  m.qk_norm = QkNorm::kFull;
  m.norm_weight_fp32 = true;
  m.norm_weight_plain = true;  // census12: Olmo2RMSNorm `self.weight * hidden_states`
  m.eager_softmax_fp32 = true;  // fam12: eager_attention_forward, softmax in fp32 cast back
  m.attn_dropout = probability(in, "attention_dropout", 0.0);
  return m;
}

}  // namespace

bool is_decoder_family(std::string_view type) {
  return type == "gpt_neox" || type == "falcon" || type == "RefinedWebModel" ||
         type == "RefinedWeb" || type == "gemma" || type == "gemma2" || type == "gemma3_text" ||
         type == "phi3" || type == "olmo2";
}

sim::ModelConfig decoder_from_hf(const ObjectReader& in, const std::string& type) {
  if (type == "gpt_neox") return gpt_neox(in);
  if (type == "falcon" || type == "RefinedWebModel" || type == "RefinedWeb") return falcon(in, type);
  if (type == "gemma" || type == "gemma2" || type == "gemma3_text") return gemma(in, type);
  if (type == "phi3") return phi3(in);
  return olmo2(in);
}

}  // namespace sim_io::detail
