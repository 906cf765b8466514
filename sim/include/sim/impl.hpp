// Implementations (DESIGN.md §3 "Profiles and implementations"): the named code bases whose op
// sequences actsim simulates. An implementation is data: one ImplSpec row per code base
// (sim/src/impl/<name>.cpp), naming the upstream code and commit it was read from, the families
// it supports, its defaults (precision regime, attention kernel, dropout, checkpoint API) and,
// per op site, which variant of the op that code runs. The block builder switches on variants,
// never on the implementation, so adding a code base is one more row (sim/src/impl/registry.cpp)
// and, only if it runs an op no other code runs, one more variant.
//
// docs/memory-model.md holds, per implementation, every op row with the upstream file and
// commit it was read from; tests/test_impl.cpp holds the rows against the built graphs.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "sim/model.hpp"

namespace sim {

enum class Impl : uint8_t { kHf, kTorchtitan, kMegatron, kNanogpt };

enum class Precision : uint8_t;
enum class AttentionKind : uint8_t;
enum class KernelChoice : uint8_t;  // sim/graph.hpp
enum class Optimizer : uint8_t;     // sim/setup.hpp (implver)
struct TrainSetup;

// How Q, K and V are projected.
enum class QkvVariant : uint8_t {
  kArchitecture,  // as the model's own modeling code: fused (GPT-2's c_attn) or three (Llama, BERT)
  kFused,         // always one projection, split into views (Megatron's linear_qkv, nanoGPT's c_attn)
  kSeparate,      // always three projections (torchtitan v0.2's wq, wk, wv)
};

// How eager (non-flash) attention multiplies: torch.matmul on permuted [b, a, s, d] views folds
// them to [b*a, s, d] and copies the non-contiguous operands, saving the copies (HF, nanoGPT's
// slow path); Megatron's baddbmm/bmm on strided views copies nothing.
enum class EagerMatmul : uint8_t { kCopies, kStrided };

// Which dropout probabilities apply when --dropout is not given.
enum class DropoutDefault : uint8_t {
  kConfig,  // the model config's (HF: the config.json probabilities)
  kZero,    // the code base trains without dropout by default (nanoGPT, torchtitan)
};

// The activation-checkpoint API: torch.utils.checkpoint(use_reentrant=False), which recomputes
// up to the last op that saves anything, or a reentrant checkpoint (Megatron's
// CheckpointFunction, torch.utils.checkpoint(use_reentrant=True)), which replays the whole
// segment and keeps its output until the segment's backward ends.
enum class CheckpointApi : uint8_t { kNonReentrant, kReentrant };

// --- time3 (issue 11): the kernels an eager rotary embedding runs ---
enum class RopeKernels : uint8_t {
  // HF's q*cos + rotate_half(q)*sin, timed as one pass over q, the tables and the output (the
  // pre-time3 model, kept: its five kernels are not yet counted)
  kOnePass,
  // torchtitan's apply_rotary_emb: view_as_complex(x.float()) * freqs_cis, then
  // view_as_real(...).type_as(x): three kernels each way, through an fp32 copy of x
  kComplexFp32,
};
// --- end time3 ---

// --- implmt (megatron, torchtitan): op variants of these two code bases ---

// The language-model loss.
enum class LossVariant : uint8_t {
  // logits.float() then F.cross_entropy = log_softmax (saves its fp32 output) + nll_loss; the
  // backward makes two fp32 vocab-sized gradients (HF, nanoGPT, torchtitan's pred.float()).
  kFloatCrossEntropy,
  // Megatron-core vocab_parallel_cross_entropy at every tp (tensor_parallel/cross_entropy.py):
  // one fp32 copy of the logits made into the softmax in place and saved; the backward writes
  // the gradient into it in place.
  kVocabParallel,
};

// Eager attention's softmax over 16-bit scores when the parameters are 16-bit (bf16-mixed).
enum class EagerSoftmax : uint8_t {
  // The causal mask applied out of place (torch.where / masked_fill), then softmax (HF).
  kMaskThenSoftmax,
  // Megatron's FusedScaleMaskSoftmax (fusions/fused_softmax.py): for 16 < s <= 4096 the fused
  // scaled_upper_triang_masked_softmax kernel (no mask tensor, 16-bit probabilities saved);
  // otherwise masked_fill then torch softmax in fp32 (attention_softmax_in_fp32), cast back.
  kMegatronFused,
};

// --- implhf (nanoGPT and HF variants) ---

// How eager attention scales its scores.
enum class AttnScale : uint8_t {
  kInMatmul,   // inside the score GEMM (baddbmm's alpha, Megatron; the paper's)
  kMulScalar,  // a separate multiply by a Python float (nanoGPT model.py:67
               // `(q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))`): a new [b, a, s, s]
               // tensor; MulBackward0 saves only the wrapped scalar (a host-side double on CUDA)
};

// The causal mask of eager attention.
enum class CausalMaskKind : uint8_t {
  kSharedBool,  // one bool [s, s] buffer for the model, `torch.where(mask, scores, -inf)`
  kBlockF32Eq,  // nanoGPT's slow path (model.py:49-50, 68): each block registers a persistent
                // fp32 buffer [1, 1, block_size, block_size] (block_size = the config's
                // positions); every forward computes `bias[:, :, :T, :T] == 0` (a new bool
                // [s, s]), which `masked_fill` saves
};

// How long the training loop keeps the logits.
enum class LogitsLifetime : uint8_t {
  kLoss,  // freed once the loss no longer needs them (HF's Trainer returns only the loss)
  kStep,  // held until the step ends: nanoGPT train.py:299-314 keeps `logits` through backward
          // and the optimizer step (its `logits, loss = model(X, Y)`)
};

// The optimizer's parameter groups (torch's foreach kernels run per group, so their temporaries
// are sized by the largest group).
enum class ParamGroups : uint8_t {
  kOne,          // one group of every parameter
  kDecayNoDecay, // weight decay on matrices, none on biases and norm weights: nanoGPT model.py
                 // configure_optimizers (dim >= 2), HF Trainer get_decay_parameter_names
};

// torch's foreach Adam/AdamW (_multi_tensor_adam[w]): the temporaries per parameter of a group.
enum class ForeachEps : uint8_t {
  kInPlace,     // torch >= 2.1 adam.py: sqrt(v) then `_foreach_add_(exp_avg_sq_sqrt, eps)`: 4 B
  kOutOfPlace,  // torch 1.13 adamw.py:418-420: sqrt(v), then `denom = _foreach_add(sqrt, eps)`,
                // both alive at the addcdiv: 8 B
};

// The GeLU of the MLP.
enum class GeluVariant : uint8_t {
  kFused,   // one op saving its input whatever the config names (nn.GELU; Megatron's)
  kConfig,  // as the config's activation function names it (HF ACT2FN: gelu_new is pointwise ops)
};

// --- feat2 (issue 13): how a code base's ring attention (--cp) moves K and V ---
enum class CpRing : uint8_t {
  // Transformer Engine's AttnFuncWithCPAndKVP2P (Megatron-core's default cp_comm_type "p2p"):
  // cp - 1 send/recv steps of one KV chunk, each overlapping a step's attention (sim/src/cp.cpp)
  kTeP2p,
  // torch.distributed.tensor.experimental context_parallel (torchtitan's
  // --experimental.context_parallel_rotate_method default "allgather"): one all-gather of K and
  // V per forward and per backward, fp32 merges of each step's output, dK/dV rotated in fp32
  kTorchAllGather,
};

// --- moe (issue 13): how a code base routes tokens to its experts ---
enum class MoeDispatch : uint8_t {
  kNone,     // the code base has no MoE layer modeled (refused)
  // HF (modeling_mixtral.py MixtralSparseMoeBlock @ 00d4b3d2): a Python loop over the experts,
  // each gathering its tokens by index (`hidden_states[None, top_x]`), running its own
  // w1/w3/w2, scaling by its routing weight and `index_add_`-ing into a zeroed output.
  kHfLoop,
  // Megatron-core MoEAlltoAllTokenDispatcher (token_dispatcher.py @ d98e8a6): tokens permuted by
  // expert (index_select), all-to-all over the expert-parallel group, sorted by local expert, one
  // TEGroupedMLP (grouped GEMMs, the weighted fused SwiGLU), and back; dropless, or padded to a
  // capacity (--moe-capacity).
  kAllToAll,
};

// --- mla5 (issue 13): the op list of a code base's MLA attention (ImplSpec::mla_ops) ---
enum class MlaOps : uint8_t {
  // HF DeepseekV2Attention (modeling_deepseek_v2.py @ 0233e509): nn.Linear projections, an
  // RMSNorm module on the latent, complex rotary on q_pe and k_pe, torch.cat of q and k, SDPA
  kHfSdpa,
  // Megatron-core MLASelfAttention under the TE spec (multi_latent_attention.py @ d98e8a6):
  // TELinear down projections, TE LayerNormLinear up projections (the q/kv norms fused in),
  // the fused in-place MLA rope on q and the fused rope + split on kv, TE fused attention
  kMegatronTe,
};

// native (plan): one checkpointing option of a code base's configuration. `strategy` is a
// strategy as --strategy spells it, where "every:k", "block:k" and "layer-sac:k" stand for every k
// the option takes; `config` is the setting, with "{k}" for that number.
struct NativeAc {
  std::string_view strategy;
  std::string_view config;
};

struct ImplSpec {
  Impl id = Impl::kHf;
  std::string_view name;      // as --impl takes it
  std::string_view code;      // "huggingface/transformers"
  std::string_view version;   // the release or commit whose op sequences are modeled
  std::string_view families;  // supported model families, space-separated ("gpt2 llama ...")
  Precision precision{};      // default regime
  AttentionKind attention{};  // default attention kernel
  DropoutDefault dropout = DropoutDefault::kConfig;
  CheckpointApi checkpoint = CheckpointApi::kNonReentrant;
  QkvVariant qkv = QkvVariant::kArchitecture;
  EagerMatmul eager_matmul = EagerMatmul::kCopies;
  bool tensor_parallel = false;  // --tp/--sp: Megatron-core's tensor and sequence parallelism
  bool pipeline = false;         // --pp/--vpp: a pipeline schedule of this code base
  // --- implmt (megatron, torchtitan) ---
  LossVariant loss = LossVariant::kFloatCrossEntropy;
  EagerSoftmax eager_softmax = EagerSoftmax::kMaskThenSoftmax;
  // The vocabulary padded to a multiple of vocab_multiple x tp at every tp (Megatron
  // --make-vocab-size-divisible-by 128, training/vocab_utils.py); 0: as the config has it.
  int64_t vocab_multiple = 0;
  // Eager attention's baddbmm reads a persistent [b*np, s, s] 16-bit buffer of Megatron's global
  // memory buffer (parallel_state.get_global_memory_buffer, kept for the whole run).
  bool qk_global_buffer = false;

