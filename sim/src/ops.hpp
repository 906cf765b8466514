// Internal: the op vocabulary the op lists of docs/memory-model.md are written in (linear, norm,
// dropout, casts, residual adds, ...), and the sub-lists of a transformer block, shared by the
// files that build blocks (graph_blocks.cpp and the per-family/feature files beside it).
#pragma once

#include <cstdint>

#include "builder.hpp"
#include "sim/error.hpp"

namespace sim::detail {

inline constexpr const char* kField = "activation bytes";

inline int64_t mul(int64_t a, int64_t b) { return checked_mul(a, b, kField); }
inline int64_t bytes(int64_t numel, DType dt) { return mul(numel, bytes_of(dt)); }
inline int64_t numel_of(const Tensor& t) { return t.bytes / bytes_of(t.dtype); }

// Collectives of Megatron-core tensor parallelism (OpCost::comm_kind).
inline constexpr uint8_t kAllReduce = 1, kAllGather = 2, kReduceScatter = 3;
// feat: the context-parallel ring's point-to-point steps (Collective::kSendRecv)
inline constexpr uint8_t kSendRecv = 4;

// Type promotion of a binary pointwise op (fp32 wins, as torch's result_type does here).
inline DType promote(DType a, DType b) {
  return (a == DType::kF32 || b == DType::kF32) ? DType::kF32 : a;
}

// famdec (issue 12): RMSNorm with its weight applied in fp32 (Gemma, OLMo 2), blocks_famdec.cpp
int32_t famdec_rms_norm(Builder& bld, const Dims& dm, int32_t x, int64_t width, const char* name);
// --- feat (issue 13): a linear under LoRA / QLoRA (sim/src/lora.cpp): the frozen base layer
// and, on a targeted site, PEFT's adapter. Called by Ops::linear when dm.lora_rank > 0.
int32_t lora_linear(Builder& bld, const Dims& dm, int32_t x, int64_t in_f, int64_t out_f,
                    bool bias, const char* name, const char* out_role, int32_t shared_param,
                    LinearSite site);
// PEFT's enable_input_require_grads hook (a forward hook on the input embeddings:
// output.requires_grad_(True)) makes the word lookup's output a leaf that requires grad, which the
// autograd graph keeps (AccumulateGrad) until the graph is freed at the step's end: `x` itself when
// it is the lookup (`summed` false), else a separate lookup output summed into x.
void lora_input_embeddings(Builder& bld, const Dims& dm, int32_t x, bool summed);
// FP8 linears (sim/src/fp8.cpp): what the recipe saves, caches and casts for one linear draft
// whose saves are {x16, w}; d.op.site is the linear's site (the lm head stays 16-bit).
void fp8_linear(Builder& bld, const Dims& dm, OpDraft& d, int32_t x16, int64_t in_f, int64_t out_f);
// Context parallelism (sim/src/cp.cpp): the ring's FLOPs, buffers and send/recv on the flash op.
void cp_ring_attention(OpDraft& d, const Dims& dm, int64_t q_bytes, int64_t kv_bytes,
                       int64_t out_bytes, int64_t lse_bytes);
// --- end feat ---
// time5 (issue 11): torchtitan's fused Triton RMSNorm (sim/src/norm_kernels.cpp)
int32_t triton_rms_norm(Builder& bld, const Dims& dm, int32_t x, const char* name);
// te_norm (issue 10): Transformer Engine's fused RMSNorm of width `width` (LayerNormLinear's norm,
// TENorm; sim/src/norm_te.cpp): saves x, the weight and fp32 rsigma per row; returns ln_out
int32_t te_rms_norm(Builder& bld, const Dims& dm, int32_t x, int64_t width, const char* name);
// tece (issue 10): the bytes Transformer Engine's norm backward allocates as its workspace
// (dgamma_part, for LayerNorm also dbeta_part, per CTA column, fp32; sim/src/norm_te.cpp) for
// `rows` rows of `cols` in `dt` on dm's device.
int64_t te_norm_bwd_workspace(const Dims& dm, bool layer_norm, int64_t rows, int64_t cols, DType dt);

class Ops {
 public:
  Ops(Builder& bld, const Dims& dm) : b_(bld), dm_(dm) {}

