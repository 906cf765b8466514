// The architecture of a transformer language model, as a value. Loaders (sim_io) fill it from
// actsim's own model JSON or a HuggingFace config.json; validate() checks it before any use.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sim {

// h→f GeLU→h, or SwiGLU (gate, up; down). famenc (T5): kRelu, h→f ReLU→h (T5DenseActDense);
// kGeglu, act(gate) * up → down with the GeLU `activation` names (T5DenseGatedActDense,
// feed_forward_proj "gated-gelu": gelu_new).
enum class MlpKind : uint8_t { kGelu, kSwiglu, kRelu, kGeglu };
enum class NormKind : uint8_t { kLayerNorm, kRmsNorm };
// learned table, rotary (no weights), or famenc's T5 relative position bias: a [buckets, heads]
// table per stack, looked up once in each stack's first block and added to every block's scores.
enum class PosEmbedding : uint8_t { kLearned, kRope, kRelativeBias };
// The GeLU an HF config names (activation_function, hidden_act): transformers' ACT2FN.
enum class Activation : uint8_t {
  kGelu,      // "gelu": F.gelu, one op saving its input (and actsim model files' "gelu")
  kGeluTanh,  // "gelu_pytorch_tanh": F.gelu(approximate="tanh"), one op saving its input
  kGeluNew,   // "gelu_new": NewGELUActivation, pointwise Python ops (activations.py)
  kGeluFast,  // "gelu_fast": FastGELUActivation, pointwise ops; simulated as one op (not modeled)
};

// --- implhf: the task head an HF config's `architectures` names (load_hf.cpp, hf_heads.cpp) ---
enum class Head : uint8_t {
  kCausalLm,    // next-token logits over the vocabulary (GPT2LMHeadModel, LlamaForCausalLM, ...)
  kMaskedLm,    // BERT's MLM head: transform (dense, GeLU, LayerNorm) + tied decoder with bias
  kSequenceClassification,  // one label per sequence: logits [b, num_labels] (SeqPool says how)
  kTokenClassification,     // one label per token: dropout + classifier, logits [b, s, num_labels]
};
// How a sequence-classification head reduces the sequence to one vector.
enum class SeqPool : uint8_t {
  kFirstTokenPooler,  // BertPooler: dense h->h + tanh on hidden_states[:, 0], then dropout
  kLastToken,         // GPT2ForSequenceClassification: score on every token, then the logits
                      // of each row's last non-pad token (advanced indexing); the index from
                      // `torch.eq(input_ids, pad).int().argmax(-1) - 1`
  kLastTokenProduct,  // Llama/Mistral/Qwen2ForSequenceClassification: the same, the index from
                      // `(arange(s) * (input_ids != pad).to(int32)).argmax(-1)`
};
// The classification loss (HF's problem_type; transformers picks it from num_labels and the
// labels' dtype when the config leaves it unset).
enum class ClassLoss : uint8_t {
  kCrossEntropy,  // single_label_classification (num_labels > 1, integer labels)
  kMse,           // regression (num_labels == 1)
  kBceWithLogits, // multi_label_classification (float labels [b, num_labels])
};
// --- end implhf ---

struct ModelConfig {
  std::string name;    // as the user named it: a file stem ("gpt2-small") or a path
  std::string source;  // file it was read from; errors name it
  std::string family;  // model_type of the allow-list: "gpt2", "llama", "bert", "megatron-gpt", ...

  int64_t layers = 0;       // transformer blocks
  int64_t hidden = 0;       // h
  int64_t heads = 0;        // a (query heads)
  int64_t kv_heads = 0;     // g; a for MHA, fewer for GQA/MQA
  int64_t head_dim = 0;     // d; h / a unless the config says otherwise (Gemma, Qwen3)
  int64_t ffn_hidden = 0;   // f: MLP inner width (4h for GPT; per projection for SwiGLU)
  int64_t vocab = 0;        // v as in the config (padded later for vocab-parallel TP)
  int64_t max_positions = 0;  // longest sequence the config allows (learned positions)
  int64_t type_vocab = 0;     // BERT token-type embeddings; 0 when absent

