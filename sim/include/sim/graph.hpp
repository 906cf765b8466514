// The op graph of one training step on one rank: storages and the ops that make, save and free
// them, in forward order. Built once per (model, setup); strategies do not change it. The op list
// and what each op saves is written down in docs/memory-model.md, which must agree with
// sim/src/graph_*.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/model.hpp"
#include "sim/result.hpp"
#include "sim/setup.hpp"
#include "sim/units.hpp"

namespace sim {

struct Device;

// A contiguous slice of Graph::idx.
struct IdxRange {
  int32_t begin = 0;
  int32_t count = 0;
};

// Storage identity (DESIGN.md §3): a view shares its base's storage, so live memory is the sum
// of live storages, never of saved tensors.
struct Storage {
  int64_t bytes = 0;
  DType dtype = DType::kBF16;
  Category category = Category::kActivations;  // as made in forward (recompute re-labels)
  int32_t block = -1;     // attributed block: that of its first forward consumer, else producer
  int32_t producer = -1;  // op whose forward (or backward, for grads) allocates it; -1 persistent
  const char* role = "";  // what it is, for explanations ("ln1 input", "softmax out")
  // moe: a routed expert's parameter (divided over --ep; its optimizer state over dp / ep)
  bool expert = false;
  // feat3 (issue 13): a frozen base parameter (LoRA): persistent, no gradient, no optimizer
  // state, but sharded and all-gathered like a parameter under ZeRO-3 and FSDP2.
  bool frozen = false;
};

enum class OpKind : uint8_t {
  kEmbedding, kLayerNorm, kRmsNorm, kLinear, kBmm, kMask, kSoftmax, kDropout, kGelu, kSilu,
  kMul, kAdd, kCast, kCopy, kSplit, kRope, kFlashAttention, kLogSoftmax, kNllLoss, kVocabCe,
};
inline constexpr int kOpKindCount = static_cast<int>(OpKind::kVocabCe) + 1;
std::string_view op_kind_name(OpKind k);

// What an op costs on the device (DESIGN.md §5): matmul FLOPs (0 for others) and bytes moved.
struct OpCost {
  int64_t flops = 0;        // matmul FLOPs only (Korthikanti App. A convention)
  int64_t bytes = 0;        // bytes read + written by its kernels
  int64_t comm_bytes = 0;   // tensor-parallel collective payload per rank
  uint8_t comm_kind = 0;    // 0 none, 1 all-reduce, 2 all-gather, 3 reduce-scatter
  uint8_t kernels = 1;      // kernel launches
  // etp (issue 13): the collective's group: 0 the tensor-parallel group, 1 the
  // expert-tensor-parallel group (the MoE dispatcher's all-gather/reduce-scatter)
  uint8_t comm_group = 0;
};

// What the CPU reference executor (harness/executor) computes for an op, and the meaning of
// OpArgs::dim for it. Filled only by build_graph_exec(); the simulator never reads it.
enum class Exec : uint8_t {
  kNone,        // not executable (synthetic graphs)
  kBatch,       // outputs ids, labels (int64 [tokens]); dim {tokens, vocab}
  kRopeTables,  // output cos then sin ([b*s, d] each); dim {b, s, d}
  kEmbedding,   // in ids, word table [v, h], positions table [max_pos + types, h]; dim
                // {tokens, h, s, max_positions (0: none), type rows (0: none)}
  kCast,        // the outputs take consecutive elements of input 0, converted to their dtype
  kLinear,      // in x [rows, in], w [out, in] (+bias); dim {rows, in, out, bias: 0 none,
                // 1 stored after the weight in input 1, 2 input 2}
  kQk,          // scores [b, a, s, s] = q k^T / sqrt(d); outputs 1..: q, k operand copies;
                // dim {b, a, s, d, a / kv heads of the k operand}
  kMask,        // scores where mask [s, s] (input 1) else -inf; dim {rows, s}
  kSoftmax,     // over the last dim; dim {rows, cols, causal: mask fused in (paper profile)}
  kDropout,     // p; outputs y, mask (1 byte per element)
  kAv,          // out [b*s, a*d] = probs v; dim {b, a, s, d, a / kv heads of the v operand}
  kCopy,        // identity
  kRepeatKv,    // out [tokens, a*d] from [tokens, g*d]; dim {tokens, g, d, a / g}
  kSplit,       // views: nothing to compute forward; backward concatenates
  kRope,        // in x [b*s, heads*d], tables; dim {b, s, heads, d}
  kFlash,       // in q, k, v; out o [b*s, a*d], lse [b, a, s]; p; dim {b, a, s, d, a / g, causal}
  kLayerNorm,   // in x, w (gamma, then beta when dim[2]); out y (+ mean, rstd); dim {rows, h,
                // has bias, has stats}
  kMeanSq,      // var[r] = mean(x[r]^2); dim {rows, h}
  kRsqrt,       // rsqrt(var + eps); dim {rows}
  kRowScale,    // x[r, c] * r[r]; dim {rows, h}
  kColScale,    // w[c] * x[r, c] (w input 0); dim {rows, h}
  kMul,         // elementwise product
  kGelu,
  kSilu,
  kAdd,
  kLogSoftmax,  // dim {rows, v}
  kNll,         // in logp, labels; out loss, total weight; mean reduction; dim {rows, v}
  kVocabCe,     // in logits, labels; out softmax, loss; dim {rows, v}
  // --- exec10 (issue 10): kernels for HF's masks and loss, Falcon's split and SDPA's math ---
  kIndexSplit,  // Falcon multi_query: out q (a view), k, v (copies of one head each), the two
                // int64 head indices; dim {width, q width, kv width, head dim}
  kScale,       // y = x * p (a Python scalar: MulBackward0 saves nothing)
  kAdditiveMask,  // out: an additive mask made from nothing; dim {copies, s, kind}: kind 0 causal
                  // [copies, s, s] with -inf, 1 the same with the dtype's finfo.min (HF), 2 zeros
                  // [copies, s] (an extended [b, 1, 1, s] mask of all-ones attention)
  kMaskAdd,     // scores [b, a, s, s] + mask (input 1) broadcast; dim {b, a, s, mask layout: 0 [s,
                // s], 1 [b, s, s], 2 [b, s]}
  kShiftRows,   // out[bi, i] = in[bi, i + offset] for i < s - 1; dim {b, s, width, offset}
  // kQk / kAv dim[5] bits beyond 0..1 (exec10): 4: the k (qk) or v (av) operand copy is
  // broadcast from the input's fewer heads (torch.matmul's expand + reshape); 8 (qk): no
  // 1/sqrt(d) scale (SDPA math scaled q and k before). kSoftmax with two inputs adds input 1, an
  // [s, s] additive mask, to every row first (SDPA math's attn.add_(mask)).
  // --- end exec10 ---
  // --- exec11 (issues 10, 13): LoRA's held input embeddings, MLA ---
  kHeld,  // out: a tensor the graph only holds (nothing reads its values): zeros; no backward
  kNf4Linear,  // y = x W^T (+ b, input 2 when dim[3] == 2) with W dequantized from input 1, a
               // bitsandbytes NF4 weight + double-quantized state laid out as sim/src/lora.cpp
               // nf4_bytes counts it; dim {rows, in, out, bias}; backward: x's gradient only
  kComplexRopeTables,  // MLA's freqs_cis, complex64 [s, rope / 2] as fp32 (re, im) pairs; dim {s, rope}
  kComplexRope,  // view_as_complex(x) * freqs_cis: rows [tokens * heads, rope] (a view or dense),
                 // tables input 1; dim {b, s, heads, rope}
  kCat,  // per row: input 0's w0 columns then input 1's w1 ([rows] or [rows / heads]: expanded
         // over the heads); dim {rows, heads, w0, w1}
  // --- end exec11 ---
  // --- exec12 (issues 10, 13): HF's gelu_new pointwise ops, nanoGPT's slow-path mask ---
  kPow,         // y = x ** p (pow.Tensor_Scalar: saves self, input 0)
  kTanh,        // y = tanh(x) (saves its result, output 0)
  kAddScalar,   // y = x + p (a Python scalar: AddBackward1 saves nothing)
  kEqZero,      // out bool [s, s] = (buffer[:s, :s] == 0) of the fp32 [pos, pos] tril(ones)
                // buffer (input 0, nanoGPT's `bias`); dim {s, pos}; no backward
  kMaskedFill,  // scores.masked_fill(fill, -inf): -inf where the bool [s, s] `fill` (input 1)
                // is true; dim {rows, s}; backward: the gradient where fill is false (saves fill)
  kMemEfficient,  // SDPA's memory-efficient kernel: in q, k, v (+ an additive attn_bias [s, s]
                  // or [b, s, s], input 3); out o [b*s, a*dv], lse [b, a, ceil(s / 32) * 32]
                  // (rows past s: 0); dim as kFlash; v's head dim dv from its size (MLA)
  // exec12: HF's router and loop over experts (sim/src/blocks_moe.cpp hf_router, hf_loop)
  kTopK,          // torch.topk(probs [n, e], k): out values [n, k] (input's dtype), int64 indices
                  // [n, k]; dim {n, e, k}; backward scatters into probs (saves the indices)
                  // exec13: dim[3] 1: the experts are forced, not chosen by value: each expert j
                  // gets the c_j tokens the kWhere ops after it declare (executor.hpp
                  // forced_counts), the values are probs at those experts, largest first
  kRowSum,        // sum over the last dim, keepdim: [n, k] -> [n]; dim {n, k}
  kDivInPlace,    // x /= sum (input 1, [n]): out 0 is x's storage, out 1 the original x (saved with
                  // the sum); dim {n, k}
  kOneHot,        // one_hot(indices [n, k], e).permute(2, 1, 0): int64 [e, k, n]; dim {n, k, e}
  kWhere,         // torch.where(mask[expert]) of the one-hot [e, k, n]: int64 [ne, 2] (slot, token)
                  // pairs in row-major order; dim {n, k, expert, ne}
  kGatherRows,    // x[top_x]: rows [ne, h] of x [n, h]; top_x is column 1 of input 1's [ne, 2]
                  // storage; dim {ne, h}
  kGatherWeight,  // w[top_x, slot] of w [n, k] (inputs 1, 2: one [ne, 2] storage); dim {ne, k}
  kIndexAdd,      // out.index_add_(0, top_x, y): out 0 is input 0's storage; dim {ne, h}
  // --- end exec12 ---
  // --- exec13 (issues 10, 13): Transformer Engine's RMSNorm ---
  kTeRmsNorm,  // TE rmsnorm_fwd: in x [rows, h], gamma [h]; out y (x's dtype), rsigma fp32 [rows];
               // dim {rows, h}; backward reads x, gamma and rsigma (what the op saves)
  kSigmoid,    // y = sigmoid(x); backward from its result (derivatives.yaml sigmoid: result)
  kGateMul,    // z[r, c] = g[r] y[r, c]: g [rows] (a [rows, 1] gate, input 0), y [rows, h]
               // (input 1); dim {rows, h}; backward reads each operand for the other's gradient
  // --- end exec13 ---
  // --- exec14 (issue 10): Megatron's fused MLA rope (megatron/core/fusions/
  // fused_mla_yarn_rope_apply.py @ d98e8a64ddf3; rotary_interleaved and remove_interleaving off)
  kMlaRopeTables,  // YarnRotaryEmbedding's cos then sin ([s, rope] each, emb = cat(freqs, freqs),
                   // scaling factor 1: concentration 1); dim {s, rope}
  kMlaRopeQ,       // _FusedMLARoPEInplace: in place on q [tokens, heads, nope + rope] (out 0 is
                   // q's storage): the trailing rope elements, read as (even, odd) pairs, written
                   // as (left half, right half); input 1 the tables; dim {b, s, heads, nope, rope}
  kMlaRopeKv,      // _FusedMLARoPEKVSplit: kv [tokens, heads, nope + v] (input 0) and k_pos_emb
                   // [tokens, rope] (input 1, a view) to key [tokens, heads, nope + rope] (the
                   // rotated k_pos_emb broadcast to every head) and value [tokens, heads, v];
                   // input 2 the tables; dim {b, s, heads, nope, rope, v}
  // --- end exec14 ---
  // --- feat14 (issue 13): Megatron's SwiGLUFunction ---
  kSwiglu,  // y [rows, f] = silu(x[:, :f]) * x[:, f:] of x [rows, 2f] (input 0, saved);
            // dim {rows, f}; backward: the [rows, 2f] gradient of x
  // --- end feat14 ---
};

// How an op's backward delivers the gradient of one input (the static backward pass).
enum class GradMode : uint8_t {
  kNone,      // no gradient flows to this input
  kWrite,     // into `grad`, allocated by this backward node (first arrival)
  kAccum,     // added into `grad`, an earlier arrival
  kAlias,     // `grad` is the output gradient handed on as is: nothing to compute
  kMainGrad,  // added into the persistent main_grad buffer; `grad` is the parameter's index
};

// One tensor as an op uses it. A view is a column slice of its storage's rows.
struct TensorRef {
  int32_t storage = -1;
  int32_t grad = -1;    // storage of its gradient at this op's backward, -1 when none
  int32_t col = 0;      // view: first column within the storage's rows
  int32_t cols = 0;     // view: its columns; 0 when the tensor is the whole storage
  int32_t stride = 0;   // view: the storage's row width
  GradMode mode = GradMode::kNone;  // inputs only
};

// The operands of one op in the order its math uses them, and its sizes (see Exec).
struct OpArgs {
  Exec exec = Exec::kNone;
  uint8_t n_in = 0, n_out = 0;
  bool root = false;  // the loss: its backward starts from a unit gradient
  float p = 0;        // dropout probability
  std::array<int64_t, 6> dim{};
  std::array<TensorRef, 6> in{};
  std::array<TensorRef, 4> out{};
};

// Which kernel runs an op, where more than one could (DESIGN.md §5 kernel classes). kDefault
// lets sim/src/kernels.cpp pick from (OpKind, shapes, attention kind); the --impl work sets the
// others per implementation (e.g. FA3 or TE's cuDNN-backed fused attention for Megatron).
enum class KernelChoice : uint8_t {
  kDefault,
  kFlashAttention2,   // Dao-AILab flash-attention 2 (PyTorch SDPA's flash backend)
  kFlashAttention3,   // flash-attention 3 (Hopper)
  kCudnnAttention,    // cuDNN fused attention (also Transformer Engine's FusedAttention)
  kSdpaMemEfficient,  // PyTorch SDPA's memory-efficient (xformers cutlass) kernel
};

// polish: which projection of the model a linear op is, set where the block builds it
// (sim/src/ops.hpp Ops::linear). Passes that treat projections differently (sim/src/lora.cpp's
// LoRA targets, sim/src/fp8.cpp's per-module state) match on it, never on the op's name.
enum class LinearSite : uint8_t {
  kNone,    // not a site those passes name (classifier, pooler, Megatron's experts, DeepSeek-V2's
            // 3D expert weights, LoRA's own adapters)
  kQkv,     // q, k and v as one linear (GPT-2's c_attn, Megatron's linear_qkv)
  kQ,       // a separate query projection
  kK,       // a separate key projection
  kV,       // a separate value projection
  kO,       // the attention output projection
  kFc1,     // a plain MLP's first linear
  kFc2,     // a plain MLP's second linear
  kGate,    // a gated MLP's gate projection
  kUp,      // a gated MLP's up projection (half of Megatron's linear_fc1, built separately)
  kDown,    // a gated MLP's down projection
  kGateUp,  // a gated MLP's gate and up projections as one linear (Phi-3's gate_up_proj)
  kLmHead,  // the output layer (logits)
  // --- lora6 (issue 13) ---
  kQA,      // MLA's q_a_proj (the query's down projection)
  kQB,      // MLA's q_b_proj (the query's up projection)
  kKvA,     // MLA's kv_a_proj_with_mqa (the latent and the shared rope key)
  kKvB,     // MLA's kv_b_proj (keys' nope part and values from the latent)
  kOther,   // an nn.Linear no target name reaches but PEFT's all-linear adapts (an MoE router,
            // Qwen2-MoE's shared_expert_gate)
  // --- end lora6 ---
};

struct Op {
  OpKind kind = OpKind::kAdd;
  const char* name = "";   // role in its block ("qkv", "softmax", ...)
  int32_t block = -1;      // -1 outside the blocks (embedding, final norm, loss)
  bool core_attention = false;  // inside Megatron's selective-recompute region
  bool sac_save = false;        // output kept by the save-matmuls policy (sac:mm)
  // output kept by torchtitan's op-level SAC policy (sac:torchtitan): sac_save, but for every
  // second aten.mm of its block (graph_builder.cpp mark_torchtitan_sac)
  bool sac_save_torchtitan = false;
  bool math16 = true;           // its matmuls run on 16-bit tensor cores (else fp32 peak)
  bool has_backward = false;    // a gradient reaches it, so autograd records and runs its node
  KernelChoice kernel = KernelChoice::kDefault;  // hook for --impl (see KernelChoice)
  int64_t param_numel = 0;  // elements of the parameters this op is the first to read in forward
  // Shapes for the kernel class (copied from the op's dims by the builder): linear {rows, in,
  // out}; qk/av bmm and flash attention {b, heads, s, head dim, causal}; zeros otherwise.
  std::array<int64_t, 5> shape{};