  OpDraft draft(OpKind kind, const char* name) {
    OpDraft d;
    d.op.kind = kind;
    d.op.name = name;
    d.op.math16 = dm_.precision != Precision::kFp32;
    return d;
  }

  int32_t fresh_like(int32_t like, const char* role) {
    const Tensor& t = b_.tensor(like);
    return b_.fresh(t.bytes, t.dtype, role);
  }

  // Autocast: a cast to `dt` when x is not already `dt` (aten/src/ATen/autocast_mode.cpp
  // cached_cast: activations are never cached). ToCopyBackward allocates x's gradient.
  int32_t cast(int32_t x, DType dt, const char* name, const char* role) {
    const Tensor& t = b_.tensor(x);
    if (t.dtype == dt) return x;
    OpDraft d = draft(OpKind::kCast, name);
    d.op.math16 = false;
    d.exec = Exec::kCast;
    d.inputs.push_back({x, GradRule::kNew});
    int32_t y = b_.fresh(bytes(numel_of(t), dt), dt, role);
    d.outputs.push_back(y);
    b_.add_op(std::move(d));
    return y;
  }
  int32_t to_half(int32_t x, const char* name, const char* role) {
    return dm_.amp ? cast(x, dm_.half_dt, name, role) : x;
  }

  // A weight (and bias) as a linear uses it. Under autocast the fp32 parameter is cast to 16 bits
  // once per forward and the cast is cached until autocast exits (autocast_mode.cpp cached_cast:
  // leaf tensors that require grad are cached), so it lives through the forward pass.
  // Returns the weight as the matmul uses it, and sets *bias_cast to the bias's cast (or -1).
  // addmm saves its mat2 (the weight cast) but not the bias, whose cast only the cache holds.
  int32_t weight(int64_t numel_w, int64_t numel_b, const char* name, int32_t shared_param,
                 int32_t* bias_cast) {
    *bias_cast = -1;
    int32_t p = shared_param >= 0 ? shared_param : b_.param(numel_w + numel_b, dm_.param_dt, name);
    if (!dm_.amp) return p;
    OpDraft d = draft(OpKind::kCast, "weight cast");
    d.op.math16 = false;
    d.exec = Exec::kCast;  // weight, then bias: consecutive elements of the parameter
    d.inputs.push_back({p, GradRule::kNew});
    int32_t c = b_.fresh(bytes(numel_w, dm_.half_dt), dm_.half_dt, "weight cast", Category::kCasts);
    d.outputs.push_back(c);
    if (numel_b > 0) {
      *bias_cast = b_.fresh(bytes(numel_b, dm_.half_dt), dm_.half_dt, "bias cast", Category::kCasts);
      d.outputs.push_back(*bias_cast);
    }
    b_.add_op(std::move(d));
    b_.autocast_cache(c);
    if (*bias_cast >= 0) b_.autocast_cache(*bias_cast);
    return c;
  }

  enum class Tp : uint8_t { kNone, kColumn, kRow };