  MlpKind mlp = MlpKind::kGelu;
  Activation activation = Activation::kGelu;  // the GeLU variant, when mlp is kGelu
  NormKind norm = NormKind::kLayerNorm;
  PosEmbedding positions = PosEmbedding::kLearned;
  bool post_norm = false;        // BERT: norm after each residual add (and on the embeddings)
  bool causal = true;            // decoder (causal mask) or encoder (bidirectional)
  bool tied_embeddings = true;   // output projection shares the word-embedding table
  bool qkv_bias = true;          // bias on the fused Q/K/V projection
  bool linear_bias = true;       // bias on the attention output projection and the MLP
  bool norm_bias = true;         // LayerNorm has a bias; RMSNorm never does

  double attn_dropout = 0.0;    // on the softmax output
  double hidden_dropout = 0.0;  // after the attention projection and after the MLP
  double embd_dropout = 0.0;    // after the embeddings

  // --- famdec (issue 12): decoder families (GPT-NeoX, Falcon, Gemma 1/2/3, Phi-3, OLMo 2) ---
  // How the two sub-layers meet the residual stream.
  enum class Residual : uint8_t {
    kSequential,       // x + attn(norm1(x)), then + mlp(norm2(.))
    kParallel,         // x + attn(norm1(x)) + mlp(norm2(x)) (GPT-NeoX use_parallel_residual;
                       // Falcon's new_decoder_architecture with ln_attn and ln_mlp)
    kParallelOneNorm,  // x + attn(ln(x)) + mlp(ln(x)): one shared LayerNorm (Falcon-7B)
  };
  // Norms around each sub-layer beyond the pre-norms.
  enum class SubNorms : uint8_t {
    kPre,      // pre-norm only (GPT-2, Llama, ...)
    kPrePost,  // Gemma 2/3: input, post_attention, pre_feedforward, post_feedforward (4 per block)
    kPost,     // OLMo 2: x + norm(attn(x)); x + norm(mlp(x)) (2 per block, no pre-norms)
  };
  enum class QkNorm : uint8_t {
    kNone,
    kPerHead,  // Gemma 3: RMSNorm(head_dim) on each head of q and k
    kFull,     // OLMo 2: RMSNorm over the whole q (a*d) and k (g*d) projection
  };
  Residual residual = Residual::kSequential;
  SubNorms sub_norms = SubNorms::kPre;
  QkNorm qk_norm = QkNorm::kNone;
  int64_t rotary_dim = 0;         // rotary width per head; 0: all of head_dim (NeoX rotary_pct)
  bool embed_scale = false;       // Gemma: embeddings multiplied by sqrt(hidden)
  bool norm_weight_fp32 = false;  // RMSNorm applies its weight in fp32, then casts to the input
                                  // dtype (Gemma's (1 + w), OLMo 2), not Llama's cast-then-weight
  bool gated_gelu = false;        // GeGLU: mlp kSwiglu with `activation` on the gate (Gemma)
  bool fused_qkv = false;         // one fused Q/K/V projection (NeoX, Falcon, Phi-3)
  bool fused_gate_up = false;     // one fused gate/up projection, chunked (Phi-3)
  double attn_softcap = 0.0;      // Gemma 2: cap * tanh(scores / cap); 0: none
  double final_softcap = 0.0;     // Gemma 2: the same on the logits
  int64_t sliding_window = 0;     // local attention window; 0: none
  int64_t global_every = 0;       // with a window: every k-th layer is global (Gemma 2: 2,
                                  // Gemma 3: 6); 0: every layer is local
  bool local_rope_tables = false; // Gemma 3: a second cos/sin pair (rope_local_base_freq)
  // --- famenc (issue 12): T5 (encoder-decoder) and ViT ---
  // T5: `layers` counts every block, the encoder's first; the last `decoder_layers` of them are
  // decoder blocks (self-attention, cross-attention to the encoder output, MLP). 0: one stack.
  int64_t decoder_layers = 0;
  int64_t relative_buckets = 0;   // T5 relative_attention_num_buckets (kRelativeBias)
  bool scale_tied_head = false;   // T5: sequence_output * d_model**-0.5 before a tied lm_head
  bool sdpa = true;               // the HF modeling code has an SDPA path (T5Attention has none)
  // ViT: the patch embedding (a conv of patch x patch over `channels`), the class token, and the
  // classifier on it; tokens = (image_size / patch_size)^2 + 1 = max_positions. 0: not an image model.
  int64_t image_size = 0, patch_size = 0, channels = 0;
  int64_t num_labels = 0;         // the classifier's classes (ViT: len(id2label))

