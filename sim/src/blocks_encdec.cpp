// famenc (issue 12): the op lists of T5 (encoder-decoder) and ViT as HuggingFace transformers runs
// them (docs/memory-model.md "T5" and "ViT", each row with its upstream file and commit):
//   T5: models/t5/modeling_t5.py @ 6b8b757dfcb5 (v4.4x: T5Stack, T5Block, T5Attention,
//       T5LayerNorm, T5DenseActDense / T5DenseGatedActDense, T5ForConditionalGeneration).
//   ViT: models/vit/modeling_vit.py (ViTEmbeddings, ViTPatchEmbeddings, ViTLayer,
//       ViTForImageClassification; structure read @ d8b2b23c6ed1, ViTSdpaSelfAttention of the
//       v4.4x releases for the default SDPA path).
// T5's two stacks are blocks 0..E-1 (encoder) and E..L-1 (decoder) of one graph; the blocks of
// the two stacks differ, so T5 graphs are built block by block (never cloned). ViT's blocks are
// graph_blocks.cpp's pre-norm block; only its embedding and head are here.
#include "blocks_encdec.hpp"

#include "ops.hpp"

namespace sim::detail {
namespace {

using Tp = Ops::Tp;

// A new tensor made by an op with no differentiable input (masks, bucket indices, zeros).
int32_t constant(Builder& bld, const Dims& dm, OpKind kind, const char* name, int64_t bytes_,
                 DType dt, int64_t transient = 0) {
  Ops o(bld, dm);
  OpDraft d = o.draft(kind, name);
  d.op.math16 = false;
  int32_t y = bld.fresh(bytes_, dt, name);
  d.outputs.push_back(y);
  d.op.fwd_transient_bytes = transient;
  bld.add_op(std::move(d));
  return y;
}

// F.cross_entropy on `logits` [n, classes] as HF computes it under autocast: the logits cast to
// fp32, log_softmax (saves its fp32 output), nll_loss (saves the target and total_weight); the
// same ops as graph_blocks.cpp build_head's float cross entropy.
void cross_entropy(Builder& bld, const Dims& dm, int32_t logits, int32_t labels, int64_t n,
                   int64_t classes, bool upcast = true) {
  Ops o(bld, dm);
  // census12: without `upcast` (ViT's CrossEntropyLoss on the logits as they are; autocast still
  // runs log_softmax in fp32) a bf16-mixed loss stays in bf16
  const int32_t l32 = upcast || dm.amp
                          ? o.cast(logits, DType::kF32, "logits to fp32", "logits upcast")
                          : logits;
  const DType ldt = bld.tensor(l32).dtype;
  const int64_t lv = bytes(mul(n, classes), ldt);
  OpDraft ls = o.draft(OpKind::kLogSoftmax, "log softmax");
  ls.op.math16 = false;
  ls.inputs.push_back({l32, GradRule::kNew});
  int32_t logp = bld.fresh(lv, ldt, "log-probabilities");
  ls.outputs = {logp};
  ls.saves = {logp};
  bld.add_op(std::move(ls));
  OpDraft nll = o.draft(OpKind::kNllLoss, "nll loss");
  nll.op.math16 = false;
  nll.inputs.push_back({logp, GradRule::kNew});
  nll.inputs.push_back({labels, GradRule::kNone});
  int32_t loss = bld.fresh(bytes(1, ldt), ldt, "loss");
  int32_t total_weight = bld.fresh(bytes(1, ldt), ldt, "nll total weight");
  nll.outputs = {loss, total_weight};
  nll.saves = {logp, labels, total_weight};
  bld.add_op(std::move(nll));
  bld.set_loss(loss);
}

// ---------------------------------------------------------------- T5

// T5Attention.compute_bias for one stack, in its first block: relative_position (int64 [sq, sk])
// bucketed by _relative_position_bucket (its int64 and float temporaries: counted as two int64
// [sq, sk] live at the torch.where), the bias table's lookup (the embedding saves the buckets;
// output [sq, sk, a] in the table's dtype, permuted as a view), then `position_bias + mask`: the
// stack's extended mask ([b, 1, 1, sk] encoder, [b, 1, sq, sq] decoder causal, both in the
// embeddings' dtype) broadcast to [b, a, sq, sk]. That tensor is every block's position_bias;
// AddBackward saves nothing, and its gradient, accumulated over the stack's blocks, is summed
// over the batch (a new [a, sq, sk] buffer when b > 1) for the table's embedding backward.
int32_t t5_relative_bias(Builder& bld, const Dims& dm, int64_t sq, int64_t sk, bool decoder) {
  Ops o(bld, dm);
  const int64_t pairs = mul(sq, sk);
  int32_t buckets =
      constant(bld, dm, OpKind::kCopy, "relative position buckets", bytes(pairs, DType::kI64),
               DType::kI64, mul(2, bytes(pairs, DType::kI64)));
  int32_t table =
      bld.param(mul(dm.model->relative_buckets, dm.a), dm.param_dt, "relative attention bias");
  OpDraft e = o.draft(OpKind::kEmbedding, "relative bias lookup");
  e.op.math16 = false;
  e.inputs.push_back({buckets, GradRule::kNone});
  e.inputs.push_back({table, GradRule::kNew});
  int32_t values = bld.fresh(bytes(mul(pairs, dm.a), dm.param_dt), dm.param_dt, "relative bias");
  e.outputs = {values};
  e.saves = {buckets};
  bld.add_op(std::move(e));
  // T5Stack.forward: the encoder's (1 - mask) * finfo.min of a ones mask; the decoder's
  // _prepare_4d_causal_attention_mask_with_cache_position (cloned, [b, 1, sq, sq]).
  const int64_t mask_numel = decoder ? mul(dm.b, pairs) : mul(dm.b, sk);
  int32_t mask =
      constant(bld, dm, OpKind::kMask, decoder ? "causal mask (4d)" : "extended attention mask",
               bytes(mask_numel, dm.param_dt), dm.param_dt);
  OpDraft add = o.draft(OpKind::kAdd, "position bias + mask");
  add.op.math16 = false;
  add.inputs.push_back({values, dm.b == 1 ? GradRule::kPass : GradRule::kNew, 0});
  add.inputs.push_back({mask, GradRule::kNone});
  int32_t bias =
      bld.fresh(bytes(mul(mul(dm.b, dm.a), pairs), dm.param_dt), dm.param_dt, "position bias");
  add.outputs = {bias};
  bld.add_op(std::move(add));
  return bias;
}

// The decoder's cross-attention bias (first decoder block): T5Attention makes
// torch.zeros((1, a, sq, sk), dtype=scores.dtype) (no relative bias in EncDecAttention) and adds
// the inverted encoder mask [b, 1, 1, sk]; the [b, a, sq, sk] result is every decoder block's
// encoder_decoder_position_bias. Nothing here requires grad (the zeros require grad only under
// gradient checkpointing, not modeled: docs/memory-model.md "T5").
int32_t t5_cross_bias(Builder& bld, const Dims& dm, int64_t sq, int64_t sk) {
  Ops o(bld, dm);
  const int64_t pairs = mul(sq, sk);
  const DType sdt = dm.half_dt;
  int32_t zeros = constant(bld, dm, OpKind::kCopy, "cross-attention zero bias",
                           bytes(mul(dm.a, pairs), sdt), sdt);
  int32_t mask = constant(bld, dm, OpKind::kMask, "inverted encoder mask",
                          bytes(mul(dm.b, sk), dm.param_dt), dm.param_dt);
  OpDraft add = o.draft(OpKind::kAdd, "cross bias + mask");
  add.op.math16 = false;
  add.inputs.push_back({zeros, GradRule::kNone});
  add.inputs.push_back({mask, GradRule::kNone});
  const DType dt = promote(sdt, dm.param_dt);
  int32_t bias = bld.fresh(bytes(mul(mul(dm.b, dm.a), pairs), dt), dt, "cross-attention bias");
  add.outputs = {bias};
  bld.add_op(std::move(add));
  return bias;
}

// T5Attention.forward (eager; T5 has no SDPA path) from the normed queries' input `xq` ([b*sq, h])
// and the keys' and values' input `xkv` ([b*sk, h]: the same for self-attention, the encoder
// output for cross-attention) to the output projection's output. No scaling (the Mesh
// TensorFlow initialization folds it into q).
int32_t t5_attention(Builder& bld, const Dims& dm, int32_t xq, int32_t xkv, int64_t sq, int64_t sk,
                     int32_t bias, bool bias_grad) {
  Ops o(bld, dm);
  const int64_t h = dm.h, inner = mul(dm.a, dm.d);
  const DType hdt = dm.half_dt;
  int32_t q = o.linear(xq, h, inner, false, Tp::kNone, "q", "q", -1, LinearSite::kQ);  // lora6
  int32_t k = o.linear(xkv, h, inner, false, Tp::kNone, "k", "k", -1, LinearSite::kK);
  int32_t v = o.linear(xkv, h, inner, false, Tp::kNone, "v", "v", -1, LinearSite::kV);
  const int64_t scores_numel = mul(mul(dm.b, dm.a), mul(sq, sk));
  const int64_t fl = mul(mul(2, dm.b), mul(mul(sq, sk), inner));
  // torch.matmul on the [b, a, s, d] views of [b, s, a*d] memory copies each operand to
  // [b*a, s, d] and saves the copies (census "qk", "av": HF layout).
  auto operand = [&](OpDraft& d, int32_t t, const char* role) {
    if (!dm.eager_copies) return t;
    int32_t c = bld.fresh(bytes(numel_of(bld.tensor(t)), hdt), hdt, role);
    d.outputs.push_back(c);
    return c;
  };
  OpDraft qk = o.draft(OpKind::kBmm, "qk");
  qk.op.core_attention = true;
  qk.inputs = {{q, GradRule::kNew}, {k, GradRule::kNew}};
  int32_t scores = bld.fresh(bytes(scores_numel, hdt), hdt, "attention scores");
  qk.outputs = {scores};
  qk.saves = {operand(qk, q, "q for bmm"), operand(qk, k, "k for bmm")};
  qk.op.fwd.flops = fl;
  qk.op.bwd.flops = mul(2, fl);
  bld.add_op(std::move(qk));
  // `scores += position_bias_masked`: in place (a view of the scores' storage), saves nothing;
  // the gradient passes to the scores and, cast to the bias's dtype where it differs, to the bias.
  OpDraft add = o.draft(OpKind::kAdd, "scores += position bias");
  add.op.core_attention = true;
  add.op.math16 = false;
  add.inputs.push_back({scores, GradRule::kPass, 0});
  add.inputs.push_back({bias, bias_grad ? GradRule::kPass : GradRule::kNone, 0});
  int32_t biased = bld.view(scores, bld.tensor(scores).bytes, hdt);
  add.outputs = {biased};
  bld.add_op(std::move(add));
  // softmax(scores.float(), dim=-1).type_as(scores): under autocast an fp32 copy of the 16-bit
  // scores, softmax saving its fp32 output, and a 16-bit copy of it (neither copy saves anything).
  int32_t sm_in = o.cast(biased, DType::kF32, "scores.float()", "scores fp32");
  if (sm_in != biased) bld.mark_core_attention_last();
  OpDraft sm = o.draft(OpKind::kSoftmax, "softmax");
  sm.op.core_attention = true;
  sm.op.math16 = false;
  sm.inputs.push_back({sm_in, GradRule::kNew});
  const DType pdt = bld.tensor(sm_in).dtype;
  int32_t probs = bld.fresh(bytes(scores_numel, pdt), pdt, "softmax out");
  sm.outputs = {probs};
  sm.saves = {probs};
  bld.add_op(std::move(sm));
  int32_t p16 = o.cast(probs, hdt, "type_as(scores)", "probs");
  if (p16 != probs) bld.mark_core_attention_last();
  int32_t pd = o.dropout(p16, dm.p_attn, "attention dropout");
  if (pd != p16) bld.mark_core_attention_last();
  int32_t pv = o.to_half(pd, "probs cast", "probs cast");
  if (pv != pd) bld.mark_core_attention_last();
  OpDraft av = o.draft(OpKind::kBmm, "av");
  av.op.core_attention = true;
  av.inputs = {{pv, GradRule::kNew}, {v, GradRule::kNew}};
  int32_t out = bld.fresh(bytes(mul(mul(dm.b, sq), inner), hdt), hdt, "attention out");
  av.outputs = {out};
  av.saves = {pv, operand(av, v, "v for bmm")};
  av.op.fwd.flops = fl;
  av.op.bwd.flops = mul(2, fl);
  bld.add_op(std::move(av));
  // attn_output.transpose(1, 2).contiguous(): a copy; its backward hands the gradient on
  OpDraft cp = o.draft(OpKind::kCopy, "attention out copy");
  cp.op.math16 = false;
  cp.inputs.push_back({out, GradRule::kPass, 0});
  int32_t ctx = o.fresh_like(out, "attention out copy");
  cp.outputs = {ctx};
  bld.add_op(std::move(cp));
  return o.linear(ctx, inner, h, false, Tp::kNone, "o", "o out", -1, LinearSite::kO);  // lora6
}

// T5LayerFF's DenseReluDense: wi, ReLU (saves its output: threshold_backward(grad, result)),
// dropout, then wo; or wi_0, the GeLU (gelu_new: pointwise ops), wi_1, their product (saves both),
// dropout, wo. Before wo, `hidden_states.to(self.wo.weight.dtype)` when the dtypes differ: under
// autocast the 16-bit activation becomes an fp32 copy (saved by nothing) that wo's autocast casts
// back to 16 bits (saved by wo) (_keep_in_fp32_modules = ["wo"] keeps wo fp32 when loaded in
// 16 bits; with fp32 weights only autocast differs).
int32_t t5_mlp(Builder& bld, const Dims& dm, int32_t x) {
  Ops o(bld, dm);
  const int64_t h = dm.h, f = dm.f;
  int32_t act = -1;
  if (dm.model->mlp == MlpKind::kGeglu) {
    int32_t g = o.linear(x, h, f, false, Tp::kNone, "wi_0", "wi_0 out", -1,
                         LinearSite::kGate);  // lora6: --lora-targets gate
    int32_t ga = o.gelu(g);
    int32_t up = o.linear(x, h, f, false, Tp::kNone, "wi_1", "wi_1 out", -1,
                          LinearSite::kUp);  // lora6: up
    const Tensor ta = bld.tensor(ga);
    const DType dt = promote(ta.dtype, bld.tensor(up).dtype);
    act = o.mul_op(ga, up, bytes(numel_of(ta), dt), dt, "gelu * linear", "gated out", true, true,
                   Exec::kNone, 0, 0);
  } else {
    int32_t u = o.linear(x, h, f, false, Tp::kNone, "wi", "wi out", -1,
                         LinearSite::kFc1);  // lora6: up
    OpDraft r = o.draft(OpKind::kGelu, "relu");  // a pointwise op (the time model's class)
    r.inputs.push_back({u, GradRule::kNew});
    act = o.fresh_like(u, "relu out");
    r.outputs = {act};
    r.saves = {act};
    bld.add_op(std::move(r));
  }
  int32_t d = o.dropout(act, dm.p_hidden, "ff dropout");
  if (dm.amp && bld.tensor(d).dtype != dm.param_dt)
    d = o.cast(d, dm.param_dt, "to wo dtype", "wo input fp32");
  return o.linear(d, f, h, false, Tp::kNone, "wo", "wo out", -1,
                  LinearSite::kFc2);  // lora6: down
}

// One T5Block: T5LayerSelfAttention (norm, attention, dropout, residual), for decoder blocks
// T5LayerCrossAttention (norm, attention over the encoder output, dropout, residual), then
// T5LayerFF (norm, DenseReluDense, dropout, residual). T5LayerNorm is Ops::rms_norm's op list
// (fam12: with scale_input, its `hidden_states * rsqrt(...)` on the input itself)
// under fp32 weights (docs/memory-model.md "T5").
int32_t t5_block(Builder& bld, const Dims& dm, int32_t x, int32_t bias, int32_t enc_out,
                 int32_t cross_bias, int64_t s_enc) {
  Ops o(bld, dm);
  const int64_t sq = dm.s;
  int32_t n1 = o.rms_norm(x, "self-attention norm", true);
  int32_t a1 = t5_attention(bld, dm, n1, n1, sq, sq, bias, true);
  x = o.add(x, o.dropout(a1, dm.p_hidden, "self-attention dropout"), "residual 1");
  if (enc_out >= 0) {
    int32_t n2 = o.rms_norm(x, "cross-attention norm", true);
    int32_t a2 = t5_attention(bld, dm, n2, enc_out, sq, s_enc, cross_bias, false);
    x = o.add(x, o.dropout(a2, dm.p_hidden, "cross-attention dropout"), "residual 2");
  }
  int32_t n3 = o.rms_norm(x, "ff norm", true);
  int32_t m = t5_mlp(bld, dm, n3);
  return o.add(x, o.dropout(m, dm.p_hidden, "ff dropout out"), "residual ff");
}

// The shared word embedding's lookup for one stack (the table's dtype; saves the ids), and the
// stack's input dropout.
int32_t t5_embed(Builder& bld, const Dims& dm, int32_t ids, int32_t table, const char* name) {
  Ops o(bld, dm);
  OpDraft d = o.draft(OpKind::kEmbedding, name);
  d.op.math16 = false;
  d.inputs.push_back({ids, GradRule::kNone});
  d.inputs.push_back({table, GradRule::kNew});
  int32_t x = bld.fresh(bytes(mul(dm.n_full(), dm.h), dm.param_dt), dm.param_dt, "embedding out");
  d.outputs = {x};
  d.saves = {ids};
  bld.add_op(std::move(d));
  return o.dropout(x, dm.p_embd, "embedding dropout");
}

void build_t5(Builder& bld, const Dims& enc, int64_t target_seq) {
  const ModelConfig& m = *enc.model;
  Ops o(bld, enc);
  Dims dec = enc;
  dec.s = dec.s_local = target_seq;
  const int64_t E = encoder_layers(m), L = m.layers;
  bld.current_block = -1;
  // The batch: input_ids [b, s] and labels [b, t] (int64), held by the training loop.
  int32_t ids = -1, labels = -1;
  {
    OpDraft d = o.draft(OpKind::kCopy, "batch to device");
    d.op.math16 = false;
    ids = bld.fresh(bytes(enc.n_full(), DType::kI64), DType::kI64, "input ids");
    labels = bld.fresh(bytes(dec.n_full(), DType::kI64), DType::kI64, "labels");
    d.outputs = {ids, labels};
    bld.add_op(std::move(d));
    for (int32_t t : {ids, labels}) bld.hold_until_step_end(t), bld.model_level(t);
    bld.set_labels(labels);
  }
  int32_t table = bld.param(mul(m.vocab, enc.h), enc.param_dt, "shared word embeddings");
  int32_t x = t5_embed(bld, enc, ids, table, "encoder embedding");
  int32_t bias = -1;
  for (int32_t i = 0; i < E; ++i) {
    bld.current_block = i;
    if (i == 0) bias = t5_relative_bias(bld, enc, enc.s, enc.s, false);
    x = t5_block(bld, enc, x, bias, -1, -1, 0);
  }
  bld.current_block = -1;
  int32_t enc_out = o.dropout(o.rms_norm(x, "encoder final norm", true), enc.p_hidden, "encoder dropout");
  // _shift_right(labels): decoder_input_ids, a new int64 [b, t] (saved by the lookup)
  int32_t dec_ids = constant(bld, dec, OpKind::kCopy, "shift labels right",
                             bytes(dec.n_full(), DType::kI64), DType::kI64);
  int32_t y = t5_embed(bld, dec, dec_ids, table, "decoder embedding");
  int32_t cross_bias = -1;
  for (int32_t i = static_cast<int32_t>(E); i < L; ++i) {
    bld.current_block = i;
    if (i == E) {
      bias = t5_relative_bias(bld, dec, dec.s, dec.s, true);
      cross_bias = t5_cross_bias(bld, dec, dec.s, enc.s);
    }
    y = t5_block(bld, dec, y, bias, enc_out, cross_bias, enc.s);
  }
  bld.current_block = -1;
  Ops od(bld, dec);
  y = od.dropout(od.rms_norm(y, "decoder final norm", true), dec.p_hidden, "decoder dropout");
  if (m.scale_tied_head) {
    // sequence_output * (d_model ** -0.5): MulBackward0 saves only the Python scalar
    OpDraft d = od.draft(OpKind::kMul, "rescale d_model**-0.5");
    d.op.math16 = false;
    d.inputs.push_back({y, GradRule::kNew});
    int32_t z = od.fresh_like(y, "rescaled");
    d.outputs = {z};
    bld.add_op(std::move(d));
    y = z;
  }
  int32_t logits = od.linear(y, dec.h, m.vocab, false, Tp::kNone, "lm head", "logits",
                             m.tied_embeddings ? table : -1, LinearSite::kLmHead);
  // fam12: CrossEntropyLoss on lm_logits as they are (no .float(); autocast's cross_entropy
  // still runs in fp32): bf16 log-probabilities under bf16-mixed
  cross_entropy(bld, dec, logits, labels, dec.n_full(), m.vocab, false);
}

// ---------------------------------------------------------------- ViT

// ViTEmbeddings: the patch conv (ViTPatchEmbeddings.projection, kernel = stride = patch; under
// autocast the pixels and the weight are cast to 16 bits, and the conv saves both; no gradient
// reaches the pixels, so its backward computes only the weight's), flatten(2).transpose(1, 2)
// (a view), torch.cat with the expanded class token (the result promoted to the class token's
// dtype; CatBackward saves nothing and hands slices of the gradient on, cast where the dtype
// differs), `+ position_embeddings` (saves nothing), dropout.
int32_t vit_embedding(Builder& bld, const Dims& dm, int32_t* labels_out) {
  const ModelConfig& m = *dm.model;
  Ops o(bld, dm);
  bld.current_block = -1;
  const int64_t side = m.image_size / m.patch_size, patches = side * side;
  const int64_t pixels = mul(mul(dm.b, m.channels), mul(m.image_size, m.image_size));
  int32_t px = -1, labels = -1;
  {
    OpDraft d = o.draft(OpKind::kCopy, "batch to device");
    d.op.math16 = false;
    px = bld.fresh(bytes(pixels, DType::kF32), DType::kF32, "pixel values");
    labels = bld.fresh(bytes(dm.b, DType::kI64), DType::kI64, "labels");
    d.outputs = {px, labels};
    bld.add_op(std::move(d));
    for (int32_t t : {px, labels}) bld.hold_until_step_end(t), bld.model_level(t);
    bld.set_labels(labels);
  }
  *labels_out = labels;
  const int64_t kernel = mul(m.channels, mul(m.patch_size, m.patch_size));
  int32_t bias_cast = -1;
  int32_t w = o.weight(mul(dm.h, kernel), dm.h, "patch embedding", -1, &bias_cast);
  // ViTModel.forward: pixel_values.to(projection.weight.dtype) (bf16-mixed: a bf16 copy, which
  // the conv saves; census12: harness/census.py run_vit_case); under autocast the conv's own cast
  int32_t xin = dm.amp ? o.to_half(px, "pixel cast", "pixel values cast")
                       : o.cast(px, dm.param_dt, "pixel cast", "pixel values cast");
  // census12: the conv runs in the weight's dtype (bf16-mixed: bf16), autocast's under amp
  const DType cdt = dm.amp ? dm.half_dt : dm.param_dt;
  OpDraft conv = o.draft(OpKind::kLinear, "patch conv");
  conv.inputs.push_back({xin, GradRule::kNone});
  conv.inputs.push_back({w, GradRule::kNew});
  if (bias_cast >= 0) conv.inputs.push_back({bias_cast, GradRule::kNew});
  const int64_t rows = mul(dm.b, patches);
  int32_t pe = bld.fresh(bytes(mul(rows, dm.h), cdt), cdt, "patch embeddings");
  conv.outputs = {pe};
  conv.saves = {xin, w};
  const int64_t mm = mul(mul(2, rows), mul(kernel, dm.h));
  conv.op.fwd.flops = mm;
  conv.op.bwd.flops = mm;  // the weight's gradient only
  bld.add_op(std::move(conv));
  int32_t cls = bld.param(dm.h, dm.param_dt, "class token");
  const DType edt = promote(cdt, dm.param_dt);
  OpDraft cat = o.draft(OpKind::kCopy, "cat class token");
  cat.op.math16 = false;
  cat.inputs.push_back({cls, GradRule::kNew});
  cat.inputs.push_back({pe, GradRule::kPass, 0});
  int32_t x = bld.fresh(bytes(mul(dm.n_full(), dm.h), edt), edt, "embeddings");
  cat.outputs = {x};
  bld.add_op(std::move(cat));
  int32_t pos = bld.param(mul(m.max_positions, dm.h), dm.param_dt, "position embeddings");
  OpDraft add = o.draft(OpKind::kAdd, "+ position embeddings");
  add.op.math16 = false;
  add.inputs.push_back({x, GradRule::kPass, 0});
  add.inputs.push_back({pos, GradRule::kNew});
  int32_t y = o.fresh_like(x, "embeddings");
  add.outputs = {y};
  bld.add_op(std::move(add));
  return o.dropout(y, dm.p_embd, "embedding dropout");
}

// ViTModel's final layernorm (no pooler under ViTForImageClassification), the class token's row
// `sequence_output[:, 0, :]` (a strided view: SliceBackward allocates a zeroed gradient of the
// whole output; an fp32 linear saves the view, which keeps the whole normed output alive; under
// autocast the cast copy is saved instead), the classifier, and F.cross_entropy over num_labels.
void vit_head(Builder& bld, const Dims& dm, int32_t x, int32_t labels) {
  const ModelConfig& m = *dm.model;
  Ops o(bld, dm);
  bld.current_block = -1;
  int32_t y = o.layer_norm(x, "final norm");
  const DType dt = bld.tensor(y).dtype;
  OpDraft sl = o.draft(OpKind::kCopy, "class token slice");
  sl.op.math16 = false;
  sl.inputs.push_back({y, GradRule::kNew});
  int32_t c = bld.view(y, bytes(mul(dm.b, dm.h), dt), dt);
  sl.outputs = {c};
  bld.add_op(std::move(sl));
  int32_t logits = o.linear(c, dm.h, m.num_labels, true, Tp::kNone, "classifier", "logits");
  cross_entropy(bld, dm, logits, labels, dm.b, m.num_labels, false);  // census12: no upcast
}

}  // namespace

bool builds_encdec(const ModelConfig& m) { return m.decoder_layers > 0 || is_vision(m); }

void build_encdec(Builder& bld, const Dims& dm, int64_t layers, int64_t target_seq) {
  const ModelConfig& m = *dm.model;
  if (m.decoder_layers > 0) {
    build_t5(bld, dm, target_seq);
    return;
  }
  int32_t labels = -1;
  int32_t x = vit_embedding(bld, dm, &labels);
  for (int32_t i = 0; i < layers; ++i) x = build_block(bld, dm, x, i);  // ViT: cloned like any
  vit_head(bld, dm, x, labels);
}

}  // namespace sim::detail