  IdxRange outputs;   // storages this op allocates in forward (views allocate nothing)
  IdxRange inputs;    // distinct storages it reads in forward (one forward use each)
  IdxRange saves;     // distinct storages it saves for backward
  int64_t fwd_transient_bytes = 0;  // allocated and freed inside its forward
  int64_t bwd_transient_bytes = 0;  // allocated and freed inside its backward

  // Backward node (static: independent of the strategy, DESIGN.md §3 event protocol).
  IdxRange bwd_allocs;     // gradient storages it allocates (first arrivals, lazy param grads)
  int64_t bwd_accum_bytes = 0;  // gradients accumulated in place into an earlier arrival
  IdxRange bwd_frees;      // gradient storages whose last use is this node

  OpCost fwd;
  OpCost bwd;
  // --- feat (issue 13) ---
  bool fp8 = false;  // its GEMMs run on fp8 tensor cores (--fp8: sim/src/fp8.cpp)
  // --- end feat ---
  // --- feat2 (issue 13): torch's context_parallel ring (sim/src/cp.cpp, CpRing::kTorchAllGather)
  int64_t cp_gather_bytes = 0;  // forward and backward: one all-gather of k and v (output bytes)
  int64_t cp_dkv_bytes = 0;     // backward: each of the cp steps' fp32 dk, dv permute (per rank)
  // memory-bound kernels run after the op's main kernels, in sequence (the ring's merges)
  int64_t fwd_serial_bytes = 0, bwd_serial_bytes = 0;
  int32_t fwd_serial_kernels = 0, bwd_serial_kernels = 0;
  // --- end feat2 ---
  // --- fp8sac (issue 10): what a selective-AC policy caches of an op with several outputs ---
  // Only the first `sac_mm_outputs` outputs are the op's matmul output, the tensor a policy that
  // saves aten.mm caches; the later ones are made by ops the policies recompute (torchao's fp8
  // cast of the input: float8_linear.py @ eab345c). -1: every output is the matmul's.
  int8_t sac_mm_outputs = -1;
  // The output (index) torchtitan's _save_list keeps whatever the mm count: aten.abs of
  // torchao's amax (torch.max(torch.abs(x)), float8_utils.py @ eab345c tensor_to_amax;
  // parallelize_llama.py @ 9dec370:221). -1: none.
  int8_t sac_tt_always_output = -1;
  // --- end fp8sac ---
  // --- time6 (issue 11): of a causal flash op's shape[0] calls, how many run without the causal
  // mask at the FLOPs of a causal one (a load-balanced CP ring's steps after the first: half the
  // pairs of a full block, sim/src/cp.cpp); timed at the kernel's non-causal rate (kernels.cpp)
  int64_t noncausal_calls = 0;
  // --- end time6 ---
  // --- polish: the projection a linear op is (LinearSite); kNone for every other op
  LinearSite site = LinearSite::kNone;
  // --- ds3 (issue 10): the persistent storages (parameters, frozen bases, buffers) its forward
  // reads, which `inputs` leaves out: the module trace of DeepSpeed stage 3's coordinator
  // (sim/src/deepspeed.cpp) ---
  IdxRange persistent_reads;
  // --- end ds3 ---
  // --- moetp (issue 13): of param_numel, the routed experts' elements (Storage::expert), whose
  // gradients Megatron reduces over the expert-data-parallel group, not dp (engine.cpp) ---
  int64_t expert_param_numel = 0;
  // a shared expert's op under --moe-shared-expert-overlap: it runs on SharedExpertMLP.stream
  // while the dispatcher's all-to-alls of its MoE layer run (engine.cpp moe_overlap)
  bool moe_overlap = false;
  // --- end moetp ---
  // --- time9 (issue 11): a fused attention op's dropout probability on the probabilities (its
  // draft's p), which the kernel applies inside (philox in-kernel); timed by kernels.cpp
  // attention_dropout_factor. 0 for every other op.
  float attn_dropout = 0;
  // --- end time9 ---
};

// fp8sac (issue 10): whether a selective-AC cache holds output k of the op, given whether the
// policy keeps the op's matmul (`kept`) and whether the policy is sac:torchtitan (`tt`):
// torchtitan's always-kept output (eager amax's abs), then the matmul's outputs when kept; the
// outputs after the matmul's (fp8 casts) never. Shared by the schedule and the engine.
inline bool sac_cached_output(const Op& op, int k, bool kept, bool tt) {
  if (tt && k == op.sac_tt_always_output) return true;
  if (op.sac_mm_outputs >= 0 && k >= op.sac_mm_outputs) return false;
  return kept;
}

struct Graph {
  std::vector<Storage> storages;
  std::vector<Op> ops;         // forward order
  std::vector<int32_t> idx;    // backing store of every IdxRange
  int64_t n_blocks = 0;
  std::vector<IdxRange> block_ops;  // per block: its ops (begin = first op index)

