// The op lists of docs/memory-model.md: the embedding, one transformer block, and the head and
// loss, per rank, under the precision regime and profile. Keep the two in step: every op here has
// a row there saying what it saves and why.
#include <algorithm>
#include <string>

#include "builder.hpp"
#include "sim/error.hpp"

namespace sim::detail {
namespace {

constexpr const char* kField = "activation bytes";

int64_t mul(int64_t a, int64_t b) { return checked_mul(a, b, kField); }
int64_t bytes(int64_t numel, DType dt) { return mul(numel, bytes_of(dt)); }
int64_t numel_of(const Tensor& t) { return t.bytes / bytes_of(t.dtype); }

// Collectives of Megatron-core tensor parallelism (OpCost::comm_kind).
constexpr uint8_t kAllReduce = 1, kAllGather = 2, kReduceScatter = 3;

// Type promotion of a binary pointwise op (fp32 wins, as torch's result_type does here).
DType promote(DType a, DType b) { return (a == DType::kF32 || b == DType::kF32) ? DType::kF32 : a; }

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
  int32_t linear(int32_t x, int64_t in_f, int64_t out_f, bool bias, Tp tp, const char* name,
                 const char* out_role, int32_t shared_param = -1) {
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
    d.fused_wgrad = dm_.precision == Precision::kBf16Mixed;
    const int64_t mm = mul(mul(2, n_full), mul(in_f, out_f));  // 2mnk
    d.op.fwd.flops = mm;
    d.op.bwd.flops = mul(2, mm);  // grad input and grad weight
    d.op.sac_save = true;         // aten.mm is in torchtitan's save list
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
    auto scalar_op = [&](OpKind kind, int32_t in, const char* name, bool pass, bool save_out) {
      const Tensor t = b_.tensor(in);
      OpDraft d = draft(kind, name);
      d.op.math16 = false;
      d.inputs.push_back({in, pass ? GradRule::kPass : GradRule::kNew, 0});
      int32_t y = b_.fresh(t.bytes, t.dtype, name);
      d.outputs.push_back(y);
      if (save_out) d.saves.push_back(y);
      b_.add_op(std::move(d));
      return y;
    };
    const Tensor tx = b_.tensor(x);
    const int64_t n = numel_of(tx);
    int32_t t1 = scalar_op(OpKind::kMul, x, "gelu_new 0.5*x", false, false);
    int32_t xp = dm_.amp ? cast(x, DType::kF32, "gelu_new pow cast", "gelu_new pow input") : x;
    int32_t p = -1;
    {
      OpDraft d = draft(OpKind::kMul, "gelu_new pow");
      d.op.math16 = false;
      d.inputs.push_back({xp, GradRule::kNew});
      p = b_.fresh(b_.tensor(xp).bytes, b_.tensor(xp).dtype, "gelu_new pow");
      d.outputs.push_back(p);
      d.saves = {xp};
      b_.add_op(std::move(d));
    }
    int32_t c = scalar_op(OpKind::kMul, p, "gelu_new 0.044715*pow", false, false);
    int32_t inner = add(x, c, "gelu_new x+");
    int32_t sc = scalar_op(OpKind::kMul, inner, "gelu_new sqrt(2/pi)*", false, false);
    int32_t th = scalar_op(OpKind::kGelu, sc, "gelu_new tanh", false, true);
    int32_t one = scalar_op(OpKind::kAdd, th, "gelu_new 1+tanh", true, false);
    const DType dt = promote(b_.tensor(t1).dtype, b_.tensor(one).dtype);
    return mul_op(t1, one, bytes(n, dt), dt, "gelu_new product", "gelu out", true, true,
                  Exec::kNone, 0, 0);
  }