  // --- moe (issue 13): mixture of experts and multi-head latent attention ---
  // Routed experts replace the MLP of every block from `dense_layers` on (DeepSeek's
  // first_k_dense_replace; 0 for Mixtral and Qwen-MoE). Each expert is a SwiGLU MLP of width
  // expert_ffn; experts = 0 means a dense model.
  int64_t experts = 0;             // E, routed experts per MoE block
  int64_t experts_per_token = 0;   // k of the router's top-k
  int64_t expert_ffn = 0;          // each routed expert's SwiGLU width
  int64_t shared_ffn = 0;          // the shared experts' SwiGLU width, all of them (0: none)
  bool shared_gate = false;        // Qwen2-MoE: sigmoid(Linear(h, 1)) scales the shared expert
  bool norm_topk = false;          // the top-k weights renormalized to sum to one (Mixtral)
  // The router's auxiliary load-balancing loss is computed (HF: output_router_logits, then
  // load_balancing_loss_func over every layer's logits; DeepSeek: aux_loss_alpha > 0).
  bool aux_loss = false;
  int64_t dense_layers = 0;        // leading blocks with a dense MLP of width ffn_hidden
  // MLA (DeepSeek-V2/V3, kv_lora_rank > 0): queries through an optional low-rank q_a/q_b pair
  // (q_lora_rank, 0: one q_proj), keys and values from a compressed latent of kv_lora_rank with
  // its own RMSNorm, a decoupled rotary key of qk_rope_dim shared by the heads; head_dim is
  // qk_nope_dim + qk_rope_dim (queries and keys) and v_head_dim the values'.
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_rope_dim = 0;
  int64_t v_head_dim = 0;
  // --- implhf: the head (HF `architectures`; actsim model files and other loaders: LM) ---
  Head head = Head::kCausalLm;  // BERT's loader sets kMaskedLm
  SeqPool seq_pool = SeqPool::kLastToken;      // kSequenceClassification only
  ClassLoss class_loss = ClassLoss::kCrossEntropy;  // the classification heads only
  // num_labels: famenc's field above (HF num_labels, len(id2label)), shared by these heads
  bool classifier_bias = true;   // the classifier/score linear's bias
  double classifier_dropout = 0.0;  // before the classifier (HF classifier_dropout or its default)
  // --- end implhf ---
  // --- census12 (issue 12): Olmo2RMSNorm multiplies its weight in directly, `(w * x).to(dt)`
  // (modeling_olmo2.py); Gemma's `x * (1.0 + w.float())` makes a [width] weight term first. The
  // harness/census.py olmo2 cases found the term where OLMo 2 has none.
  bool norm_weight_plain = false;  // with norm_weight_fp32: no (1 + w) term (OLMo 2)
  // Falcon's multi_query layout (FalconAttention._split_heads, modeling_falcon.py): key and value
  // are indexed out of the fused output (`fused_qkv[..., [-2], :]`: copies of one head, each
  // IndexBackward0 keeping its int64 index), and the one K/V head reaches eager attention's
  // torch.matmul (which broadcasts it over the query heads: no repeat_kv) and SDPA as it is.
  bool kv_index_split = false;
  // Falcon's rotary attention applies no dropout to the probabilities (eager: none; SDPA:
  // dropout_p=0.0); attention_dropout is used only on its ALiBi path.
  bool no_attention_dropout = false;
  // Falcon's eager code works in place: `attention_scores /= math.sqrt(head_dim)` and
  // `mlp_output += attention_output` make no new tensors.
  bool eager_inplace = false;
  // --- hfimpl (issue 10): the masks of HF's modeling code, read only under an implementation
  // whose ImplSpec::model_masks is set (hf; sim/src/blocks_hfmask.cpp) ---
  // GPT2Attention.__init__ (modeling_gpt2.py @ c44b2d99) registers `bias`, a bool
  // [1, 1, n_positions, n_positions] buffer per attention module, under every
  // attn_implementation (GPT2SdpaAttention subclasses it): max_positions^2 bytes per layer.
  bool causal_buffer_per_layer = false;
  // LlamaModel._update_causal_mask (modeling_llama.py @ 5dd4a635; Mistral, Qwen2 the same):
  // eager attention adds a 4-D additive mask in the embeddings' dtype, built once per forward
  // ([s, s] expanded to [b, 1, s, s]; a full [b, 1, s, s] clone when a padding mask is given),
  // instead of a bool causal buffer; padding adds GPT-2's / BERT's [b, 1, 1, s] mask otherwise.
  bool additive_causal_mask = false;
  // exec10: GPT2LMHeadModel.forward (modeling_gpt2.py @ c44b2d9976e8) computes its own loss:
  // `shift_logits = lm_logits[..., :-1, :].contiguous()` (b (s - 1) rows in the logits' dtype) and
  // `shift_labels = labels[..., 1:].contiguous()`, then CrossEntropyLoss. Llama @ 5dd4a635
  // (ForCausalLMLoss) pads and shifts the labels instead and upcasts the whole logits.
  bool shift_logits_copy = false;
  // exec10: GPT2Attention._attn (modeling_gpt2.py @ c44b2d9976e8) scales by dividing by a 0-dim
  // device tensor, `attn_weights / torch.full([], d ** 0.5, dtype=attn_weights.dtype)`, which
  // DivBackward0 saves (one element per layer until its backward; census: gpt2-hf cases).
  bool scale_by_tensor = false;
  // BertModel.forward (modeling_bert.py @ 8ec58104): get_extended_attention_mask makes a
  // [b, 1, 1, s] additive mask from ones when no mask is passed, which every eager
  // BertSelfAttention adds to its scores.
  bool extended_mask_always = false;
  // --- end hfimpl ---
  // --- fam12 (issue 12): read only under an implementation whose ImplSpec::model_softmax is set
  // (hf). HF's eager_attention_forward (modeling_llama.py @ 5dd4a635; the copies in Mistral,
  // Qwen2, Gemma 1/2/3, Phi-3, OLMo 2, Mixtral, Qwen2-MoE): softmax(w, dim=-1,
  // dtype=torch.float32).to(query.dtype). With 16-bit scores and no autocast (bf16-mixed) the
  // probabilities are fp32 (saved by the softmax) and a 16-bit copy goes on to dropout and av.
  bool eager_softmax_fp32 = false;
  // --- end fam12 ---
  // --- etp (issue 13): DeepSeek's router options (HF DeepseekV2Config: topk_method
  // "group_limited_greedy" with n_group and topk_group, routed_scaling_factor), modeled under
  // megatron as --moe-router-num-groups/--moe-router-group-topk and
  // --moe-router-topk-scaling-factor (blocks_moe.cpp megatron_router) ---
  int64_t router_groups = 0;      // expert groups of group-limited routing (0: plain top-k)
  int64_t router_group_topk = 0;  // groups each token may pick from
  double routed_scaling = 1.0;    // the top-k weights' scaling factor
  // --- end etp ---
};