  // --- implhf: op variants of nanoGPT and HF (see the enums above) ---
  AttnScale attn_scale = AttnScale::kInMatmul;
  CausalMaskKind causal_mask = CausalMaskKind::kSharedBool;
  LogitsLifetime logits = LogitsLifetime::kLoss;
  GeluVariant gelu = GeluVariant::kFused;
  ParamGroups param_groups = ParamGroups::kOne;
  ForeachEps foreach_eps = ForeachEps::kInPlace;          // the release modeled
  ForeachEps foreach_eps_eager = ForeachEps::kInPlace;    // under --attention standard
  // The heads (sim::head_name, space-separated) this code base trains; others are refused.
  std::string_view heads = "causal-lm";
  // --- end implhf ---
  MoeDispatch moe = MoeDispatch::kNone;  // moe: token dispatch of its MoE layer
  bool mla = false;                      // moe: the code base's MLA op list is modeled
  // --- feat (issue 13): the fine-tuning and parallelism features this code base has ---
  bool lora = false;  // HF PEFT LoRA / QLoRA adapters (peft tuners/lora)
  bool context_parallel = false;  // --cp: ring attention over the sequence
  bool fp8_te = false;       // --fp8 te-*: Transformer Engine's fp8 linears
  bool fp8_torchao = false;  // --fp8 torchao-*: torchao's Float8Linear
  // --- end feat ---
  CpRing cp_ring = CpRing::kTeP2p;  // feat2: the ring's algorithm under --cp
  // --- hfimpl (issue 10): the code base takes a padding attention mask (--padding) and builds
  // the masks of the model's own modeling code (ModelConfig "hfimpl" fields) ---
  bool model_masks = false;
  // The LM loss as the model's modeling file computes it: the forward returns the logits (held
  // until it ends), and a file that shifts the logits copies them (ModelConfig::shift_logits_copy).
  bool model_losses = false;
  // --- end hfimpl ---
  std::string_view zero_means;   // what --dp/--zero mean for this code base (printed by run)
  std::string_view not_modeled;  // the "Not modeled" line of this implementation

