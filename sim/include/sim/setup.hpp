// The training set-up knobs of one simulated step (DESIGN.md §3, §7). Flags name these fields:
// errors about a set-up name the flag ("--batch") as where, and the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sim/impl.hpp"
#include "sim/model.hpp"

namespace sim {

// kFsdp2Bf16: FSDP2 MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) (torchtitan): fp32
// sharded parameters, gradients and optimizer state; bf16 parameters all-gathered per block for
// compute; bf16 activations and residual; no autocast.
// kDeepspeedBf16 (hfds, issue 10): HF's Trainer under DeepSpeed with --bf16 (`bf16.enabled`):
// no autocast (accelerate skips native_amp under DeepSpeed), the module cast to bf16 by
// DeepSpeedEngine, fp32 master weights and Adam state partitioned in DeepSpeed's optimizer of
// the --zero stage (sim/src/deepspeed.cpp; docs/memory-model.md "HF Trainer + DeepSpeed").
enum class Precision : uint8_t { kBf16Mixed, kBf16Amp, kFp16Amp, kFp32, kFsdp2Bf16, kDeepspeedBf16 };
enum class AttentionKind : uint8_t { kStandard, kFlash };
enum class Profile : uint8_t { kPytorch, kPaper };
// kAdamLoop: a per-parameter loop (HF's adamw_hf, torch's single-tensor Adam): one temporary the
// size of the largest parameter.
enum class Optimizer : uint8_t { kAdamForeach, kAdamFused, kSgd, kAdamLoop };
enum class AllocatorKind : uint8_t { kExact, kCaching, kCachingExpandable };

// feat (issue 13): FP8 linears. Transformer Engine (Megatron-core --fp8-format hybrid
// --fp8-recipe delayed|tensorwise): te-delayed, te-current; torchao Float8Linear (torchtitan
// --float8.recipe_name tensorwise|rowwise): torchao-tensorwise, torchao-rowwise.
enum class Fp8Recipe : uint8_t { kOff, kTeDelayed, kTeCurrent, kTorchaoTensorwise, kTorchaoRowwise };
std::string_view name(Fp8Recipe r);  // "off", "te-delayed", ...
std::optional<Fp8Recipe> parse_fp8(std::string_view s);

// --- time5 (issue 11): which kernel a model's RMSNorm runs, a run setting (a code base's train
// config picks it, not its release): kDefault, the implementation's own op list (eager RMSNorm
// under HF and torchtitan; sim/src/ops.hpp Ops::rms_norm); kTriton, torchtitan's fused Triton
// RMSNorm (`norm_type = "fused_rmsnorm"`, torchtitan/models/norms.py @ 04133643 and 9dec370: one
// kernel forward, three backward; sim/src/norm_kernels.cpp), where the release has it
// (ImplSpec::triton_rmsnorm).
enum class NormKernel : uint8_t { kDefault, kTriton };
inline std::string_view name(NormKernel k) { return k == NormKernel::kTriton ? "triton" : "default"; }
inline std::optional<NormKernel> parse_norm_kernel(std::string_view s) {
  if (s == "default") return NormKernel::kDefault;
  if (s == "triton") return NormKernel::kTriton;
  return std::nullopt;
}
// --- end time5 ---

struct TrainSetup {
  int64_t micro_batch = 1;    // b
  int64_t seq = 1024;         // s (the CLI default)
  Profile profile = Profile::kPytorch;
  std::optional<Precision> precision;    // unset: the profile's default (pytorch bf16-amp, paper bf16-mixed)
  std::optional<Impl> impl;              // unset: the model's default (sim/impl.hpp default_impl)
  std::optional<AttentionKind> attention;  // unset: the implementation's default
  std::optional<double> dropout;         // overrides all three dropout probabilities when set
  int64_t tp = 1;            // tensor-parallel ranks t
  bool sp = false;           // sequence parallelism (needs tp > 1 to matter)
  int64_t dp = 1;            // data-parallel ranks d
  int zero = 0;              // ZeRO stage 0-3 over the dp ranks
  // implver: unset: the implementation's default (ImplSpec::optimizer; resolve_setup), else adam
  std::optional<Optimizer> optimizer;
  AllocatorKind allocator = AllocatorKind::kExact;
  int64_t prefetch = 1;      // offload: blocks whose saved tensors are copied back ahead (--prefetch)
  int64_t pp = 1;            // pipeline stages p (--pp)
  int64_t vpp = 1;           // model chunks per stage m, interleaved schedule when > 1 (--vpp)
  // --set-to-none: zero_grad(set_to_none=True) frees the gradients between steps (torch >= 2.0
  // default); false: they are zeroed and kept, persistent (torch < 2.0, HF's Trainer of 2022).
  // exec10: unset: the release's (ImplSpec::set_to_none; resolved_set_to_none), else on.
  std::optional<bool> set_to_none;
  // --reentrant on|off: the checkpoint API's reentrancy (torch.utils.checkpoint's use_reentrant;
  // HF's gradient_checkpointing_kwargs). Unset: the implementation's (ImplSpec::checkpoint).
  std::optional<bool> reentrant;
  int64_t microbatches = 1;  // micro-batches per step N (--num-microbatches; gradient accumulation)