// famenc: the encoder blocks of an encoder-decoder model (all of them otherwise), and whether the
// model is a vision transformer.
inline int64_t encoder_layers(const ModelConfig& m) { return m.layers - m.decoder_layers; }
inline bool is_vision(const ModelConfig& m) { return m.image_size > 0; }

inline bool is_moe(const ModelConfig& m) { return m.experts > 0; }  // moe
inline bool is_mla(const ModelConfig& m) { return m.kv_lora_rank > 0; }  // moe
// Whether block `layer` (0-based, of the whole model) has routed experts.
inline bool moe_block(const ModelConfig& m, int64_t layer) {  // moe
  return m.experts > 0 && layer >= m.dense_layers;
}
// implhf: whether the head is a classification head (no vocabulary-sized logits).
inline bool classification_head(const ModelConfig& m) {
  return m.head == Head::kSequenceClassification || m.head == Head::kTokenClassification;
}
// implhf: "causal-lm", "masked-lm", "sequence-classification", "token-classification".
std::string_view head_name(Head head);

// The most blocks a model may have: the graph holds every block's ops (about 50 each), so a
// config with a billion layers must be refused, not allocated. No published model has more than
// a few hundred.
inline constexpr int64_t kMaxLayers = 16384;

// Throws ConfigError naming model.source and the field for zero, negative or inconsistent
// sizes (heads not dividing hidden without head_dim, kv_heads not dividing heads, ...).
void validate(const ModelConfig& model);

// Parameters of the whole model (not per rank), checked against overflow.
int64_t parameter_count(const ModelConfig& model);
// Of those, the one-dimensional ones (biases, norm weights): the no-decay group of nanoGPT's
// configure_optimizers and of HF's Trainer.
int64_t vector_parameter_count(const ModelConfig& model);

}  // namespace sim