  // a * b with both requiring grad: saves both (MulBackward0 needs other for self and self for
  // other).
  int32_t mul_op(int32_t x, int32_t y, int64_t out_bytes, DType dt, const char* name,
                 const char* role, bool save_x, bool save_y, Exec exec, int64_t rows,
                 int64_t cols) {
    OpDraft d = draft(OpKind::kMul, name);
    d.exec = exec;
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
  int32_t rms_norm(int32_t x, const char* name) {
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
      int32_t hn = mul_op(h32, rs, bytes(mul(n, dm_.h), DType::kF32), DType::kF32,
                          "rmsnorm scale", "rmsnorm normalized", true, true, Exec::kRowScale, n, dm_.h);
      int32_t hc = cast(hn, tx.dtype, "rmsnorm to input dtype", "rmsnorm normalized");
      const DType out_dt = promote(dm_.param_dt, b_.tensor(hc).dtype);
      return mul_op(w, hc, bytes(mul(n, dm_.h), out_dt), out_dt, "rmsnorm weight", "norm out",
                    true, true, Exec::kColScale, n, dm_.h);
    }
  }

  int32_t norm(int32_t x, const char* name) {
    return dm_.model->norm == NormKind::kRmsNorm ? rms_norm(x, name) : layer_norm(x, name);
  }

  Builder& b_;
  const Dims& dm_;
};

// HF LlamaModel computes cos and sin once per forward ([b, s, d] each, in the activations' dtype)
// and every layer's rotary op saves them. Under pipeline parallelism every stage computes its own.
void build_rope_tables(Builder& bld, const Dims& dm) {
  if (dm.model->positions != PosEmbedding::kRope) return;
  Ops o(bld, dm);
  OpDraft d = o.draft(OpKind::kRope, "rotary tables");
  d.op.math16 = false;
  d.exec = Exec::kRopeTables;
  d.dim = {dm.b, dm.s, dm.d};
  int32_t cs = bld.fresh(bytes(mul(mul(2, dm.b), mul(dm.s, dm.d)), dm.resid_dt), dm.resid_dt,
                         "rotary cos+sin");
  d.outputs = {cs};
  bld.add_op(std::move(d));
  bld.model_level(cs);
  bld.set_rope_tables(cs);
}

}  // namespace

int32_t build_embedding(Builder& bld, const Dims& dm, int32_t* word_table, bool labels) {
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  bld.current_block = -1;
  // Token ids and labels: int64 [s, b], held by the training loop for the whole step.
  int32_t ids = bld.fresh(bytes(dm.n_full(), DType::kI64), DType::kI64, "input ids");
  {
    OpDraft d = o.draft(OpKind::kCopy, "batch to device");
    d.op.math16 = false;
    d.exec = Exec::kBatch;
    d.dim = {dm.n_full(), dm.v};
    d.outputs = {ids};
    bld.hold_until_step_end(ids);
    bld.model_level(ids);
    if (labels) {
      const int32_t lab = bld.fresh(bytes(dm.n_full(), DType::kI64), DType::kI64, "labels");
      d.outputs.push_back(lab);
      bld.hold_until_step_end(lab);
      bld.model_level(lab);
      bld.set_labels(lab);
    }
    bld.add_op(std::move(d));
  }
  build_rope_tables(bld, dm);
  const int64_t n_out = dm.n_local();
  const DType dt = dm.param_dt;  // embedding is not autocast: it returns the table's dtype
  // Vocab-parallel embedding (Megatron-core): partial lookups all-reduced, or reduce-scattered
  // to the sequence shard under SP. Position (and token-type) lookups are added in.
  *word_table = bld.param(mul(dm.v, dm.h), dm.param_dt, "word embeddings");
  int64_t extra_params = 0;
  if (m.positions == PosEmbedding::kLearned) extra_params += mul(m.max_positions, dm.h);
  if (m.type_vocab > 0) extra_params += mul(m.type_vocab, dm.h);
  int32_t pos_table = extra_params > 0 ? bld.param(extra_params, dm.param_dt, "position embeddings") : -1;
  OpDraft d = o.draft(OpKind::kEmbedding, "embedding");
  d.op.math16 = false;
  d.exec = Exec::kEmbedding;
  d.dim = {dm.n_full(), dm.h, dm.s, m.positions == PosEmbedding::kLearned ? m.max_positions : 0,
           m.type_vocab};
  d.inputs.push_back({ids, GradRule::kNone});
  // embedding_dense_backward allocates a dense gradient of the whole table
  d.inputs.push_back({*word_table, GradRule::kNew});
  if (pos_table >= 0) d.inputs.push_back({pos_table, GradRule::kNew});
  int32_t x = bld.fresh(bytes(mul(n_out, dm.h), dt), dt, "embedding out");
  d.outputs.push_back(x);
  d.saves = {ids};
  // The word lookup's full-sequence output (before reduce-scatter, or before the position add)
  // is freed inside the op; the position lookup is [s, h].
  d.op.fwd_transient_bytes = bytes(mul(dm.n_full(), dm.h), dt) +
                             (pos_table >= 0 ? bytes(mul(dm.s, dm.h), dt) : 0);
  if (dm.t > 1) {
    d.op.fwd.comm_bytes = bytes(mul(dm.n_full(), dm.h), dt);
    d.op.fwd.comm_kind = dm.sp ? kReduceScatter : kAllReduce;
  }
  bld.add_op(std::move(d));
  if (m.post_norm) x = o.norm(x, "embedding norm");  // BERT: LayerNorm on the embeddings
  return o.dropout(x, dm.p_embd, "embedding dropout");
}