  // y = x W^T + b. Saves its input and its weight (torch: addmm/mm save self and mat2 for the
  // other's gradient). Column-parallel: input tokens are sequence-sharded under SP and gathered
  // for the matmul; the saved input is the shard, re-gathered in backward (Megatron-core
  // LinearWithGradAccumulationAndAsyncCommunication). Row-parallel: output partial sums are
  // all-reduced, or reduce-scattered under SP.
  // `site`: which projection this is (LinearSite, polish); LoRA and FP8 match on it.
  int32_t linear(int32_t x, int64_t in_f, int64_t out_f, bool bias, Tp tp, const char* name,
                 const char* out_role, int32_t shared_param = -1,
                 LinearSite site = LinearSite::kNone) {
    // feat: LoRA / QLoRA replace every linear of the model (single-rank HF: no TP here)
    if (dm_.lora_rank > 0)
      return lora_linear(b_, dm_, x, in_f, out_f, bias, name, out_role, shared_param, site);
    const bool col = tp == Tp::kColumn, row = tp == Tp::kRow;
    int32_t bias_cast = -1;
    int32_t w = weight(mul(in_f, out_f), bias && shared_param < 0 ? out_f : 0, name, shared_param,
                       &bias_cast);
    int32_t xin = to_half(x, "input cast", "linear input cast");
    const DType dt = dm_.amp ? dm_.half_dt : b_.tensor(xin).dtype;
    const int64_t e = bytes_of(dt);
    // Tokens the matmul runs on: TP regions see the whole sequence (gathered under SP); a
    // replicated linear (kNone) runs on whatever its input holds.
    const int64_t n_in = numel_of(b_.tensor(xin)) / in_f;
    const int64_t n_full = tp == Tp::kNone ? n_in : dm_.n_full();
    const int64_t n_out = row ? dm_.n_local() : n_full;

    OpDraft d = draft(OpKind::kLinear, name);
    d.op.site = site;
    // bias: a separate input (its cast, or BERT's own decoder bias), else inside an fp32 weight
    const int64_t bias_at = bias_cast >= 0 || (shared_param >= 0 && bias) ? 2
                            : bias && !dm_.amp                           ? 1
                                                                         : 0;
    d.exec = Exec::kLinear;
    d.dim = {n_in, in_f, out_f, bias_at};
    d.inputs.push_back({xin, GradRule::kNew});
    d.inputs.push_back({w, GradRule::kNew});
    if (bias_cast >= 0) d.inputs.push_back({bias_cast, GradRule::kNew});
    if (shared_param >= 0 && bias) {
      // A tied weight with a bias of its own (BERT's decoder): the bias is a separate parameter.
      d.inputs.push_back({b_.param(out_f, dm_.param_dt, "output bias"), GradRule::kNew});
    }
    int32_t y = b_.fresh(bytes(mul(n_out, out_f), dt), dt, out_role);
    d.outputs.push_back(y);
    d.saves = {xin, w};
    d.fused_wgrad = dm_.precision == Precision::kBf16Mixed && dm_.grad_accum_fusion;
    if (dm_.precision == Precision::kBf16Mixed && !dm_.grad_accum_fusion) {
      // time6 (issue 11): Megatron's --no-gradient-accumulation-fusion. The wgrad GEMM writes a
      // 16-bit weight gradient and the DDP backward hook adds it into the fp32 main_grad
      // (megatron/core/distributed/distributed_data_parallel.py @ d98e8a64dd
      // `param.main_grad.add_(param.grad.data)`; main_grad is fp32 under --bf16:
      // megatron/training/arguments.py turns accumulate_allreduce_grads_in_fp32 on): one more
      // kernel after the backward, reading the 16-bit gradient and reading and writing main_grad,
      // 2 + 4 + 4 B per weight element (the gradient itself is the transient the builder adds
      // for an unfused wgrad: graph_builder.cpp, `fused_wgrad`). The weight only: a bias's
      // gradient takes the hook's add with the fusion on or off.
      d.op.bwd_serial_bytes += mul(mul(in_f, out_f), 2 + 4 + 4);
      d.op.bwd_serial_kernels += 1;
    }
    const int64_t mm = mul(mul(2, n_full), mul(in_f, out_f));  // 2mnk
    d.op.fwd.flops = mm;
    d.op.bwd.flops = mul(2, mm);  // grad input and grad weight
    d.op.sac_save = true;         // aten.mm is in torchtitan's save list
    if (dm_.fp8 != Fp8Recipe::kOff) fp8_linear(b_, dm_, d, xin, in_f, out_f);  // feat
    if (dm_.t > 1) {
      const int64_t full_in = mul(mul(n_full, in_f), e), full_out = mul(mul(n_full, out_f), e);
      if (col && dm_.sp) {
        d.op.fwd_transient_bytes = full_in;              // all-gathered input
        d.op.bwd_transient_bytes = mul(2, full_in);      // re-gathered input, full grad input
        d.op.fwd.comm_bytes = full_in, d.op.fwd.comm_kind = kAllGather;
        d.op.bwd.comm_bytes = full_in, d.op.bwd.comm_kind = kReduceScatter;
      } else if (col) {
        d.op.bwd.comm_bytes = full_in, d.op.bwd.comm_kind = kAllReduce;
      } else if (row && dm_.sp) {
        d.op.fwd_transient_bytes = full_out;             // partial sums before reduce-scatter
        d.op.bwd_transient_bytes = full_out;             // gathered grad output
        d.op.fwd.comm_bytes = full_out, d.op.fwd.comm_kind = kReduceScatter;
        d.op.bwd.comm_bytes = full_out, d.op.bwd.comm_kind = kAllGather;
      } else if (row) {
        d.op.fwd.comm_bytes = full_out, d.op.fwd.comm_kind = kAllReduce;
      }
    }
    b_.add_op(std::move(d));
    return y;
  }