  std::vector<int32_t> persistent;    // allocated before the step and kept (weights, state)
  std::vector<int32_t> param_storages;  // the parameters among them
  std::vector<int32_t> step_end_frees;  // lazily allocated param grads, freed by zero_grad
  std::vector<int32_t> autocast_cached; // weight casts held by autocast's cache until forward ends
  // hfimpl: tensors the model's forward returns (HF's logits in its ModelOutput), held until the
  // forward pass (the loss included) ends
  std::vector<int32_t> forward_held;
  std::vector<int32_t> initial_uses;    // per storage: forward consumers (refcount start)
  std::vector<IdxRange> consumers;      // per storage: its forward consumer ops, ascending

  // Per op, for executing the step for real (harness/executor): filled by build_graph_exec()
  // only, empty otherwise (build_graph stays as fast as before).
  std::vector<OpArgs> args;
  std::vector<int32_t> param_grads;  // per param_storages entry: its grad storage, -1 persistent

  int64_t optimizer_transient_bytes = 0;  // e.g. foreach Adam's sqrt(v) copy
  OpCost optimizer_cost;                  // bytes moved by the optimizer step

  int64_t params = 0;           // whole model
  int64_t params_per_rank = 0;
  int64_t weights_bytes = 0;
  int64_t grads_bytes = 0;
  int64_t optimizer_bytes = 0;
  int64_t workspace_bytes = 0;
  int64_t comm_persistent_bytes = 0;
  int64_t tokens = 0;           // tokens per micro-batch and rank-group (b * s)
  int64_t tp = 1;               // tensor-parallel ranks (collective sizes)
  int64_t dp = 1;               // data-parallel ranks
  int zero = 0;                 // ZeRO stage over the dp ranks (3: FSDP-style per-block gathers)
  int64_t pp = 1;               // pipeline stages (rank placement for the topology)
  Precision precision = Precision::kBf16Amp;
  Profile profile = Profile::kPytorch;
  std::optional<Impl> impl;
  std::optional<bool> reentrant;  // --reentrant; unset: the implementation's checkpoint API  // the code base modeled (resolved); unset under the paper profile
  AllocatorKind allocator = AllocatorKind::kExact;  // how the engine also counts reserved bytes
  int64_t prefetch = 1;         // offload: blocks fetched back ahead of their backward
  // --- moe ---
  int64_t ep = 1;               // expert-parallel ranks (all-to-all group, within dp)
  // --- feat (issue 13) ---
  int64_t lora_rank = 0;        // LoRA adapters' rank (0: full fine-tuning); base frozen
  int64_t cp = 1;               // context-parallel ranks (the ring's size)
  // --- end feat ---