  // --- time (issue 11): the kernels this code base runs ---
  // The fused attention kernel behind --attention flash (KernelChoice, sim/graph.hpp; kDefault:
  // FA2, PyTorch SDPA's flash backend). sim/src/kernels.cpp times it from that kernel's table.
  KernelChoice attention_kernel{};
  // --- time3 (issue 11) ---
  RopeKernels rope_kernels = RopeKernels::kOnePass;
  // --- end time3 ---

  // --- implver (issue 10): the release this row models, and that release's defaults ---
  // As --impl NAME@KEY names the release: one row per release of a code base, the first row of
  // a code base in the table (registry.cpp) its default; every row has one.
  std::string_view version_key;
  // The optimizer when --optimizer is not given (resolve_setup), with the code that makes it
  // the default: optimizer_eager under --attention standard (a code base whose eager path
  // means an older torch: nanoGPT's slow path runs where torch < 2.0 has no SDPA).
  Optimizer optimizer{};
  Optimizer optimizer_eager{};
  std::string_view optimizer_source;  // e.g. "TE FusedAdam, megatron/core/optimizer/__init__.py"
  // GQA under SDPA (flash): K and V repeated to every query head before the kernel (a copy each,
  // and the kernel saves the repeated ones) instead of the kernel's native GQA (enable_gqa).
  bool flash_repeat_kv = false;
  // Per family, the modeling file and commit read (space-separated `family=file@commit`; empty:
  // `version` names the one code all families share). run's setup line names the model's.
  std::string_view family_sources;
  // --optimizer adam-loop's fp32 temporaries of the parameter being updated: 1 for HF's adamw_hf
  // (`exp_avg_sq.sqrt().add_(eps)`), 2 for torch's single-tensor AdamW (`sqrt() / c`, both alive
  // at the division), which every code base but HF's Trainer runs.
  int loop_temporaries = 2;
  // --- end implver ---
  // --- exec10 (issue 10): zero_grad's set_to_none as the release's training loop calls it
  // (resolve_setup when --set-to-none is not given): torch >= 2.0 defaults to True
  // (nn.Module.zero_grad, Optimizer.zero_grad), torch < 2.0 to False. ---
  bool set_to_none = true;
  std::string_view set_to_none_source;  // the call and the torch it ran on
  // --- end exec10 ---
  // --- fam12 (issue 12): eager attention's softmax as the model's own modeling file writes it
  // (ModelConfig::eager_softmax_fp32); only a code base that runs that file (hf) sets it ---
  bool model_softmax = false;
  // --- end fam12 ---