  // Dropout (torch native_dropout): allocates output and a 1-byte mask, saves only the mask.
  // p = 0 returns its input (ATen dropout: p == 0 is the identity), so no mask is kept.
  int32_t dropout(int32_t x, double p, const char* name) {
    if (p <= 0.0) return x;
    const Tensor& t = b_.tensor(x);
    OpDraft d = draft(OpKind::kDropout, name);
    d.exec = Exec::kDropout;
    d.p = static_cast<float>(p);
    d.inputs.push_back({x, GradRule::kNew});
    int32_t y = fresh_like(x, "dropout out");
    int32_t m = b_.fresh(bytes(numel_of(t), DType::kBool), DType::kBool, "dropout mask");
    d.outputs = {y, m};
    d.saves = {m};
    b_.add_op(std::move(d));
    return y;
  }

  // Residual add: saves nothing; the gradient passes to both inputs (AddBackward), cast where
  // the input's dtype differs (then it allocates).
  int32_t add(int32_t x, int32_t y, const char* name) {
    const Tensor& tx = b_.tensor(x);
    const DType dt = promote(tx.dtype, b_.tensor(y).dtype);
    OpDraft d = draft(OpKind::kAdd, name);
    d.exec = Exec::kAdd;
    d.inputs.push_back({x, GradRule::kPass, 0});
    d.inputs.push_back({y, GradRule::kPass, 0});
    int32_t z = b_.fresh(bytes(numel_of(tx), dt), dt, "residual");
    d.outputs.push_back(z);
    b_.add_op(std::move(d));
    return z;
  }

  // A pointwise op of one input that saves its input (GeLU, SiLU: the backward needs self).
  int32_t unary_saving_input(OpKind kind, int32_t x, const char* name, const char* role) {
    OpDraft d = draft(kind, name);
    d.exec = kind == OpKind::kGelu ? Exec::kGelu : Exec::kSilu;
    d.inputs.push_back({x, GradRule::kNew});
    int32_t y = fresh_like(x, role);
    d.outputs.push_back(y);
    d.saves = {x};
    b_.add_op(std::move(d));
    return y;
  }

