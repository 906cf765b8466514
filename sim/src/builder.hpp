// Internal: builds a Graph op by op with tensors (views share storages), then finalizes use
// counts, attribution and the static backward pass. Shared by graph_builder.cpp (whole model,
// persistent state) and graph_blocks.cpp (the op lists of docs/memory-model.md).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <vector>

#include "sim/graph.hpp"

namespace sim::detail {

// How the backward node of an op produces the gradient of one of its inputs.
enum class GradRule : uint8_t {
  kNone,  // no gradient flows to this input (indices, masks, constants)
  kNew,   // the backward kernel allocates a new gradient buffer
  kPass,  // the gradient of output `pass_from` is handed on as is (add, clone); if dtypes differ
          // the engine casts it, which allocates (torch/csrc/autograd/engine.cpp validate_outputs)
};

struct Tensor {
  int32_t storage = -1;
  int64_t bytes = 0;    // of this tensor (a view may be smaller than its storage)
  DType dtype = DType::kBF16;
  bool param = false;   // a leaf parameter: its gradient goes to the param's grad storage
  int32_t param_index = -1;
  int32_t col = 0, cols = 0, stride = 0;  // a column-slice view (TensorRef), for the executor
};

// A fixed-capacity vector kept inline: ops have at most a handful of inputs, outputs and saves,
// and building a 175B graph must not spend its time in malloc (bench/bench_engine.cpp).
template <typename T, int N>
class SmallVec {
 public:
  SmallVec() = default;
  SmallVec(std::initializer_list<T> v) {
    for (const T& x : v) push_back(x);
  }
  void push_back(const T& x) {
    if (n_ == N) throw std::logic_error("SmallVec capacity exceeded");
    a_[n_++] = x;
  }
  void clear() { n_ = 0; }
  int size() const { return n_; }
  bool empty() const { return n_ == 0; }
  T* begin() { return a_.data(); }
  T* end() { return a_.data() + n_; }
  const T* begin() const { return a_.data(); }
  const T* end() const { return a_.data() + n_; }
  T& operator[](int i) { return a_[i]; }
  const T& operator[](int i) const { return a_[i]; }
  T& back() { return a_[n_ - 1]; }

 private:
  std::array<T, N> a_{};
  int n_ = 0;
};

struct InputUse {
  int32_t tensor = -1;
  GradRule rule = GradRule::kNew;
  int32_t pass_from = 0;  // output index for kPass
};

struct OpDraft {
  Op op;
  bool root = false;             // the loss: its backward runs with an implicit unit gradient
  SmallVec<InputUse, 6> inputs;
  SmallVec<int32_t, 4> outputs;  // tensors; new storages are allocated, views are not
  SmallVec<int32_t, 6> saves;    // tensors
  bool fused_wgrad = false;      // Megatron gradient-accumulation fusion writes into main_grad
  // For the executor only (Graph::args): what the op computes and its sizes.
  Exec exec = Exec::kNone;
  std::array<int64_t, 6> dim{};
  float p = 0;
  // time3 (issue 11): bytes its kernels move through intermediates of their own (an unfused op's
  // kernels write tensors the next of them reads back), beyond its inputs, outputs and saves
  int64_t fwd_inner_bytes = 0, bwd_inner_bytes = 0;
};

struct Param {
  int32_t tensor = -1;
  int64_t bytes = 0;       // weight bytes on this rank
  int64_t numel = 0;
  int32_t grad_storage = -1;  // lazily allocated grad (or persistent main_grad)
};

class Builder {
 public:
  explicit Builder(Graph& g) : g_(g) {}

  // A new storage and its tensor, made by the op being built (producer set on add_op).
  int32_t fresh(int64_t bytes, DType dtype, const char* role, Category cat = Category::kActivations);
  // A tensor sharing `base`'s storage: columns [col, col + cols) of its rows of `stride`.
  int32_t view(int32_t base, int64_t bytes, DType dtype, int32_t col = 0, int32_t cols = 0,
               int32_t stride = 0);
  // A persistent parameter (weights category) of `bytes` on this rank.
  int32_t param(int64_t numel, DType dtype, const char* role);
  // A persistent non-parameter buffer (e.g. the causal mask); no gradient.
  int32_t buffer(int64_t bytes, DType dtype, const char* role);

  // Adds an op; tensors in `outputs` that are fresh get this op as producer.
  int32_t add_op(OpDraft draft);