  const int32_t* begin(IdxRange r) const { return idx.data() + r.begin; }
  const int32_t* end(IdxRange r) const { return idx.data() + r.begin + r.count; }

  // --- time (issue 11) ---
  // The optimizer step's launches: multi_tensor_apply chunks (foreach, fused: true) or one
  // launch per parameter tensor and op (a per-parameter for-loop, --optimizer adam-loop: false).
  bool optimizer_multi_tensor = true;
  // --- implver (issue 10): the release of `impl` (TrainSetup::impl_version; empty: default) ---
  std::string_view impl_version;
  // --- hfds (issue 10): how ZeRO 0-2 reduce the gradients under deepspeed-bf16
  // (sim/src/deepspeed.cpp); 0: torch DDP's buckets (engine.cpp bucket_grads) ---
  int64_t dp_bucket_bytes = 0;   // bytes per reduction bucket
  bool dp_reduce_blocking = false;  // the compute stream waits for each bucket (no overlap_comm)
  // --- end hfds ---
  // --- ds3 (issue 10): storages allocated as backward starts and freed once it ends, before the
  // optimizer (DeepSpeed stage 2's IPG buffer, released by its backward epilogue); each is also
  // in step_end_frees, which holds it through the backward ---
  std::vector<int32_t> backward_end_frees;
  // --- end ds3 ---
  // --- inductor (issue 10): the blocks' saves are torch.compile's min-cut partition
  // (sim/src/inductor.cpp), not eager autograd's: a backward reads tensors it recomputes ---
  bool compiled = false;
  int64_t etp = 1;  // etp (issue 13): expert-tensor-parallel ranks (OpCost::comm_group 1)
  // --- ds3b (issue 10/11): DeepSpeed ZeRO-3's communication as its coordinator issues it
  // (sim/src/deepspeed.cpp ds3_replay; engine.cpp ds3_enter, ds3_reduce). One entry per module
  // step of the trace (forward order, then backward); events 2t (step t's fetch) and 2t + 1
  // (its prefetch), issued in that order on the data-parallel stream ---
  struct Ds3Step {
    int64_t fetch_bytes = 0;     // bf16 bytes all-gathered for the module itself
    int64_t prefetch_bytes = 0;  // bf16 bytes all-gathered ahead, after the module's wait
    int32_t wait_event = -1;     // the last event that gathered one of its parameters (-1: none)
  };
  std::vector<Ds3Step> ds3_steps;
  std::vector<int32_t> ds3_fwd_step, ds3_bwd_step;  // per op: its step in forward / backward, -1
  int64_t ds3_reduce_bucket_bytes = 0;  // > 0: stage 3 reduce-scatters IPG buckets of this size
  // --- end ds3b ---
  // --- ds3c (issue 10): what the engine needs to replay the coordinator over the step's own
  // module order (sim/src/deepspeed.cpp ds3_replay), filled at stage 3 under deepspeed-bf16
  // only. ds3_steps above stay the replay of the trace without recompute (forward, backward).
  struct Ds3Params {
    std::vector<int32_t> param_of;      // per storage: its index among the sharded parameters, -1
    std::vector<int64_t> numel, bytes;  // per sharded parameter: whole elements and bf16 bytes
    std::vector<uint8_t> persist;       // ds_persist (<= stage3_param_persistence_threshold)
    int64_t prefetch_bucket = 0, max_live = 0, reuse_distance = 0;  // elements
  };
  Ds3Params ds3;
  // --- end ds3c ---
  // --- feat14 (issue 13): fp32 main_grad bytes of the parameters replicated over TP that see
  // sequence-sharded tokens (norms, the MoE router and shared-expert gate, MLA's down
  // projections) and that Megatron all-reduces over the TP group after the data-parallel
  // reduction (finalize_model_grads.py _allreduce_non_tensor_model_parallel_grads; engine.cpp
  // finish_grads); 0 without SP, at tp 1 or under a code base without it ---
  int64_t tp_replicated_grad_bytes = 0;
  // --- end feat14 ---
};

// Builds the step's graph for one rank. Validates model and setup first (ConfigError on bad input;
// checked arithmetic throughout). The device matters only for its cuBLAS workspace size.
// Blocks are identical, so a deep model is built with three blocks and its middle block cloned
// (tests/test_graph_expand.cpp holds the result equal to building every block).
Graph build_graph(const ModelConfig& model, const TrainSetup& setup, const Device& device);
// The same, into `out`, reusing the capacity of its vectors (Workspace).
void build_graph(const ModelConfig& model, const TrainSetup& setup, const Device& device,
                 Graph& out);
// One pipeline stage's graph (DESIGN.md §3; Korthikanti et al. 2022 §4.2.3): blocks
// [stage L/p, (stage + 1) L/p) of the model, with the embedding only on stage 0 and the head and
// loss only on stage p - 1; the others receive their input and send their output. Block indices
// in the graph are local to the stage (0 .. L/p - 1). With p = 1 it is build_graph.
void build_stage_graph(const ModelConfig& model, const TrainSetup& setup, const Device& device,
                       int64_t stage, Graph& out);
// The same graph built op by op for every block (the reference for the cloned build).
Graph build_graph_direct(const ModelConfig& model, const TrainSetup& setup, const Device& device);

// build_graph_direct with Graph::args and Graph::param_grads filled: the graph the CPU reference
// executor runs (harness/executor). Same ops, storages and order as build_graph's.
Graph build_graph_exec(const ModelConfig& model, const TrainSetup& setup, const Device& device);

// A synthetic chain for testing Chen's law: n blocks, each one op that saves only its input, so a
// checkpoint costs exactly one block's activations (c = A = bytes).
Graph build_chain_graph(int64_t n_blocks, int64_t bytes);

}  // namespace sim