  // The MLP's GeLU. HF's gelu_new (activations.py NewGELUActivation) is pointwise ops:
  //   0.5 * x * (1.0 + tanh(sqrt(2 / pi) * (x + 0.044715 * pow(x, 3.0))))
  // evaluated left to right: t1 = 0.5 * x (MulBackward0 saves only the scalar), pow (saves its
  // input; on CUDA autocast's fp32 list, so x is first cast to fp32 and the cast is saved),
  // 0.044715 * p, x + that (promoted), sqrt(2/pi) * that (nothing saved), tanh (saves its
  // output), 1.0 + tanh (nothing saved), t1 * that (saves both operands). derivatives.yaml:
  // pow.Tensor_Scalar: self; tanh: result; mul.Tensor: self and other when both need grad.
  // Everything else (nn.GELU, F.gelu exact or tanh) is one op saving its input.
  int32_t gelu(int32_t x) {
    const bool ops = dm_.impl && dm_.impl->gelu == GeluVariant::kConfig &&
                     dm_.model->activation == Activation::kGeluNew;
    if (!ops) return unary_saving_input(OpKind::kGelu, x, "gelu", "gelu out");
    // exec12: each op's executor kernel (Exec) and its Python scalar (OpDraft::p)
    auto scalar_op = [&](OpKind kind, int32_t in, const char* name, bool pass, bool save_out,
                         Exec exec, double scalar) {
      const Tensor t = b_.tensor(in);
      OpDraft d = draft(kind, name);
      d.op.math16 = false;
      d.exec = exec;
      d.p = static_cast<float>(scalar);
      d.inputs.push_back({in, pass ? GradRule::kPass : GradRule::kNew, 0});
      int32_t y = b_.fresh(t.bytes, t.dtype, name);
      d.outputs.push_back(y);
      if (save_out) d.saves.push_back(y);
      b_.add_op(std::move(d));
      return y;
    };
    const Tensor tx = b_.tensor(x);
    const int64_t n = numel_of(tx);
    int32_t t1 = scalar_op(OpKind::kMul, x, "gelu_new 0.5*x", false, false, Exec::kScale, 0.5);
    int32_t xp = dm_.amp ? cast(x, DType::kF32, "gelu_new pow cast", "gelu_new pow input") : x;
    int32_t p = -1;
    {
      OpDraft d = draft(OpKind::kMul, "gelu_new pow");
      d.op.math16 = false;
      d.exec = Exec::kPow;  // exec12
      d.p = 3.0f;
      d.inputs.push_back({xp, GradRule::kNew});
      p = b_.fresh(b_.tensor(xp).bytes, b_.tensor(xp).dtype, "gelu_new pow");
      d.outputs.push_back(p);
      d.saves = {xp};
      b_.add_op(std::move(d));
    }
    int32_t c = scalar_op(OpKind::kMul, p, "gelu_new 0.044715*pow", false, false,
                        Exec::kScale, 0.044715);
    int32_t inner = add(x, c, "gelu_new x+");
    int32_t sc = scalar_op(OpKind::kMul, inner, "gelu_new sqrt(2/pi)*", false, false,
                         Exec::kScale, 0.7978845608028654);
    int32_t th = scalar_op(OpKind::kGelu, sc, "gelu_new tanh", false, true, Exec::kTanh, 0);
    int32_t one =
        scalar_op(OpKind::kAdd, th, "gelu_new 1+tanh", true, false, Exec::kAddScalar, 1.0);
    const DType dt = promote(b_.tensor(t1).dtype, b_.tensor(one).dtype);
    return mul_op(t1, one, bytes(n, dt), dt, "gelu_new product", "gelu out", true, true,
                  Exec::kMul, 0, 0);  // exec12: the executor's elementwise product
  }

  // a * b with both requiring grad: saves both (MulBackward0 needs other for self and self for
  // other).
  int32_t mul_op(int32_t x, int32_t y, int64_t out_bytes, DType dt, const char* name,
                 const char* role, bool save_x, bool save_y, Exec exec, int64_t rows,
                 int64_t cols, int64_t bwd_inner_bytes = 0, uint8_t bwd_kernels = 1) {
    OpDraft d = draft(OpKind::kMul, name);
    d.exec = exec;
    d.bwd_inner_bytes = bwd_inner_bytes;  // time3 (issue 11)
    d.op.bwd.kernels = bwd_kernels;
    d.dim = {rows, cols};
    d.inputs.push_back({x, GradRule::kNew});
    d.inputs.push_back({y, GradRule::kNew});
    int32_t z = b_.fresh(out_bytes, dt, role);
    d.outputs.push_back(z);
    if (save_x) d.saves.push_back(x);
    if (save_y) d.saves.push_back(y);
    b_.add_op(std::move(d));
    return z;
  }