  // --- time5 (issue 11): the release has torchtitan's fused Triton RMSNorm (`norm_type =
  // "fused_rmsnorm"`, torchtitan/models/norms.py TritonFusedRMSNorm), which --norm-kernel triton
  // selects (a train config's choice, so a run setting: TrainSetup::norm_kernel)
  bool triton_rmsnorm = false;
  // --- end time5 ---
  // --- mla5 (issue 13): which MLA op list (read only when `mla` is set) ---
  MlaOps mla_ops = MlaOps::kHfSdpa;
  // --- end mla5 ---

  // --- fp8sac (issue 10): the code base compiles each block with torch.compile as a train
  // config's choice (torchtitan's `training.compile`: parallelize_llama.py apply_compile,
  // per TransformerBlock), which --compile on selects (TrainSetup::compile)
  bool compile_blocks = false;
  // --- end fp8sac ---
  // --- hfds (issue 10): the precision regime this code base runs under data parallelism
  // (--dp > 1) when it is not `precision`: HF's Trainer launched with DeepSpeed ZeRO of the
  // --zero stage (deepspeed-bf16, sim/src/deepspeed.cpp). Unset: `precision` at every --dp.
  std::optional<Precision> dp_precision;
  std::string_view dp_precision_source;  // why (run prints it)
  // --- end hfds ---

