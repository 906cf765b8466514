// census12 (issue 12): SDPA's math kernel where HF hands it K/V with fewer heads than Q and no
// enable_gqa: Falcon's multi_query (FalconAttention.forward, modeling_falcon.py @ 00dcc6dda6f6:
// `scaled_dot_product_attention(query_layer, key_layer, value_layer, attn_mask=..., dropout_p=0.0,
// is_causal=...)` with key/value [b, 1, s, d]). torch's sdp_utils (check_batch_size_and_num_heads
// _dense) lets the flash and memory-efficient kernels take K/V with fewer heads only when
// enable_gqa is passed (torch >= 2.5, flash only); otherwise both are refused and SDPA runs
// _scaled_dot_product_attention_math (aten/src/ATen/native/transformers/attention.cpp, torch 2.1
// to 2.5), a composite op whose autograd records each step:
//   query = query_ * sqrt(scale)                       (new [b, a, s, d]; saves a scalar only)
//   attn = matmul(query, key.transpose(-2, -1) * sqrt(scale))
//        (k * sqrt(scale) new [b, 1, d, s]; matmul's broadcast expands it to [b, a, d, s] and
//         reshapes to [b*a, d, s]: a copy; bmm saves the query view and that copy)
//   is_causal: attn_mask = ones(L, S, bool).tril() -> an additive [s, s] mask; attn.add_(mask)
//   attn = softmax(attn, -1)                           (saves its output, [b, a, s, s])
//   out = matmul(attn, value)                          (v expanded copy [b*a, s, d]; bmm saves
//                                                       attn and that copy)
// then HF's view/permute/reshape copy to [b, s, a*d]. Under autocast SDPA runs in 16 bits (the
// casts before it are the flash row's). No dropout (dropout_p=0.0 on Falcon's rotary path).
#include "blocks_census12.hpp"

#include <cmath>

#include "ops.hpp"

namespace sim::detail {

bool sdpa_math_kernel(const Dims& dm) {
  return dm.model->kv_index_split && dm.g != dm.a;
}

int32_t sdpa_math_attention(Builder& bld, const Dims& dm, int32_t q, int32_t k, int32_t v) {
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  const int64_t hd = dm.d, nq = dm.a * hd;
  const DType hdt = bld.tensor(q).dtype;
  const int64_t nf = dm.n_full();
  const int64_t scores = mul(mul(dm.b, dm.a), mul(dm.s, dm.s));
  const int64_t fl = mul(mul(2, dm.b), mul(mul(dm.s, dm.s), nq));
  auto op = [&](const char* name, OpKind kind) {
    OpDraft d = o.draft(kind, name);
    d.op.math16 = false;
    d.op.core_attention = true;
    d.exec = Exec::kNone;
    return d;
  };
  // query_ * sqrt(scale), key * sqrt(scale): new tensors, nothing of size saved
  auto scaled = [&](int32_t t, const char* name) {
    OpDraft d = op(name, OpKind::kMul);
    // exec10: sqrt(1 / sqrt(d)) each (attention.cpp: calculate_scale(query_, scale).sqrt())
    d.exec = Exec::kScale;
    d.p = static_cast<float>(std::pow(static_cast<double>(hd), -0.25));
    d.inputs.push_back({t, GradRule::kNew});
    const int32_t y = o.fresh_like(t, name);
    d.outputs.push_back(y);
    bld.add_op(std::move(d));
    return y;
  };
  const int32_t qs = scaled(q, "sdpa math q scale");
  const int32_t ks = scaled(k, "sdpa math k scale");
  int32_t mask = -1;
  if (m.causal) {  // ones(L, S, bool).tril() converted to an additive mask in q's dtype
    OpDraft d = op("sdpa math causal mask", OpKind::kMask);
    d.op.fwd_transient_bytes = bytes(mul(dm.s, dm.s), DType::kBool);
    d.exec = Exec::kAdditiveMask;  // exec10: -inf above the diagonal (convert_boolean_attn_mask)
    d.dim = {1, dm.s, 0};
    mask = bld.fresh(bytes(mul(dm.s, dm.s), hdt), hdt, "sdpa math mask");
    d.outputs.push_back(mask);
    bld.add_op(std::move(d));
  }
  OpDraft qk = op("sdpa math qk", OpKind::kBmm);
  qk.inputs = {{qs, GradRule::kNew}, {ks, GradRule::kNew}};
  const int32_t kx = bld.fresh(bytes(mul(nf, nq), hdt), hdt, "k broadcast copy");
  const int32_t sc = bld.fresh(bytes(scores, hdt), hdt, "attention scores");
  qk.outputs = {sc, kx};
  qk.saves = {qs, kx};
  qk.exec = Exec::kQk;  // exec10: k's broadcast copy (bits 2, 4), q and k scaled already (8)
  qk.dim = {dm.b, dm.a, dm.s, hd, 1, 2 | 4 | 8};
  qk.op.fwd.flops = fl;
  qk.op.bwd.flops = mul(2, fl);
  bld.add_op(std::move(qk));
  OpDraft sm = op("sdpa math softmax", OpKind::kSoftmax);  // attn.add_(mask) folded in
  sm.inputs.push_back({sc, GradRule::kNew});
  if (mask >= 0) sm.inputs.push_back({mask, GradRule::kNone});
  const int32_t probs = bld.fresh(bytes(scores, hdt), hdt, "softmax out");
  sm.outputs = {probs};
  sm.saves = {probs};
  sm.exec = Exec::kSoftmax;  // exec10: with the mask input, added to every row first
  sm.dim = {mul(mul(dm.b, dm.a), dm.s), dm.s, 0};
  bld.add_op(std::move(sm));
  OpDraft av = op("sdpa math av", OpKind::kBmm);
  av.inputs = {{probs, GradRule::kNew}, {v, GradRule::kNew}};
  const int32_t vx = bld.fresh(bytes(mul(nf, nq), hdt), hdt, "v broadcast copy");
  const int32_t out = bld.fresh(bytes(mul(nf, nq), hdt), hdt, "attention out");
  av.outputs = {out, vx};
  av.saves = {probs, vx};
  av.exec = Exec::kAv;  // exec10: v's broadcast copy (bits 2, 4)
  av.dim = {dm.b, dm.a, dm.s, hd, 1, 2 | 4};
  av.op.fwd.flops = fl;
  av.op.bwd.flops = mul(2, fl);
  bld.add_op(std::move(av));
  // HF: attn_output.view(b, a, s, d).permute(0, 2, 1, 3).reshape(b, s, a*d): a copy
  OpDraft cp = op("attention out copy", OpKind::kCopy);
  cp.op.core_attention = false;
  cp.exec = Exec::kCopy;  // exec10: the executor's av writes [tokens, a*d] already
  cp.inputs.push_back({out, GradRule::kPass, 0});
  const int32_t ctx = o.fresh_like(out, "attention out copy");
  cp.outputs = {ctx};
  bld.add_op(std::move(cp));
  return ctx;
}

}  // namespace sim::detail