  // LayerNorm (torch native_layer_norm): saves input, weight, bias, mean and rstd (fp32, one per
  // token each). Under autocast layer_norm runs in fp32 (autocast_mode.cpp fp32 list).
  int32_t layer_norm(int32_t x, const char* name) {
    const int64_t n = numel_of(b_.tensor(x)) / dm_.h;
    int32_t w = b_.param(dm_.model->norm_bias ? 2 * dm_.h : dm_.h, dm_.param_dt, name);
    int32_t xin = dm_.amp ? cast(x, DType::kF32, "norm input cast", "norm input cast") : x;
    const DType out_dt = dm_.amp ? DType::kF32 : b_.tensor(xin).dtype;
    OpDraft d = draft(OpKind::kLayerNorm, name);
    d.exec = Exec::kLayerNorm;
    d.dim = {n, dm_.h, dm_.model->norm_bias ? 1 : 0, dm_.paper ? 0 : 1};
    d.inputs.push_back({xin, GradRule::kNew});
    d.inputs.push_back({w, GradRule::kNew});
    int32_t y = b_.fresh(bytes(mul(n, dm_.h), out_dt), out_dt, "norm out");
    d.outputs.push_back(y);
    d.saves = {xin, w};
    // tece (issue 10): under Megatron's TE spec this is TE's LayerNorm, whose backward allocates
    // its dgamma/dbeta partials (sim/src/norm_te.cpp); under the local spec apex's
    // FusedLayerNorm (models/backends.py LNImpl), whose backward allocates part_grad_gamma and
    // part_grad_beta, [16, h] fp32 each (NVIDIA/apex csrc/layer_norm_cuda_kernel.cu @ 6424da3b
    // HostLayerNormGradient: part_size = 16; gamma only without a bias)
    if (dm_.impl && dm_.impl->te_norms && !dm_.paper)
      d.op.bwd_transient_bytes =
          dm_.local_spec
              ? bytes(mul((dm_.model->norm_bias ? 2 : 1) * 16, dm_.h), DType::kF32)
              : te_norm_bwd_workspace(dm_, true, n, dm_.h, b_.tensor(xin).dtype);
    if (!dm_.paper) {  // the paper ignores norm statistics (Korthikanti §4.1)
      int32_t stats = b_.fresh(bytes(mul(2, n), DType::kF32), DType::kF32, "norm mean+rstd");
      d.outputs.push_back(stats);
      d.saves.push_back(stats);
    }
    b_.add_op(std::move(d));
    return y;
  }