  // --- native (plan): the checkpointing this code base's own configuration can run, as strategy
  // patterns with the setting that selects each ("every:k" etc.: k is the setting's number).
  // `actsim plan` finds the best of them beside its per-block plan, which none of these code
  // bases' options expresses (sim/planner_native.hpp). ---
  std::span<const NativeAc> native_ac;
  // --- end native ---
  // --- te_norm (issue 10): the block's and the final RMSNorm as Transformer Engine's fused
  // kernels (LayerNormLinear's norm, TENorm): the norm saves its input, its weight and fp32 rsigma
  // per row and writes ln_out in the activation dtype (sim/src/norm_te.cpp). LayerNorm is already
  // TE's storages (input, weight, bias, fp32 mu and rsigma: Ops::layer_norm) ---
  bool te_norms = false;
  // the code base has Megatron's --cross-entropy-loss-fusion (TrainSetup::cross_entropy_loss_fusion)
  bool ce_loss_fusion = false;
  // --- end te_norm ---
  // --- polish: run settings only this code base's configuration has (resolve_setup refuses
  // them elsewhere in one line; the GUI shows their fields only where the row has them) ---
  bool grad_accum_fusion_flag = false;  // --grad-accum-fusion off: --no-gradient-accumulation-fusion
  bool deterministic_mode = false;      // --deterministic on: Megatron's --deterministic-mode
  bool local_spec = false;              // --transformer-impl local: get_gpt_layer_local_spec
  // --- end polish ---
  // --- feat14 (issue 13): the gated MLP as ONE fc1 of 2f columns whose output a fused SwiGLU
  // function saves whole (Megatron-core's MLP with gated_linear_unit and bias_activation_fusion:
  // megatron/core/transformer/mlp.py MLP.forward, fusions/fused_bias_swiglu.py SwiGLUFunction;
  // sim/src/blocks_feat14.cpp). Unset: gate and up as two linears, silu, mul (HF's LlamaMLP) ---
  bool fused_swiglu = false;
  // the gradients of parameters replicated over TP are all-reduced over the TP group under
  // sequence parallelism after the data-parallel reduction (Graph::tp_replicated_grad_bytes)
  bool tp_replicated_grad_allreduce = false;
  // --- end feat14 ---
};

// every row, in --impl's listing order; implver: every release of each code base, its default first
std::span<const ImplSpec> implementations();
const ImplSpec& spec(Impl impl);
// implver: the row of one release of a code base (`version` as --impl NAME@KEY names it; empty:
// the default release). Throws std::logic_error for a version the table lacks (parse first).
const ImplSpec& spec(Impl impl, std::string_view version);
// implver: --impl NAME or NAME@VERSION; nullopt when NAME is unknown; `version_error` is set
// (and nullopt returned) when the version is not one of NAME's (listing the valid ones).
struct ImplChoice {
  Impl impl = Impl::kHf;
  std::string_view version;  // the row's version_key (static storage); empty: the default
  bool operator==(const ImplChoice&) const = default;
};
std::optional<ImplChoice> parse_impl_choice(std::string_view s, std::string* version_error);
std::string impl_versions(Impl impl);  // "v0.2.2 (default), 9dec370"
// implver: what run names as the code modeled for a family: `version`, and the family's modeling
// file and commit where the row has family_sources ("transformers v4.48: modeling_t5.py@6b8b757d")
std::string release_name(const ImplSpec& spec, std::string_view family);
std::string_view name(Impl impl);
std::optional<Impl> parse_impl(std::string_view s);
std::string impl_names();  // "hf, torchtitan, megatron, nanogpt"
bool supports_family(const ImplSpec& spec, std::string_view family);

// The implementation a model gets when --impl is not given: Megatron-LM for actsim's own GPT
// model files (megatron-gpt, Korthikanti et al.'s models) and for any set-up with tensor or
// pipeline parallelism (the only code base here that has them); otherwise the HuggingFace
// config's own code base, transformers (hf).
Impl default_impl(const ModelConfig& model, const TrainSetup& setup);

// The setup with every default made explicit: the implementation (the model's default), and the
// precision regime and attention kernel the implementation defaults to (the paper profile keeps
// its own). Idempotent. Throws Unsupported naming the implementation and the feature when the
// implementation cannot run the model family or a knob.
TrainSetup resolve_setup(const ModelConfig& model, const TrainSetup& setup);

}  // namespace sim