  // --- famenc (issue 12) ---
  // --target-seq: the decoder's length of an encoder-decoder model (T5; --seq is the encoder's).
  // Unset: --seq (resolve_setup makes it explicit for encoder-decoder models).
  std::optional<int64_t> target_seq;
  // --seq not given: a model with a length of its own takes it (ViT: its token count, patches
  // and the class token); any other model takes `seq` as set (the CLI's 1024).
  bool seq_default = false;
  // --- moe (issue 13) ---
  int64_t ep = 1;            // expert-parallel ranks (--ep): routed experts divided, within dp
  // --moe-imbalance F: the hottest expert receives F times the mean tokens per expert, the
  // others share the rest evenly; the rank holding it is simulated. 1: balanced.
  double moe_imbalance = 1.0;
  // --moe-capacity C: Megatron's --moe-expert-capacity-factor with
  // --moe-pad-expert-input-to-capacity (each expert takes ceil(k N / E x C) tokens per source
  // rank, the rest dropped, the rest padded). Unset: dropless.
  std::optional<double> moe_capacity;
  // --- feat (issue 13): LoRA and QLoRA (sim/src/lora.cpp) ---
  // --lora-rank R: HF PEFT LoRA adapters of rank R on the targeted linears, every base parameter
  // frozen (no gradient, no optimizer state); 0: full fine-tuning.
  int64_t lora_rank = 0;
  // --lora-targets: a mask of LoraTarget bits; 0: PEFT's default for the family (resolve_setup
  // fills it in).
  uint32_t lora_targets = 0;
  // --qlora: the frozen linears in bitsandbytes 4-bit NF4 with double quantization (QLoRA).
  bool qlora = false;
  // --cp N: context parallelism (ring attention: Megatron-core/Transformer Engine's
  // AttnFuncWithCPAndKVP2P, torchtitan's context_parallel): the sequence split over N ranks.
  int64_t cp = 1;
  // --fp8: the FP8 linear recipe (sim/src/fp8.cpp); kOff: 16-bit linears.
  Fp8Recipe fp8 = Fp8Recipe::kOff;
  // --- end feat ---
  // --- implver (issue 10): the release of the implementation (--impl NAME@VERSION), as its
  // ImplSpec row's version_key (static storage); empty: the default release (resolve_setup
  // makes it explicit).
  std::string_view impl_version;
  // --- hfimpl (issue 10): --padding on: the batch carries a padding attention mask (HF's
  // tokenizer pads, the collator passes `attention_mask` with zeros). HF then builds a 4-D
  // additive mask once per forward and SDPA runs its memory-efficient kernel (the flash kernel
  // takes no mask); off: no padding (packed or equal-length sequences; HF drops an all-ones mask).
  bool padding = false;
  // --- end hfimpl ---
  // --- time5 (issue 11): --norm-kernel: the kernel the model's RMSNorm runs (NormKernel) ---
  NormKernel norm_kernel = NormKernel::kDefault;
  // --- end time5 ---
  // feat3 (issue 13): --zero not given. Under fsdp2-bf16 (torchtitan's default regime: FSDP2
  // always shards) resolve_setup then takes ZeRO 3 when dp x cp > 1; an explicit --zero 0/1/2
  // under fsdp2-bf16 stays refused (validate).
  bool zero_default = false;
  // --- fp8sac (issue 10): --compile on: the blocks run under torch.compile (torchtitan's
  // `training.compile`, per TransformerBlock). Modeled: what AOTAutograd's partitioner keeps of
  // a selective-AC region (must-save outputs the backward never reads are not kept) and that
  // torchao's amax is fused (no abs tensor); the rest of compile is not modeled
  // (docs/memory-model.md "torch.compile").
  bool compile = false;
  // --- end fp8sac ---
  // --- time6 (issue 11): --grad-accum-fusion on|off. Megatron's gradient-accumulation fusion
  // (on, its default: each linear's wgrad GEMM accumulates into the fp32 main_grad); off is
  // Megatron's --no-gradient-accumulation-fusion: the wgrad is a separate 16-bit GEMM output that
  // the DDP hook adds into main_grad (sim/src/ops.hpp Ops::linear)
  bool grad_accum_fusion = true;
  // --- end time6 ---
  // --- mla5 (issue 13): --moe-aux-loss-coeff C, Megatron's --moe-aux-loss-coeff (its default
  // 0: no load-balancing loss; router.py _apply_aux_loss). C > 0 adds the loss's ops to every
  // MoE layer (blocks_moe.cpp megatron_aux_loss); only megatron has the knob (HF reads
  // output_router_logits from the config) ---
  double moe_aux_loss_coeff = 0.0;
  // --- end mla5 ---
  // --- ds3 (issue 10): the DeepSpeed ZeRO knobs of the HF Trainer's ds_config (deepspeed-bf16,
  // sim/src/deepspeed.cpp); -1: what the Trainer's "auto" fills in (transformers
  // integrations/deepspeed.py trainer_config_finalize: h^2, 0.9 h^2, 10 h) or, for the two keys
  // it leaves alone, DeepSpeed v0.16.2's zero/config.py default (1e9 each) ---
  int64_t ds_reduce_bucket = -1;          // --ds-reduce-bucket: reduce_bucket_size (elements)
  int64_t ds_prefetch_bucket = -1;        // --ds-prefetch-bucket: stage3_prefetch_bucket_size
  int64_t ds_persistence_threshold = -1;  // --ds-persistence-threshold
  int64_t ds_max_live = -1;               // --ds-max-live: stage3_max_live_parameters
  int64_t ds_max_reuse_distance = -1;     // --ds-max-reuse-distance: stage3_max_reuse_distance
  // --- end ds3 ---
  // --- etp (issue 13): --etp N, Megatron's --expert-tensor-parallel-size: each routed expert's
  // fc1/fc2 split over N ranks (TEGroupedMLP column/row parallel over the expert-TP group). 0:
  // unset, Megatron's default, --tp (megatron/training/arguments.py @ d98e8a64 line 587) ---
  int64_t etp = 0;
  // --- end etp ---
  // --- te_norm (issue 10): --cross-entropy-loss-fusion on|off, Megatron's
  // --cross-entropy-loss-fusion (its default off: tensor_parallel.vocab_parallel_cross_entropy);
  // on: cross_entropy_fusion_impl 'native', fusions/fused_cross_entropy.py's torch.compile'd steps
  // (sim/src/graph_blocks.cpp build_head). Only megatron has the knob.
  bool cross_entropy_loss_fusion = false;
  // --- end te_norm ---
  // --- time7 (issue 11): --deterministic on|off, Megatron's --deterministic-mode. It calls
  // torch.use_deterministic_algorithms(True) (megatron/training/determinism.py @ d98e8a64dd
  // apply_determinism_to_args; nothing there turns torch.utils.deterministic.
  // fill_uninitialized_memory off, whose default is True), so every tensor allocated through the
  // dispatcher's empty (aten/src/ATen/native/cuda/TensorFactories.cu empty_cuda:
  // fill_empty_deterministic_) is first filled with NaN: one more memory-bound write of each
  // output Transformer Engine allocates (sim/src/graph_builder.cpp, time7)
  bool deterministic = false;
  // --- end time7 ---
  // --- moetp (issue 13): --moe-shared-expert-overlap on|off, Megatron's
  // --moe-shared-expert-overlap (default off): the shared experts run inside the alltoall
  // dispatcher on their own stream, their linears without TP communication
  // (sim/src/blocks_moetp.cpp). Only megatron has the knob; needs shared experts.
  bool moe_shared_expert_overlap = false;
  // --- end moetp ---
};

// etp (issue 13): the expert-tensor-parallel size simulated: --etp, else --tp (Megatron's default)
inline int64_t resolved_etp(const TrainSetup& s) { return s.etp > 0 ? s.etp : s.tp; }

// --- feat (issue 13): LoRA targets, as --lora-targets names them (PEFT module names per family:
// q = q_proj/query/T5's q, k, v, o = o_proj/attention output dense/GPT-2 attn.c_proj/T5's o,
// gate = gate_proj/Mixtral's expert w1/T5's wi_0, up = up_proj/fc1/c_fc/intermediate.dense/
// Mixtral's w3/T5's wi and wi_1, down = down_proj/fc2/mlp.c_proj/output.dense/Mixtral's w2/T5's
// wo; lora6: q_a, q_b, kv_a, kv_b = MLA's q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj;
// gate_up = Phi-3's gate_up_proj).
enum LoraTarget : uint32_t {
  kLoraQ = 1, kLoraK = 2, kLoraV = 4, kLoraO = 8, kLoraGate = 16, kLoraUp = 32, kLoraDown = 64,
  // --- lora6 (issue 13): MLA's q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj; Phi-3's fused
  // gate_up_proj; kLoraOther: no name reaches it, all-linear does (an MoE router, Qwen2-MoE's
  // shared_expert_gate: nn.Linear modules PEFT's all-linear adapts) ---
  kLoraQA = 128, kLoraQB = 256, kLoraKvA = 512, kLoraKvB = 1024, kLoraGateUp = 2048,
  kLoraOther = 4096,
  // --- end lora6 ---
  kLoraAllLinear = 8191,
};
// "q,v" or "q+v", "all-linear" (every bit); nullopt for an unknown name or an empty list.
std::optional<uint32_t> parse_lora_targets(std::string_view s);
// "q+v" ('+': a CSV field without quotes); "all-linear" for every bit; "" for 0
std::string lora_targets_name(uint32_t mask);
// --- end feat ---

// The regime actually simulated: --precision, else the implementation's default, else the
// profile's (a setup not yet through resolve_setup: pytorch bf16-amp, paper bf16-mixed).
Precision resolved_precision(const TrainSetup& setup);
// The attention kernel: --attention, else the implementation's default, else standard.
AttentionKind resolved_attention(const TrainSetup& setup);
// implver: --optimizer, else the implementation release's default (under --attention standard
// its eager default), else adam (foreach; the paper profile).
Optimizer resolved_optimizer(const TrainSetup& setup);
// exec10: --set-to-none as given, else the release's default (ImplSpec::set_to_none), else on
bool resolved_set_to_none(const TrainSetup& setup);

// Throws ConfigError (where = flag name) for values out of range, and for knobs outside the
// paper profile's scope (Unsupported naming the knob). Needs the model for divisibility checks.
void validate(const ModelConfig& model, const TrainSetup& setup);

// Names as the CLI, CSV and JSON write them, and their inverse (nullopt when unknown).
std::string_view name(Precision p);          // "bf16-mixed", ..., "fsdp2-bf16", "deepspeed-bf16"
std::string_view name(AttentionKind a);      // "standard", "flash"
std::string_view name(Profile p);            // "pytorch", "paper"
std::string_view name(Optimizer o);          // "adam", "adam-fused", "sgd", "adam-loop"
std::string_view name(AllocatorKind a);      // "exact", "caching", "caching-expandable"
std::optional<Precision> parse_precision(std::string_view s);
std::optional<AttentionKind> parse_attention(std::string_view s);
std::optional<Profile> parse_profile(std::string_view s);
std::optional<Optimizer> parse_optimizer(std::string_view s);
std::optional<AllocatorKind> parse_allocator(std::string_view s);

}  // namespace sim