int32_t build_block(Builder& bld, const Dims& dm, int32_t x, int32_t block) {
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  bld.current_block = block;
  using Tp = Ops::Tp;
  const int64_t h = dm.h, hd = dm.d, nq = dm.a * hd, nkv = dm.g * hd;
  const DType hdt = dm.half_dt;
  const int64_t nf = dm.n_full();

  // Attention input: pre-norm blocks normalize first; post-norm (BERT) blocks take x as is.
  int32_t attn_in = m.post_norm ? x : o.norm(x, "norm1");

  int32_t q = -1, k = -1, v = -1;
  if (dm.fused_qkv) {
    int32_t qkv = o.linear(attn_in, h, nq + 2 * nkv, m.qkv_bias, Tp::kColumn, "qkv", "qkv out");
    // split into views (SplitBackward concatenates the three gradients into a new buffer)
    OpDraft d = o.draft(OpKind::kSplit, "qkv split");
    d.op.math16 = false;
    d.exec = Exec::kSplit;
    d.inputs.push_back({qkv, GradRule::kNew});
    // column slices of the [tokens, nq + 2 nkv] rows (32 bits: widths of one row)
    const auto w = static_cast<int32_t>(nq + 2 * nkv), wq = static_cast<int32_t>(nq),
               wkv = static_cast<int32_t>(nkv);
    q = bld.view(qkv, bytes(mul(nf, nq), hdt), hdt, 0, wq, w);
    k = bld.view(qkv, bytes(mul(nf, nkv), hdt), hdt, wq, wkv, w);
    v = bld.view(qkv, bytes(mul(nf, nkv), hdt), hdt, wq + wkv, wkv, w);
    d.outputs = {q, k, v};
    bld.add_op(std::move(d));
  } else {
    q = o.linear(attn_in, h, nq, m.qkv_bias, Tp::kColumn, "q proj", "q");
    k = o.linear(attn_in, h, nkv, m.qkv_bias, Tp::kColumn, "k proj", "k");
    v = o.linear(attn_in, h, nkv, m.qkv_bias, Tp::kColumn, "v proj", "v");
  }

  if (m.positions == PosEmbedding::kRope) {
    // q*cos + rotate_half(q)*sin (HF apply_rotary_pos_emb): saves only cos and sin (they need no
    // grad); its temporaries are q*cos, -x2, cat(-x2, x1) and rotate_half(q)*sin.
    int32_t cos_sin = bld.rope_tables();
    auto rope = [&](int32_t t, const char* name) {
      OpDraft d = o.draft(OpKind::kRope, name);
      d.op.math16 = false;
      d.exec = Exec::kRope;
      d.dim = {dm.b, dm.s, numel_of(bld.tensor(t)) / mul(nf, hd), hd};
      d.inputs.push_back({t, GradRule::kNew});
      d.inputs.push_back({cos_sin, GradRule::kNone});
      // q*cos promotes: under autocast cos and sin are fp32 (the residual's dtype), q bf16
      const DType dt = promote(bld.tensor(t).dtype, bld.tensor(cos_sin).dtype);
      int32_t y = bld.fresh(bytes(numel_of(bld.tensor(t)), dt), dt, "rotated");
      d.outputs.push_back(y);
      d.saves = {cos_sin};
      d.op.fwd_transient_bytes = mul(2, bld.tensor(y).bytes);
      d.op.bwd_transient_bytes = mul(2, bld.tensor(y).bytes);
      bld.add_op(std::move(d));
      return y;
    };
    q = rope(q, "rope q");
    k = rope(k, "rope k");
  }

  const bool causal = m.causal;
  int32_t ctx = -1;  // [tokens, a*d] input of the output projection
  if (dm.attention == AttentionKind::kFlash) {
    // SDPA's flash kernel (aten::_scaled_dot_product_flash_attention): saves q, k, v, the output
    // and the fp32 logsumexp [b, a, s]; dropout is inside the kernel (no mask kept); GQA native.
    // SDPA is on autocast's lower-precision list: fp32 operands (the rotated q and k, promoted by
    // fp32 cos/sin) are cast to 16 bits first, and the casts are what it saves.
    q = o.to_half(q, "q cast", "q cast");
    k = o.to_half(k, "k cast", "k cast");
    v = o.to_half(v, "v cast", "v cast");
    OpDraft d = o.draft(OpKind::kFlashAttention, "flash attention");
    d.exec = Exec::kFlash;
    if (dm.impl) d.op.kernel = dm.impl->attention_kernel;  // time (issue 11): the impl's kernel
    d.dim = {dm.b, dm.a, dm.s, hd, dm.a / dm.g, causal ? 1 : 0};
    d.p = static_cast<float>(dm.p_attn);
    d.op.core_attention = true;
    d.op.sac_save = true;  // SDPA is in torchtitan's save list
    d.inputs = {{q, GradRule::kNew}, {k, GradRule::kNew}, {v, GradRule::kNew}};
    int32_t out = bld.fresh(bytes(mul(nf, nq), hdt), hdt, "attention out");
    int32_t lse = bld.fresh(bytes(mul(mul(dm.b, dm.a), dm.s), DType::kF32), DType::kF32,
                            "flash logsumexp");
    d.outputs = {out, lse};
    d.saves = {q, k, v, out, lse};
    const int64_t fl = mul(mul(4, dm.b), mul(mul(dm.s, dm.s), nq));
    d.op.fwd.flops = fl;
    d.op.bwd.flops = mul(2, fl);
    // flash-attention 2 backward: dq accumulator fp32 [b, s_128, a, d_32] and softmax_d fp32
    // [b, a, s_128] (flash_api.cpp mha_bwd); per-query-head dk, dv when KV heads are fewer.
    const int64_t s128 = (dm.s + 127) / 128 * 128;
    const int64_t d32 = hd <= 128 ? (hd + 31) / 32 * 32 : (hd + 63) / 64 * 64;
    int64_t tr = bytes(mul(mul(dm.b, s128), mul(dm.a, d32)), DType::kF32) +
                 bytes(mul(mul(dm.b, dm.a), s128), DType::kF32);
    if (dm.g != dm.a) tr += mul(2, bytes(mul(mul(dm.b, dm.s), nq), hdt));
    d.op.bwd_transient_bytes = tr;
    bld.add_op(std::move(d));
    ctx = out;  // [b, s, a, d] already: transpose(1, 2).contiguous() copies nothing
  } else {
    int32_t kk = k, vv = v;
    if (dm.g != dm.a) {
      // GQA without flash: repeat_kv materializes a/g copies of K and V (expand + reshape)
      auto repeat = [&](int32_t t, const char* name) {
        OpDraft d = o.draft(OpKind::kCopy, name);
        d.op.core_attention = true;
        d.exec = Exec::kRepeatKv;
        d.dim = {nf, dm.g, hd, dm.a / dm.g};
        d.op.math16 = false;
        d.inputs.push_back({t, GradRule::kNew});
        int32_t y = bld.fresh(bytes(mul(nf, nq), hdt), hdt, "repeated kv");
        d.outputs.push_back(y);
        bld.add_op(std::move(d));
        return y;
      };
      kk = repeat(k, "repeat k");
      vv = repeat(v, "repeat v");
    }
    const int64_t scores_numel = mul(mul(dm.b, dm.a), mul(dm.s, dm.s));
    const int64_t fl = mul(mul(2, dm.b), mul(mul(dm.s, dm.s), nq));
    // HF layout (three projections, [b, a, s, d] views over [b, s, a, d] memory): torch.matmul
    // folds its operands to [b*a, s, d], which copies a non-contiguous operand (and autocast
    // casts an fp32 one); the op saves the copy, not its input. repeat_kv's output is already
    // contiguous. Megatron's layout (GPT: baddbmm on strided views of the fused QKV) copies
    // nothing. (Census: harness/census, "qk" and "av".)
    const bool hf_layout = dm.eager_copies;
    auto operand = [&](OpDraft& d, int32_t t, bool contiguous, const char* role) {
      const Tensor& tt = bld.tensor(t);
      if (!hf_layout || (contiguous && tt.dtype == hdt)) return t;
      int32_t c = bld.fresh(bytes(numel_of(tt), hdt), hdt, role);
      d.outputs.push_back(c);
      return c;
    };
    // scores = baddbmm(q, k^T, alpha = 1/sqrt(d)): saves q and k
    OpDraft qk = o.draft(OpKind::kBmm, "qk");
    qk.op.core_attention = true;
    qk.exec = Exec::kQk;
    qk.inputs = {{q, GradRule::kNew}, {kk, GradRule::kNew}};
    if (dm.qk_global_buffer) {
      // Megatron's baddbmm(matmul_input_buffer, q, k^T, beta=0) (dot_product_attention.py
      // @ d98e8a6): the buffer comes from parallel_state.get_global_memory_buffer() ("mpu",
      // [b*np, sq, sk] in the scores' dtype), allocated once and kept for the run; beta = 0 reads
      // nothing of it and the scores are a new tensor.
      qk.inputs.push_back({bld.global_buffer(bytes(scores_numel, hdt), hdt), GradRule::kNone});
    }
    int32_t scores = bld.fresh(bytes(scores_numel, hdt), hdt, "attention scores");
    qk.outputs = {scores};
    const int32_t q_op = operand(qk, q, false, "q for bmm");
    const int32_t k_op = operand(qk, kk, dm.g != dm.a, "k for bmm");
    qk.saves = {q_op, k_op};
    // dim[5]: which operand copies are outputs 1.. (bit 0: q's, bit 1: k's)
    qk.dim = {dm.b, dm.a, dm.s, hd, 1, (q_op != q ? 1 : 0) | (k_op != kk ? 2 : 0)};
    qk.op.fwd.flops = fl;
    qk.op.bwd.flops = mul(2, fl);
    bld.add_op(std::move(qk));
    // Megatron's FusedScaleMaskSoftmax (fusions/fused_softmax.py @ d98e8a6): the fused
    // scaled_upper_triang_masked_softmax kernel for 16 < s <= 4096 (is_kernel_available: also
    // s % 4 == 0 and b*np % 4 == 0) takes the 16-bit scores and saves its 16-bit output; the
    // fallback (forward_torch_softmax) masks in place (utils.py attention_mask_func: masked_fill_)
    // and runs torch softmax in the scores' dtype (attention_softmax_in_fp32 off, arguments.py's
    // default). Either way no masked copy exists and the probabilities are 16-bit; the softmax
    // op below carries the causal mask (dim[2]).
    const bool megatron_sm = dm.megatron_softmax && !dm.amp;
    const ImplSpec* im = dm.impl;
    if (im && im->attn_scale == AttnScale::kMulScalar) {
      // nanoGPT model.py:67 `(q @ k^T) * (1.0 / math.sqrt(hs))`: the product is a new tensor;
      // MulBackward0 saves only `other`, a wrapped 0-dim double (host memory on CUDA; 8 B of the
      // CPU's per block, not modeled). The unscaled scores are freed once multiplied.
      OpDraft sc = o.draft(OpKind::kMul, "attention scale");
      sc.op.core_attention = true;
      sc.op.math16 = false;
      sc.inputs.push_back({scores, GradRule::kNew});
      int32_t scaled = o.fresh_like(scores, "scaled scores");
      sc.outputs.push_back(scaled);
      bld.add_op(std::move(sc));
      scores = scaled;
    }
    if (causal && !dm.paper && im && im->causal_mask == CausalMaskKind::kBlockF32Eq) {
      // nanoGPT model.py:49-50: `self.bias`, fp32 [1, 1, block_size, block_size], one persistent
      // buffer per block (counted with the weights); model.py:68 `self.bias[:, :, :T, :T] == 0`
      // makes a bool [T, T] every forward, and `masked_fill` (out of place: a new scores
      // tensor) saves it for its backward (MaskedFillBackward0 saves mask).
      const int64_t pos = m.max_positions > 0 ? m.max_positions : dm.s;
      int32_t buf = bld.buffer(bytes(mul(pos, pos), DType::kF32), DType::kF32,
                               "causal mask buffer (fp32, per block)");
      OpDraft eq = o.draft(OpKind::kMask, "mask == 0");
      eq.op.core_attention = true;
      eq.op.math16 = false;
      eq.inputs.push_back({buf, GradRule::kNone});
      int32_t keep = bld.fresh(bytes(mul(dm.s, dm.s), DType::kBool), DType::kBool, "mask == 0");
      eq.outputs.push_back(keep);
      bld.add_op(std::move(eq));
      OpDraft mf = o.draft(OpKind::kMask, "masked fill");
      mf.op.core_attention = true;
      mf.op.math16 = false;
      mf.inputs.push_back({scores, GradRule::kNew});
      mf.inputs.push_back({keep, GradRule::kNone});
      int32_t masked = o.fresh_like(scores, "masked scores");
      mf.outputs.push_back(masked);
      mf.saves = {keep};
      bld.add_op(std::move(mf));
      scores = masked;
    } else if (causal && !dm.paper && !megatron_sm) {
      // torch.where(causal_mask, scores, -inf): a new tensor; the mask is a persistent buffer
      OpDraft mk = o.draft(OpKind::kMask, "causal mask");
      mk.op.core_attention = true;
      mk.exec = Exec::kMask;
      mk.dim = {mul(mul(dm.b, dm.a), dm.s), dm.s};
      mk.op.math16 = false;
      mk.inputs.push_back({scores, GradRule::kNew});
      mk.inputs.push_back({bld.causal_mask(mul(dm.s, dm.s)), GradRule::kNone});
      int32_t masked = o.fresh_like(scores, "masked scores");
      mk.outputs.push_back(masked);
      bld.add_op(std::move(mk));
      scores = masked;
    }
    // softmax: the paper's (Megatron's fused scale-mask-softmax) and bf16-mixed keep 16-bit
    // probabilities; autocast runs softmax in fp32 (fp32_set_opt_dtype): fp16 input goes through
    // _softmax(half_to_float), bf16 input is first cast to an fp32 copy (SoftMax.cpp softmax()).
    int32_t sm_in = scores;
    DType p_dt = hdt;
    if (dm.amp) {
      p_dt = DType::kF32;
      if (dm.half_dt == DType::kBF16)
        sm_in = o.cast(scores, DType::kF32, "softmax input cast", "scores cast");
    }
    OpDraft sm = o.draft(OpKind::kSoftmax, "softmax");
    sm.op.core_attention = true;
    sm.exec = Exec::kSoftmax;
    sm.dim = {mul(mul(dm.b, dm.a), dm.s), dm.s, causal && (dm.paper || megatron_sm) ? 1 : 0};
    sm.op.math16 = false;
    sm.inputs.push_back({sm_in, GradRule::kNew});
    int32_t probs = bld.fresh(bytes(scores_numel, p_dt), p_dt, "softmax out");
    sm.outputs = {probs};
    sm.saves = {probs};
    bld.add_op(std::move(sm));
    int32_t dprobs = o.dropout(probs, dm.p_attn, "attention dropout");
    if (dprobs != probs) bld.mark_core_attention_last();
    int32_t pv_in = o.to_half(dprobs, "probs cast", "probs cast");
    if (pv_in != dprobs) bld.mark_core_attention_last();
    OpDraft av = o.draft(OpKind::kBmm, "av");
    av.op.core_attention = true;
    av.exec = Exec::kAv;
    av.inputs = {{pv_in, GradRule::kNew}, {vv, GradRule::kNew}};
    int32_t out = bld.fresh(bytes(mul(nf, nq), hdt), hdt, "attention out");
    av.outputs = {out};
    av.saves = {pv_in, operand(av, vv, dm.g != dm.a, "v for bmm")};
    av.dim = {dm.b, dm.a, dm.s, hd, 1, av.saves[1] != vv ? 2 : 0};  // dim[5] bit 1: v's copy
    av.op.fwd.flops = fl;
    av.op.bwd.flops = mul(2, fl);
    bld.add_op(std::move(av));
    // [b, a, s, d] -> [s, b, a*d] (Megatron permute().contiguous(); HF transpose().contiguous()):
    // a copy whose backward hands the gradient on as a view
    OpDraft cp = o.draft(OpKind::kCopy, "attention out copy");
    cp.op.math16 = false;
    cp.exec = Exec::kCopy;  // the executor's av writes [tokens, a*d] already
    cp.inputs.push_back({out, GradRule::kPass, 0});
    ctx = o.fresh_like(out, "attention out copy");
    cp.outputs = {ctx};
    bld.add_op(std::move(cp));
  }

  int32_t proj = o.linear(ctx, nq, h, m.linear_bias, Tp::kRow, "proj", "proj out");
  int32_t d1 = o.dropout(proj, dm.p_hidden, "proj dropout");
  int32_t x2 = o.add(x, d1, "residual 1");
  if (m.post_norm) x2 = o.norm(x2, "norm1");
  int32_t mlp_in = m.post_norm ? x2 : o.norm(x2, "norm2");

  int32_t mlp_out = -1;
  if (m.mlp == MlpKind::kGelu) {
    int32_t u = o.linear(mlp_in, h, dm.f, m.linear_bias, Tp::kColumn, "fc1", "fc1 out");
    int32_t gu = o.gelu(u);
    mlp_out = o.linear(gu, dm.f, h, m.linear_bias, Tp::kRow, "fc2", "fc2 out");
  } else {
    // HF LlamaMLP: down(silu(gate(x)) * up(x))
    int32_t gate = o.linear(mlp_in, h, dm.f, m.linear_bias, Tp::kColumn, "gate proj", "gate out");
    int32_t up = o.linear(mlp_in, h, dm.f, m.linear_bias, Tp::kColumn, "up proj", "up out");
    int32_t act = o.unary_saving_input(OpKind::kSilu, gate, "silu", "silu out");
    const Tensor ta = bld.tensor(act);
    int32_t prod = o.mul_op(act, up, ta.bytes, ta.dtype, "swiglu mul", "swiglu out", true, true,
                            Exec::kMul, nf, dm.f);
    mlp_out = o.linear(prod, dm.f, h, m.linear_bias, Tp::kRow, "down proj", "down out");
  }
  int32_t d2 = o.dropout(mlp_out, dm.p_hidden, "mlp dropout");
  int32_t out = o.add(x2, d2, "residual 2");
  if (m.post_norm) out = o.norm(out, "norm2");
  return out;
}