  // RMSNorm as HuggingFace's LlamaRMSNorm runs it in eager mode:
  //   h = x.to(fp32); var = h.pow(2).mean(-1); r = rsqrt(var + eps); y = w * (h * r).to(x.dtype)
  // pow saves h, rsqrt saves r, the mul saves h and r, the weight mul saves its 16-bit operand.
  // fam12: `scale_input` is T5LayerNorm's `hidden_states * torch.rsqrt(variance + eps)`
  // (modeling_t5.py @ 6b8b757d), which multiplies the input itself (16-bit under bf16-mixed:
  // the product saves it and promotes to fp32) where Llama's multiplies the fp32 copy.
  int32_t rms_norm(int32_t x, const char* name, bool scale_input = false) {
    const Tensor tx = b_.tensor(x);
    const int64_t n = numel_of(tx) / dm_.h;
    int32_t w = b_.param(dm_.h, dm_.param_dt, name);
    int32_t h32 = cast(x, DType::kF32, "rmsnorm to fp32", "rmsnorm fp32 input");
    {  // pow(2).mean(-1): the pow output is freed once the mean has it
      OpDraft d = draft(OpKind::kMul, "rmsnorm pow+mean");
      d.exec = Exec::kMeanSq;
      d.dim = {n, dm_.h};
      d.inputs.push_back({h32, GradRule::kNew});
      d.op.fwd_transient_bytes = bytes(mul(n, dm_.h), DType::kF32);
      d.op.bwd_transient_bytes = bytes(mul(n, dm_.h), DType::kF32);
      int32_t var = b_.fresh(bytes(n, DType::kF32), DType::kF32, "rmsnorm variance");
      d.outputs.push_back(var);
      d.saves = {h32};
      // time3 (issue 11): two kernels forward, pow (writes the fp32 square) and mean (reads it
      // back): + 2 x 4 B per element; four backward (torch/csrc/autograd/FunctionsManual.cpp:
      // mean_backward's expanded grad / N writes 4 B; pow_backward's grad * (2 * x.pow(1)): the
      // pow(1) copy, the scalar multiply and the product read 4 + 4 + 8 B and write 4 + 4 + 4 B):
      // 32 B per element against the 12 counted from its saves and gradients, + 20
      d.fwd_inner_bytes = bytes(mul(mul(n, dm_.h), 2), DType::kF32);
      d.bwd_inner_bytes = bytes(mul(mul(n, dm_.h), 5), DType::kF32);
      d.op.fwd.kernels = 2;
      d.op.bwd.kernels = 4;
      b_.add_op(std::move(d));
      // rsqrt(var + eps): the add makes a new [n] tensor, rsqrt saves its output
      OpDraft r = draft(OpKind::kMul, "rmsnorm rsqrt");
      r.exec = Exec::kRsqrt;
      r.dim = {n};
      r.inputs.push_back({var, GradRule::kNew});
      r.op.fwd_transient_bytes = bytes(n, DType::kF32);
      int32_t rs = b_.fresh(bytes(n, DType::kF32), DType::kF32, "rmsnorm rstd");
      r.outputs.push_back(rs);
      r.saves = {rs};
      b_.add_op(std::move(r));
      // time3 (issue 11): a broadcast operand's gradient is the full product reduced
      // (MulBackward0: grad * other, then sum_to_size; torch 1.13's CPU profiler lists mul, mul,
      // sum): the product is written and read back, + 2 x its bytes, three kernels.
      const int64_t prod32 = bytes(mul(n, dm_.h), DType::kF32);
      int32_t hn = mul_op(scale_input ? x : h32, rs, bytes(mul(n, dm_.h), DType::kF32), DType::kF32,
                          "rmsnorm scale", "rmsnorm normalized", true, true, Exec::kRowScale, n,
                          dm_.h, mul(2, prod32), 3);
      int32_t hc = cast(hn, tx.dtype, "rmsnorm to input dtype", "rmsnorm normalized");
      const DType out_dt = promote(dm_.param_dt, b_.tensor(hc).dtype);
      // MulBackward0 saves self (w) for other's gradient and other (hc) for self's only when w
      // requires grad: a frozen weight (LoRA, feat) keeps hc unsaved.
      const bool wgrad = b_.tensor(w).param;
      return mul_op(w, hc, bytes(mul(n, dm_.h), out_dt), out_dt, "rmsnorm weight", "norm out",
                    true, wgrad, Exec::kColScale, n, dm_.h,
                    wgrad ? mul(2, bytes(mul(n, dm_.h), out_dt)) : 0, wgrad ? 3 : 1);
    }
  }

  int32_t norm(int32_t x, const char* name) {
    if (dm_.model->norm_weight_fp32) return famdec_rms_norm(b_, dm_, x, dm_.h, name);  // famdec
    if (dm_.triton_norm) return triton_rms_norm(b_, dm_, x, name);  // time5 (issue 11)
    // te_norm (issue 10): TE's fused RMSNorm (Megatron's TE spec); its LayerNorm saves what
    // layer_norm saves (input, weight and bias, fp32 mu and rsigma per row)
    if (dm_.impl && dm_.impl->te_norms && !dm_.paper && dm_.model->norm == NormKind::kRmsNorm)
      return te_rms_norm(b_, dm_, x, dm_.h, name);
    return dm_.model->norm == NormKind::kRmsNorm ? rms_norm(x, name) : layer_norm(x, name);
  }

  Builder& b_;
  const Dims& dm_;
};

// The sub-lists of one block (graph_blocks.cpp), for the files that build other blocks from them.
// Self-attention from the (normalized) block input to the input of the output projection:
// the Q/K/V projections, rotary embedding and core_attention.
int32_t build_attention(Builder& bld, const Dims& dm, int32_t attn_in);
// Core attention from q, k, v ([tokens, heads*d] each) to its [tokens, a*d] output: flash, or the
// eager sequence (scores, mask, softmax, dropout, av, output copy) as dm says.
int32_t core_attention(Builder& bld, const Dims& dm, int32_t q, int32_t k, int32_t v);
// The dense MLP from its (normalized) input to the output of its last projection.
int32_t build_mlp(Builder& bld, const Dims& dm, int32_t mlp_in);

}  // namespace sim::detail
