// moe (issue 13): multi-head latent attention as HF's DeepseekV2Attention runs it
// (src/transformers/models/deepseek_v2/modeling_deepseek_v2.py @ 0233e509531a, forward and
// apply_rotary_emb), under SDPA. The rows are in docs/memory-model.md "MLA".
#include "blocks_moe.hpp"

namespace sim::detail {

namespace {

// apply_rotary_emb on the rotary part t ([tokens, heads x rope], 16-bit under autocast):
// `t.float()` (a copy), view_as_complex, `* freqs_cis` (MulBackward0 saves only freqs_cis: t
// needs grad, freqs_cis not), view_as_real, `.type_as(t)` (a copy back). The fp32 copy and the
// complex product are temporaries of the op.
int32_t complex_rope(Builder& bld, const Dims& dm, Ops& o, int32_t t, const char* name) {
  const Tensor tt = bld.tensor(t);
  const int64_t n = numel_of(tt);
  OpDraft d = o.draft(OpKind::kRope, name);
  d.op.math16 = false;
  d.inputs.push_back({t, GradRule::kNew});
  d.inputs.push_back({bld.rope_tables(), GradRule::kNone});
  d.exec = Exec::kComplexRope;  // exec11
  d.dim = {dm.b, dm.s, n / (mul(dm.b, dm.s) * dm.model->qk_rope_dim), dm.model->qk_rope_dim};
  int32_t y = bld.fresh(tt.bytes, tt.dtype, "rotated (rope part)");
  d.outputs.push_back(y);
  d.saves = {bld.rope_tables()};
  d.op.fwd_transient_bytes = mul(2, bytes(n, DType::kF32));
  d.op.bwd_transient_bytes = mul(2, bytes(n, DType::kF32));
  bld.add_op(std::move(d));
  return y;
}

// torch.cat of column blocks into a new tensor (CatBackward0 saves nothing; each input's
// gradient is a new slice).
int32_t cat(Builder& bld, Ops& o, std::initializer_list<int32_t> parts, int64_t numel, DType dt,
            const char* name, std::array<int64_t, 4> exec_dim) {
  OpDraft d = o.draft(OpKind::kCopy, name);
  d.op.math16 = false;
  d.exec = Exec::kCat;  // exec11: {rows, heads, w0, w1}
  d.dim = {exec_dim[0], exec_dim[1], exec_dim[2], exec_dim[3]};
  for (int32_t p : parts) d.inputs.push_back({p, GradRule::kNew});
  int32_t y = bld.fresh(bytes(numel, dt), dt, name);
  d.outputs.push_back(y);
  bld.add_op(std::move(d));
  return y;
}

// exec11: split_views with the views' geometry for the executor: `base`'s rows of `stride`
// elements (a head's columns, or a token's) cut into column blocks of the given widths.
void mla_split(Builder& bld, const Dims& dm, int32_t base, int64_t stride,
               std::initializer_list<int64_t> widths, int32_t* out, const char* name) {
  Ops o(bld, dm);
  OpDraft d = o.draft(OpKind::kSplit, name);
  d.op.math16 = false;
  d.exec = Exec::kSplit;
  d.inputs.push_back({base, GradRule::kNew});
  const Tensor tb = bld.tensor(base);
  const int64_t rows = numel_of(tb) / stride;
  int i = 0;
  int64_t col = 0;
  for (int64_t w : widths) {
    out[i] = bld.view(base, bytes(mul(rows, w), tb.dtype), tb.dtype, static_cast<int32_t>(col),
                      static_cast<int32_t>(w), static_cast<int32_t>(stride));
    d.outputs.push_back(out[i++]);
    col += w;
  }
  bld.add_op(std::move(d));
}

}  // namespace

// --- mla5 (issue 13): Megatron-core's MLA (ImplSpec::mla_ops == MlaOps::kMegatronTe) ---
// NVIDIA/Megatron-LM @ d98e8a64ddf3: megatron/core/transformer/multi_latent_attention.py
// (MLASelfAttention.__init__, _qkv_down_projection, get_query_key_value_tensors
// qkv_up_proj_and_rope_apply, MultiLatentAttention.forward), mla_qk_norm_config.py
// (_resolve_mla_qk_layernorm), models/gpt/gpt_layer_specs.py (the TE spec),
// fusions/fused_mla_yarn_rope_apply.py; NVIDIA/TransformerEngine @ d0067d0da6cb:
// transformer_engine/pytorch/module/layernorm_linear.py (_LayerNormLinear.forward), linear.py.
// Rows and the hand derivation: docs/memory-model.md "Megatron's MLA".

// TE's LayerNormLinear with normalization="RMSNorm" (layernorm_linear.py:181-188: `inp.view((-1,
// in_features))`, no copy; :526-536 prepare_for_saving(inputmat, weight, ln_weight, ln_out,
// mu (None for RMSNorm), rsigma)): the norm writes ln_out in the activation dtype and rsigma
// (fp32 [rows], normalization.cpp rmsnorm_fwd); the GEMM reads ln_out. Two ops: TE's RMSNorm
// (norm_te.cpp te_rms_norm: saves its input (a view keeps its whole base alive), its weight
// and rsigma; its backward's workspace), then the linear, which saves ln_out and its weight.
// tece: this was a copy of te_rms_norm with one backward kernel; TE launches two (the backward
// kernel and rmsnorm_bwd_finalize, rmsnorm_bwd_semi_cuda_kernel.cu).
namespace {
int32_t te_norm_linear(Builder& bld, const Dims& dm, int32_t x, int64_t in_f, int64_t out_f,
                       const char* norm_name, const char* name, const char* role) {
  Ops o(bld, dm);
  const int32_t ln_out = te_rms_norm(bld, dm, x, in_f, norm_name);
  // moetp (issue 13): the up projections (linear_q_proj, linear_q_up_proj, linear_kv_up_proj)
  // are TELayerNormColumnParallelLinear over the TP group (gather_output=False: heads / tp);
  // under SP the norm runs on the sequence shard and ln_out is all-gathered for the GEMM, the
  // shard saved (Ops::linear's column-parallel rows). At --tp 1 kColumn is kNone.
  return o.linear(ln_out, in_f, out_f, false, Ops::Tp::kColumn, name, role);
}

int32_t build_mla_megatron(Builder& bld, const Dims& dm, int32_t attn_in) {
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  using Tp = Ops::Tp;
  const int64_t h = dm.h, a = dm.a, qd = dm.d, rope = m.qk_rope_dim, nope = qd - rope;
  const int64_t r = m.kv_lora_rank, vd = m.v_head_dim, nf = dm.n_full();
  const DType hdt = dm.half_dt;
  // queries. --qk-layernorm (DeepSeek's q_a/kv_a layernorms): _resolve_mla_qk_layernorm gives
  // the up projections TE's fused norm + linear. Without a q latent it gives linear_q_proj one
  // too (`linear_q_proj_cls = self._mla_fused_linear_or_default(...)`, since 4464d1c197): an
  // RMSNorm of width h (its own weight) on the already normalized block input. With a q latent:
  // linear_q_down_proj (TELinear, parallel_mode "duplicated": saves its input), then the fused
  // q norm + linear_q_up_proj.
  int32_t q = -1;
  if (m.q_lora_rank == 0) {
    q = te_norm_linear(bld, dm, attn_in, h, a * qd, "q_proj layernorm (fused)", "q proj", "q");
  } else {
    const int64_t ql = m.q_lora_rank;
    const int32_t qc = o.linear(attn_in, h, ql, false, Tp::kNone, "q down proj", "q compressed");
    q = te_norm_linear(bld, dm, qc, ql, a * qd, "q layernorm (fused)", "q up proj", "q");
  }
  // linear_kv_down_proj (TELinear, duplicated): kv_combined [N, r + rope], saves the same input;
  // torch.split into kv_compressed and k_pos_emb (views)
  const int32_t ckv = o.linear(attn_in, h, r + rope, false, Tp::kNone, "kv down proj", "kv combined");
  const DType cdt = bld.tensor(ckv).dtype;
  int32_t cv[2];
  // moetp (issue 13): the down projections are TELinear with parallel_mode "duplicated"
  // (replicated weights, no TP communication) on the block's input as it is: the sequence shard
  // [N / tp, h] under SP (`kv_compressed:[s / TP, b, kv_lora_rank]`)
  // exec14: with the views' geometry (per token: r then rope columns) for the executor; the
  // same views and bytes as split_views
  mla_split(bld, dm, ckv, r + rope, {r, rope}, cv, "kv_compressed, k_pos_emb split");
  if (dm.t > 1 && dm.sp) {
    // get_query_key_value_tensors: `if get_pg_size(self.tp_group) > 1 and
    // self.config.sequence_parallel: k_pos_emb = gather_from_sequence_parallel_region(k_pos_emb)`
    // (_GatherFromSequenceParallelRegion: a new [N, rope] buffer, saves nothing; its backward
    // reduce-scatters the gradient)
    OpDraft d = o.draft(OpKind::kCopy, "k_pos_emb all-gather");
    d.op.math16 = false;
    d.inputs.push_back({cv[1], GradRule::kNew});
    const int32_t g = bld.fresh(bytes(mul(nf, rope), cdt), cdt, "k_pos_emb gathered");
    d.outputs.push_back(g);
    d.op.fwd.comm_bytes = d.op.bwd.comm_bytes = bytes(mul(nf, rope), cdt);
    d.op.fwd.comm_kind = kAllGather;
    d.op.bwd.comm_kind = kReduceScatter;
    bld.add_op(std::move(d));
    cv[1] = g;
  }
  // the fused kv norm + linear_kv_up_proj: kv [N, a (nope + v)]; its saved input is the
  // kv_compressed view, which keeps kv_combined whole
  const int32_t kv = te_norm_linear(bld, dm, cv[0], r, a * (nope + vd), "kv layernorm (fused)",
                                    "kv up proj", "kv up");
  // fused_apply_mla_rope_for_q (= fused_mla_rope_inplace, _FusedMLARoPEInplace): the rope
  // part of q rotated in place by a Triton kernel; save_for_backward(cos, sin) only; backward
  // in place on the gradient
  const int32_t tables = bld.rope_tables();
  int32_t query = -1;
  {
    OpDraft d = o.draft(OpKind::kRope, "fused mla rope q (in place)");
    d.op.math16 = false;
    d.exec = Exec::kMlaRopeQ;  // exec14
    d.dim = {dm.b, dm.s, a, nope, rope};
    d.inputs.push_back({q, GradRule::kPass, 0});
    d.inputs.push_back({tables, GradRule::kNone});
    query = bld.view(q, bld.tensor(q).bytes, bld.tensor(q).dtype);
    d.outputs.push_back(query);
    d.saves = {tables};
    bld.add_op(std::move(d));
  }
  // fused_apply_mla_rope_for_kv (_FusedMLARoPEKVSplit): new o_key [N, a, rope + nope] (k_pe
  // rotated and broadcast to every head) and o_value [N, a, v] (kv.new_empty); saves cos, sin;
  // backward writes new d_kv and d_emb
  int32_t key = -1, value = -1;
  {
    OpDraft d = o.draft(OpKind::kRope, "fused mla rope kv split");
    d.op.math16 = false;
    d.exec = Exec::kMlaRopeKv;  // exec14
    d.dim = {dm.b, dm.s, a, nope, rope, vd};
    d.inputs.push_back({kv, GradRule::kNew});
    d.inputs.push_back({cv[1], GradRule::kNew});
    d.inputs.push_back({tables, GradRule::kNone});
    key = bld.fresh(bytes(mul(nf, a * qd), hdt), hdt, "key");
    value = bld.fresh(bytes(mul(nf, a * vd), hdt), hdt, "value");
    d.outputs = {key, value};
    d.saves = {tables};
    bld.add_op(std::move(d));
  }
  // query/key/value .contiguous() are no-ops (all contiguous); TE DotProductAttention, the
  // cuDNN fused backend (qk head dim != v head dim; no THD padding of v outside packed
  // sequences: _prepare_mla_core_attention_value)
  return core_attention(bld, dm, query, key, value);
}
}  // namespace
// --- end mla5 ---

int32_t build_mla(Builder& bld, const Dims& dm, int32_t attn_in) {
  if (dm.impl && dm.impl->mla_ops == MlaOps::kMegatronTe)  // mla5
    return build_mla_megatron(bld, dm, attn_in);
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  using Tp = Ops::Tp;
  const int64_t h = dm.h, a = dm.a, qd = dm.d, rope = m.qk_rope_dim, nope = qd - rope;
  const int64_t r = m.kv_lora_rank, vd = m.v_head_dim, nf = dm.n_full();
  const DType hdt = dm.half_dt;
  // queries: q_proj, or q_b_proj(q_a_layernorm(q_a_proj(x)))
  int32_t q = -1;
  if (m.q_lora_rank == 0) {
    q = o.linear(attn_in, h, a * qd, false, Tp::kNone, "q proj", "q", -1, LinearSite::kQ);
  } else {
    const int64_t ql = m.q_lora_rank;
    int32_t qa = o.linear(attn_in, h, ql, m.qkv_bias, Tp::kNone, "q_a proj", "q latent", -1,
                          LinearSite::kQA);  // lora6: the sites PEFT names
    Dims dq = dm;
    dq.h = ql;  // an RMSNorm of width q_lora_rank
    Ops oq(bld, dq);
    int32_t qn = oq.rms_norm(qa, "q_a_layernorm");
    q = o.linear(qn, ql, a * qd, false, Tp::kNone, "q_b proj", "q", -1, LinearSite::kQB);
  }
  // q.view(...).transpose(1, 2) split into q_nope and q_pe (views), right after the projection
  // as forward writes it (census: harness/census.py run_mla_case)
  const DType qdt = bld.tensor(q).dtype;
  int32_t qv[2];
  (void)qdt;
  mla_split(bld, dm, q, qd, {nope, rope}, qv, "q_nope, q_pe split");  // exec11: per head
  // compressed_kv = kv_a_proj_with_mqa(x): [tokens, r + rope]; split into the latent and k_pe
  int32_t ckv = o.linear(attn_in, h, r + rope, m.qkv_bias, Tp::kNone, "kv_a proj", "kv latent",
                         -1, LinearSite::kKvA);
  const DType cdt = bld.tensor(ckv).dtype;
  int32_t cv[2];
  (void)cdt;
  mla_split(bld, dm, ckv, r + rope, {r, rope}, cv, "kv latent split");  // exec11: per token
  int32_t lat = cv[0], k_pe = cv[1];
  // kv_a_layernorm over the latent (an RMSNorm of width r on a 16-bit slice: its fp32 copy)
  Dims dk = dm;
  dk.h = r;
  Ops ok(bld, dk);
  int32_t latn = ok.rms_norm(lat, "kv_a_layernorm");
  // kv_b_proj: [tokens, a x (nope + v)], split into k_nope and the values (views)
  int32_t kvb = o.linear(latn, r, a * (nope + vd), false, Tp::kNone, "kv_b proj", "kv up", -1,
                         LinearSite::kKvB);
  const DType bdt = bld.tensor(kvb).dtype;
  int32_t kv[2];
  (void)bdt;
  mla_split(bld, dm, kvb, nope + vd, {nope, vd}, kv, "k_nope, value split");  // exec11: per head
  int32_t k_nope = kv[0], v = kv[1], q_nope = qv[0], q_pe = qv[1];
  // the decoupled rotary part: q_pe per head, k_pe once (shared by the heads), then expanded
  q_pe = complex_rope(bld, dm, o, q_pe, "rope q (complex)");
  k_pe = complex_rope(bld, dm, o, k_pe, "rope k (complex)");
  // query_states = cat(q_nope, q_pe), key_states = cat(k_nope, k_pe.expand(heads)): new tensors
  int32_t qs = cat(bld, o, {q_nope, q_pe}, mul(nf, a * qd), hdt, "query cat", {nf * a, a, nope, rope});
  int32_t ks = cat(bld, o, {k_nope, k_pe}, mul(nf, a * qd), hdt, "key cat", {nf * a, a, nope, rope});
  // SDPA with qk head dim != v head dim; v is a view of kv_b's output (saving it keeps that
  // whole output alive)
  return core_attention(bld, dm, qs, ks, v);
}

}  // namespace sim::detail