void build_head(Builder& bld, const Dims& dm, int32_t x, int32_t word_table) {
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  bld.current_block = -1;
  using Tp = Ops::Tp;
  int32_t y = x;
  if (m.post_norm) {
    // BERT's MLM head transform: dense h->h, GeLU, LayerNorm (replicated, not TP-split)
    y = o.linear(y, dm.h, dm.h, true, Tp::kNone, "head dense", "head dense out");
    y = o.unary_saving_input(OpKind::kGelu, y, "head gelu", "head gelu out");
    y = o.layer_norm(y, "head norm");
  } else {
    y = o.norm(y, "final norm");
  }
  // Output projection (vocab-parallel column linear), tied to the word embeddings or its own.
  int32_t logits = o.linear(y, dm.h, dm.v, m.post_norm, Tp::kColumn, "lm head", "logits",
                            m.tied_embeddings ? word_table : -1);
  // nanoGPT's train.py keeps `logits` (its `logits, loss = model(X, Y)`) until the next
  // iteration's forward returns: through backward and the optimizer step.
  if (dm.impl && dm.impl->logits == LogitsLifetime::kStep) bld.hold_until_step_end(logits);
  const int64_t n = dm.n_full();
  const int64_t lv = bytes(mul(n, dm.v), DType::kF32);
  int32_t loss = bld.fresh(4, DType::kF32, "loss");
  if (dm.vocab_parallel_ce) {
    // Megatron-core vocab_parallel_cross_entropy (tensor_parallel/cross_entropy.py @ d98e8a6:
    // calculate_logits_max `vocab_parallel_logits.float()`, then in place: `-= logits_max`,
    // `torch.exp(..., out=exp_logits)`, `exp_logits.div_(sum)`, ctx.save_for_backward(exp_logits,
    // target_mask, masked_target_1d)), used at every tp (language_module.py
    // compute_language_model_loss): one fp32 copy of the logits made into the softmax in place
    // and saved (Korthikanti §4.3: 4sbv/t); the backward writes the gradient into it in place
    // (grad_input = softmax; mul_) and the engine casts it back to the logits' dtype.
    OpDraft d = o.draft(OpKind::kVocabCe, "cross entropy");
    d.op.math16 = false;
    d.exec = Exec::kVocabCe;
    d.dim = {n, dm.v};
    d.inputs.push_back({logits, GradRule::kNew});
    d.inputs.push_back({bld.labels(), GradRule::kNone});
    int32_t soft = bld.fresh(lv, DType::kF32, "softmax of logits");
    d.outputs = {soft, loss};
    d.saves = {soft, bld.labels()};
    if (dm.t > 1) d.op.fwd.comm_bytes = mul(3 * 4, n), d.op.fwd.comm_kind = kAllReduce;
    bld.add_op(std::move(d));
  } else {
    // HF: logits.float(); F.cross_entropy = log_softmax (saves its output) + nll_loss (saves
    // the target); nll's backward allocates a zeroed gradient of the log-probabilities.
    int32_t l32 = o.cast(logits, DType::kF32, "logits to fp32", "logits upcast");
    OpDraft ls = o.draft(OpKind::kLogSoftmax, "log softmax");
    ls.op.math16 = false;
    ls.exec = Exec::kLogSoftmax;
    ls.dim = {n, dm.v};
    ls.inputs.push_back({l32, GradRule::kNew});
    int32_t logp = bld.fresh(lv, DType::kF32, "log-probabilities");
    ls.outputs = {logp};
    ls.saves = {logp};
    bld.add_op(std::move(ls));
    OpDraft nll = o.draft(OpKind::kNllLoss, "nll loss");
    nll.op.math16 = false;
    nll.exec = Exec::kNll;
    nll.dim = {n, dm.v};
    nll.inputs.push_back({logp, GradRule::kNew});
    nll.inputs.push_back({bld.labels(), GradRule::kNone});
    // nll_loss_forward returns (output, total_weight); NllLossBackward0 saves self, target and
    // total_weight (census: harness/census, "nll loss").
    int32_t total_weight = bld.fresh(4, DType::kF32, "nll total weight");
    nll.outputs = {loss, total_weight};
    nll.saves = {logp, bld.labels(), total_weight};
    bld.add_op(std::move(nll));
  }
  bld.set_loss(loss);
}