  void model_level(int32_t tensor) { model_level_.push_back(tensors_[tensor].storage); }
  // The training loop holds this tensor until the step ends (batch tensors, the loss).
  void hold_until_step_end(int32_t tensor) { step_end_holds.push_back(tensors_[tensor].storage); }
  // Autocast's weight-cast cache holds this tensor until the forward pass ends.
  void autocast_cache(int32_t tensor) { autocast_cached_.push_back(tensors_[tensor].storage); }
  // hfimpl: the model's forward returns this tensor (HF's logits): held until forward ends.
  void hold_until_forward_end(int32_t tensor) { forward_held_.push_back(tensors_[tensor].storage); }
  // The causal-mask buffer (bool [s, s]), made once, persistent.
  int32_t causal_mask(int64_t bytes);
  // Megatron's global memory buffer (workspace category), made once, persistent: the largest
  // request of the rank (parallel_state.GlobalMemoryBuffer grows to the largest).
  int32_t global_buffer(int64_t bytes, DType dtype);
  // Marks the last added op as part of core attention (selective recompute's region).
  void mark_core_attention_last() { drafts_.back().op.core_attention = true; }
  // moe: marks a parameter tensor as a routed expert's (Storage::expert).
  void mark_expert(int32_t t) { g_.storages[tensors_[t].storage].expert = true; }
  // moetp (issue 13): the ops added since op `first` run on the shared experts' own stream
  // (Op::moe_overlap); op_count() is the next op's index.
  int32_t op_count() const { return static_cast<int32_t>(drafts_.size()); }
  void mark_moe_overlap_from(int32_t first) {
    for (size_t i = static_cast<size_t>(first); i < drafts_.size(); ++i) drafts_[i].op.moe_overlap = true;
  }
  void set_labels(int32_t t) { labels_ = t; }
  int32_t labels() const { return labels_; }
  void set_rope_tables(int32_t t) { rope_tables_ = t; }
  int32_t rope_tables() const { return rope_tables_; }
  // The loss: the root of backward; held until the step ends.
  void set_loss(int32_t t);

  const Tensor& tensor(int32_t t) const { return tensors_[t]; }
  int32_t storage_of(int32_t t) const { return tensors_[t].storage; }
  int32_t current_block = -1;
  bool persistent_grads = false;  // bf16-mixed: fp32 main_grad buffers exist before the step
  bool ignore_transients = false; // paper profile
  bool deterministic_fill = false;  // time7 (issue 11): --deterministic (graph_builder.cpp)
  bool record_exec = false;       // fill Graph::args and Graph::param_grads (build_graph_exec)
  int32_t famdec_mask = -1;       // famdec: the 4-D mask HF passes to SDPA (blocks_famdec.cpp)
  int32_t famdec_local_rope = -1;  // fam12: Gemma 3's local cos/sin pair (its sliding layers')
  int32_t hf_mask = -1;           // hfimpl: HF's model-level attention mask (blocks_hfmask.cpp)
  // feat (LoRA): param() makes frozen weights (persistent, no gradient, no optimizer state).
  bool freeze_params = false;

  // Capacity for about `ops` ops (and their tensors and storages).
  void reserve(size_t ops) {
    drafts_.reserve(ops);
    tensors_.reserve(ops * 2);
    persistent_.reserve(ops * 2);
    g_.storages.reserve(ops * 4);
  }
  // Use counts, attribution, the backward pass; fills the Graph. Call once.
  void finalize();

  std::vector<Param> params;
  std::vector<int32_t> step_end_holds;  // storages the training loop keeps until step end
  // --- lora6 (issue 13): param() marks what it makes as a routed expert's (Storage::expert)
  // while this is set: the frozen base weights under LoRA and the experts' own adapters too
  // (blocks_moe.cpp hf_swiglu sets it around an expert's linears) ---
  bool expert_params = false;
  // --- end lora6 ---

 private:
  Graph& g_;
  std::vector<Tensor> tensors_;
  std::vector<OpDraft> drafts_;
  std::vector<int32_t> model_level_;  // storages attributed outside the blocks
  std::vector<int32_t> autocast_cached_;
  std::vector<int32_t> forward_held_;  // hfimpl
  std::vector<bool> persistent_;      // per storage
  int32_t labels_ = -1;
  int32_t rope_tables_ = -1;
  int32_t mask_ = -1;
  int32_t global_buffer_ = -1;
  int32_t loss_op_ = -1;
};

// Per-rank shapes and dtypes of one build (docs/memory-model.md "Shapes and dtypes").
struct Dims {
  const ModelConfig* model = nullptr;
  Profile profile = Profile::kPytorch;
  Precision precision = Precision::kBf16Amp;
  AttentionKind attention = AttentionKind::kStandard;
  const ImplSpec* impl = nullptr;  // the code base modeled; nullptr under the paper profile
  bool amp = false;        // autocast regime (bf16-amp, fp16-amp)
  bool paper = false;
  int64_t b = 1, s = 1;    // micro-batch, sequence
  int64_t t = 1;           // tensor-parallel ranks
  bool sp = false;         // sequence parallel
  int64_t s_local = 1;     // sequence in non-tensor-parallel regions (s / t with SP)
  int64_t h = 0, a = 0, g = 0, d = 0, f = 0, v = 0;  // per rank: heads, kv heads, MLP width, vocab
  int64_t v_full = 0;      // padded vocabulary, all ranks
  DType param_dt = DType::kF32;  // parameters
  DType half_dt = DType::kBF16;  // matmul outputs
  DType resid_dt = DType::kF32;  // the residual stream
  double p_attn = 0, p_hidden = 0, p_embd = 0;
  bool fused_qkv = true;   // GPT: one Q/K/V projection split into views; Llama/BERT: three
  bool eager_copies = false;  // eager attention's torch.matmul copies permuted operands (HF)
  // implmt (megatron, torchtitan) variants, from the ImplSpec (sim/impl.hpp)
  bool vocab_parallel_ce = false;  // Megatron's vocab_parallel_cross_entropy (else float CE)
  bool megatron_softmax = false;   // FusedScaleMaskSoftmax (EagerSoftmax::kMegatronFused)
  bool qk_global_buffer = false;   // baddbmm's persistent [b*np, s, s] input buffer
  // --- implhf ---
  double p_classifier = 0;  // dropout before a classification head's classifier
  // --- end implhf ---
  bool padding = false;     // hfimpl: --padding (HF's attention mask; sim/src/blocks_hfmask.cpp)