int32_t build_stage_input(Builder& bld, const Dims& dm, bool labels) {
  Ops o(bld, dm);
  bld.current_block = -1;
  // The received activations: the embedding output's shape ([s/t, b, h] under SP) in the
  // residual stream's dtype. Its backward sends the gradient back to the previous stage.
  OpDraft d = o.draft(OpKind::kCopy, "pipeline recv");
  d.op.math16 = false;
  int32_t x = bld.fresh(bytes(mul(dm.n_local(), dm.h), dm.resid_dt), dm.resid_dt,
                        "received activations");
  d.outputs.push_back(x);
  int32_t lab = -1;
  if (labels) {
    lab = bld.fresh(bytes(dm.n_full(), DType::kI64), DType::kI64, "labels");
    d.outputs.push_back(lab);
  }
  bld.add_op(std::move(d));
  if (lab >= 0) {
    bld.hold_until_step_end(lab);
    bld.model_level(lab);
    bld.set_labels(lab);
  }
  build_rope_tables(bld, dm);
  return x;
}

void build_stage_output(Builder& bld, const Dims& dm, int32_t x) {
  Ops o(bld, dm);
  bld.current_block = -1;
  // Sends x (no saves, nothing allocated); the backward of the send is where the next stage's
  // gradient of x arrives: a new buffer of x's size.
  OpDraft d = o.draft(OpKind::kCopy, "pipeline send");
  d.op.math16 = false;
  d.inputs.push_back({x, GradRule::kNew});
  d.root = true;
  bld.add_op(std::move(d));
}

}  // namespace sim::detail