  // moe (sim/src/blocks_moe.cpp)
  int64_t ep = 1;              // expert-parallel ranks
  double moe_imbalance = 1.0;  // the hottest expert's tokens over the mean
  double moe_aux_loss_coeff = 0.0;  // mla5: Megatron's load-balancing loss coefficient
  double moe_capacity = 0;     // capacity factor (drop and pad); 0: dropless
  int64_t layer0 = 0;          // the model layer of this stage's block 0 (dense-first models)
  // --- feat (issue 13): LoRA / QLoRA (sim/src/lora.cpp) ---
  int64_t lora_rank = 0;      // > 0: every base parameter frozen, adapters on the targets
  uint32_t lora_targets = 0;  // LoraTarget bits (resolved)
  bool qlora = false;         // frozen linears in 4-bit NF4 (bitsandbytes Linear4bit)
  int64_t cp = 1;             // context parallel: s is this rank's s / cp (sim/src/cp.cpp)
  Fp8Recipe fp8 = Fp8Recipe::kOff;  // FP8 linears (sim/src/fp8.cpp)
  // --- end feat ---
  bool triton_norm = false;  // time5 (issue 11): --norm-kernel triton (sim/src/norm_kernels.cpp)
  bool compile = false;      // fp8sac (issue 10): --compile on (torchao's amax fused: fp8.cpp)
  bool grad_accum_fusion = true;  // time6 (issue 11): --grad-accum-fusion (TrainSetup)
  // feat3 (issue 13): bitsandbytes' bnb_4bit_compute_dtype (the 4-bit matmuls' dtype; make_dims)
  DType qlora_compute_dt = DType::kBF16;
  // polish: the device's streaming multiprocessors (Device::sm_count), for kernels whose buffers
  // are per SM (the Triton RMSNorm's backward, sim/src/norm_kernels.cpp)
  int64_t sm_count = 0;
  // etp (issue 13): expert-tensor-parallel ranks (Megatron's --expert-tensor-parallel-size; the
  // dispatcher's all-gather/reduce-scatter group; blocks_moe.cpp megatron_alltoall)
  int64_t etp = 1;
  // --- te_norm (issue 10) ---
  bool ce_loss_fusion = false;  // Megatron's --cross-entropy-loss-fusion (build_head)
  // --- end te_norm ---
  // --- moetp (issue 13): --moe-shared-expert-overlap (blocks_moetp.cpp) ---
  bool shared_overlap = false;
  // --- end moetp ---

  int64_t n_local() const { return s_local * b; }  // tokens in non-TP regions
  int64_t n_full() const { return s * b; }         // tokens in TP regions
};

// `labels`: whether this rank loads the labels (it computes the loss: not a pipeline's first
// stage when p > 1, Megatron's get_batch).
int32_t build_embedding(Builder& bld, const Dims& dm, int32_t* word_table, bool labels = true);
int32_t build_block(Builder& bld, const Dims& dm, int32_t x, int32_t block);
void build_head(Builder& bld, const Dims& dm, int32_t x, int32_t word_table);
// Pipeline stage boundaries (Megatron-core p2p_communication): a stage after the first receives
// its input activations (loading the labels too if it is the last stage); a stage before the
// last sends its output, and its backward starts from the gradient received for that output.
int32_t build_stage_input(Builder& bld, const Dims& dm, bool labels);
void build_stage_output(Builder& bld, const Dims& dm, int32_t x);

// --- implhf (blocks_heads.cpp) ---
// The labels the training loop loads for the model's head: int64 token ids [tokens] for the LM
// and token-classification heads; [b] class ids, or float targets for a regression or
// multi-label head.
struct LabelShape {
  int64_t numel = 0;
  DType dtype = DType::kI64;
};
LabelShape label_shape(const Dims& dm);
// A classification head (ModelConfig::head) after the last block: BertPooler or the last-token
// score, or a token classifier; its logits and loss.
void build_classification_head(Builder& bld, const Dims& dm, int32_t x);
// --- end implhf ---

}  // namespace sim::detail
