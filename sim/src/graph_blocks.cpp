// The op lists of docs/memory-model.md: the embedding, one transformer block, and the head and
// loss, per rank, under the precision regime and profile. Keep the two in step: every op here has
// a row there saying what it saves and why.
#include <algorithm>
#include <string>

#include "blocks_famdec.hpp"  // famdec (issue 12)
#include "blocks_census12.hpp"  // census12 (issue 12): SDPA math kernel
#include "blocks_hfmask.hpp"  // hfimpl (issue 10)
#include "blocks_moe.hpp"
#include "blocks_feat14.hpp"  // feat14 (issue 13)
#include "ops.hpp"

namespace sim::detail {
namespace {

// HF LlamaModel computes cos and sin once per forward ([b, s, d] each, in the activations' dtype)
// and every layer's rotary op saves them. Under pipeline parallelism every stage computes its own.
void build_rope_tables(Builder& bld, const Dims& dm) {
  famdec_model_tensors(bld, dm);  // famdec: the 4-D mask HF passes to SDPA (Gemma 2/3, Phi-3)
  hf_model_masks(bld, dm);        // hfimpl: HF's padding / additive / extended masks
  if (dm.model->positions != PosEmbedding::kRope) return;
  Ops o(bld, dm);
  OpDraft d = o.draft(OpKind::kRope, "rotary tables");
  d.op.math16 = false;
  d.exec = Exec::kRopeTables;
  d.dim = {dm.b, dm.s, dm.d};
  // famdec: partial rotary tables are rotary_dim wide (GPT-NeoX); Gemma 3 keeps a global and a
  // local pair (Gemma3TextModel.rotary_emb and rotary_emb_local)
  const int64_t rw = famdec_rotary_width(dm), tables = famdec_rotary_tables(*dm.model);
  if (rw != dm.d || tables != 1) d.exec = Exec::kNone;
  int64_t table = bytes(mul(mul(2 * tables, dm.b), mul(dm.s, rw)), dm.resid_dt);
  // moe: DeepSeek-V2's freqs_cis, complex64 [1, s, rope/2] (torch.polar, not cast): fp32 pairs.
  // moe2: batch 1, as position_ids = cache_position.unsqueeze(0) when the Trainer passes none
  // (DeepseekV2Model.forward @ 0233e509; census: harness/census.py run_mla_case)
  if (is_mla(*dm.model)) table = bytes(mul(dm.s, dm.model->qk_rope_dim), DType::kF32);
  DType tdt = is_mla(*dm.model) ? DType::kF32 : dm.resid_dt;
  // mla5: Megatron's fused MLA rope reads YarnRotaryEmbedding.get_cached_cos_sin(seq,
  // dtype=hidden_states.dtype): cos and sin [s, 1, 1, rope] in the activation dtype
  // (multi_latent_attention.py @ d98e8a6 get_query_key_value_tensors)
  const bool mla_te = is_mla(*dm.model) && dm.impl && dm.impl->mla_ops == MlaOps::kMegatronTe;
  if (mla_te) table = bytes(mul(2 * dm.s, dm.model->qk_rope_dim), dm.half_dt), tdt = dm.half_dt;
  // exec11: HF's complex rotary tables have a kernel; exec14: so do Megatron's fused YaRN ones
  if (is_mla(*dm.model))
    d.exec = mla_te ? Exec::kMlaRopeTables : Exec::kComplexRopeTables,
    d.dim = {dm.s, dm.model->qk_rope_dim};
  // fam12: Gemma 3's two pairs are two storages, each saved only by the layers that use it
  if (tables == 2) table /= 2;
  int32_t cs = bld.fresh(table, tdt, "rotary cos+sin");
  d.outputs = {cs};
  bld.famdec_local_rope = -1;
  if (tables == 2) {
    bld.famdec_local_rope = bld.fresh(table, tdt, "rotary cos+sin (local)");
    d.outputs.push_back(bld.famdec_local_rope);
  }
  bld.add_op(std::move(d));
  bld.model_level(cs);
  if (bld.famdec_local_rope >= 0) bld.model_level(bld.famdec_local_rope);
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
    // dim[2]: the labels' classes when they are not token ids (implhf: a token classifier's)
    d.dim = {dm.n_full(), dm.v, m.head == Head::kTokenClassification ? m.num_labels : 0};
    d.outputs = {ids};
    bld.hold_until_step_end(ids);
    bld.model_level(ids);
    if (labels) {
      const LabelShape ls = label_shape(dm);  // implhf: the head's labels
      const int32_t lab = bld.fresh(bytes(ls.numel, ls.dtype), ls.dtype, "labels");
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
  // feat (LoRA, sim/src/lora.cpp): PEFT's input-embeddings hook keeps the word lookup to step end
  if (dm.lora_rank > 0) lora_input_embeddings(bld, dm, x, pos_table >= 0);
  if (m.embed_scale) x = famdec_embed_scale(bld, dm, x);  // famdec: Gemma's * sqrt(h)
  if (m.post_norm) x = o.norm(x, "embedding norm");  // BERT: LayerNorm on the embeddings
  return o.dropout(x, dm.p_embd, "embedding dropout");
}

int32_t build_attention(Builder& bld, const Dims& dm, int32_t attn_in) {
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  using Tp = Ops::Tp;
  const int64_t h = dm.h, hd = dm.d, nq = dm.a * hd, nkv = dm.g * hd;
  const DType hdt = dm.half_dt;
  const int64_t nf = dm.n_full();

  int32_t q = -1, k = -1, v = -1;
  if (dm.fused_qkv) {
    int32_t qkv = o.linear(attn_in, h, nq + 2 * nkv, m.qkv_bias, Tp::kColumn, "qkv", "qkv out", -1,
                           LinearSite::kQkv);
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
    if (m.kv_index_split) {
      // census12: Falcon's `fused_qkv[..., [-2], :]`, `[..., [-1], :]`: K and V are copies (one
      // head each; census: harness/census.py falcon_block), each IndexBackward0 saving its
      // one-element int64 index; q stays a view (exec10: Exec::kIndexSplit)
      d.exec = Exec::kIndexSplit;
      d.dim = {w, wq, wkv, hd};
      k = bld.fresh(bytes(mul(nf, nkv), hdt), hdt, "key (indexed)");
      v = bld.fresh(bytes(mul(nf, nkv), hdt), hdt, "value (indexed)");
      d.outputs = {q, k, v};
      // (the two 8-byte indices as one 16-byte storage: the op's lists are short)
      const int32_t idx = bld.fresh(16, DType::kI64, "split indices");
      d.outputs.push_back(idx);
      d.saves.push_back(idx);
    }
    bld.add_op(std::move(d));
  } else {
    q = o.linear(attn_in, h, nq, m.qkv_bias, Tp::kColumn, "q proj", "q", -1, LinearSite::kQ);
    k = o.linear(attn_in, h, nkv, m.qkv_bias, Tp::kColumn, "k proj", "k", -1, LinearSite::kK);
    v = o.linear(attn_in, h, nkv, m.qkv_bias, Tp::kColumn, "v proj", "v", -1, LinearSite::kV);
  }
  if (m.qk_norm != ModelConfig::QkNorm::kNone) {  // famdec: OLMo 2, Gemma 3
    q = famdec_qk_norm(bld, dm, q, dm.a, "q norm");
    k = famdec_qk_norm(bld, dm, k, dm.g, "k norm");
  }

  if (m.positions == PosEmbedding::kRope) {
    // q*cos + rotate_half(q)*sin (HF apply_rotary_pos_emb): saves only cos and sin (they need no
    // grad); its temporaries are q*cos, -x2, cat(-x2, x1) and rotate_half(q)*sin.
    int32_t cos_sin = famdec_rope_tables(bld, dm);  // fam12: Gemma 3's local pair on sliding layers
    auto rope = [&](int32_t t_in, const char* name) {
      // famdec: partial rotary rotates a slice of each head and concatenates the rest
      const bool partial = famdec_partial_rotary(dm);
      const int32_t t = partial ? famdec_rotary_slice(bld, dm, t_in) : t_in;
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
      // time3 (issue 11): torchtitan's complex rotary (models/llama/model.py apply_rotary_emb):
      // x.float() (reads x, writes an fp32 copy), the complex64 multiply by freqs_cis (reads and
      // writes fp32) and .type_as(x) (reads fp32, writes x's dtype): the in/out/table bytes above
      // plus four fp32 passes, 16 bytes per element; autograd's backward runs the same three
      // (ToCopyBackward, MulBackward0 by conj(freqs_cis), ToCopyBackward). An fp32 x has no casts.
      if (dm.impl && dm.impl->rope_kernels == RopeKernels::kComplexFp32 &&
          bytes_of(bld.tensor(t).dtype) < 4) {
        d.fwd_inner_bytes = d.bwd_inner_bytes = mul(16, numel_of(bld.tensor(t)));
        d.op.fwd.kernels = d.op.bwd.kernels = 3;
      }
      if (partial) d.exec = Exec::kNone;
      bld.add_op(std::move(d));
      return partial ? famdec_rotary_cat(bld, dm, y, t_in, "rotary cat") : y;
    };
    q = rope(q, "rope q");
    k = rope(k, "rope k");
  }

  return core_attention(bld, dm, q, k, v);
}

namespace {

// repeat_kv (expand + reshape): a copy of K or V at a heads in the half dtype, saving nothing;
// its backward sums the gradient back to g heads. Used by eager GQA and by a release that
// repeats before SDPA (ImplSpec::flash_repeat_kv).
int32_t repeat_kv_copy(Builder& bld, const Dims& dm, int32_t t, const char* name) {
  Ops o(bld, dm);
  const int64_t hd = dm.d, nq = dm.a * hd, nf = dm.n_full();
  OpDraft d = o.draft(OpKind::kCopy, name);
  d.op.core_attention = true;
  d.exec = Exec::kRepeatKv;
  d.dim = {nf, dm.g, hd, dm.a / dm.g};
  d.op.math16 = false;
  d.inputs.push_back({t, GradRule::kNew});
  const int32_t y = bld.fresh(bytes(mul(nf, nq), dm.half_dt), dm.half_dt, "repeated kv");
  d.outputs.push_back(y);
  bld.add_op(std::move(d));
  return y;
}

}  // namespace

int32_t core_attention(Builder& bld, const Dims& dm, int32_t q, int32_t k, int32_t v) {
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  const int64_t hd = dm.d, nq = dm.a * hd;
  const DType hdt = dm.half_dt;
  const int64_t nf = dm.n_full();
  const bool causal = m.causal;
  // moe: MLA's values have their own head dim (v_head_dim != qk head dim)
  const int64_t nv = is_mla(m) ? dm.a * m.v_head_dim : nq;
  int32_t ctx = -1;  // [tokens, a*d] input of the output projection
  // hfimpl: GPT-2's per-layer `bias` buffer exists under every attention implementation
  const int32_t layer_bias = hf_causal_buffer(bld, dm);
  if (dm.attention == AttentionKind::kFlash) {
    // SDPA's flash kernel (aten::_scaled_dot_product_flash_attention): saves q, k, v, the output
    // and the fp32 logsumexp [b, a, s]; dropout is inside the kernel (no mask kept); GQA native.
    // SDPA is on autocast's lower-precision list: fp32 operands (the rotated q and k, promoted by
    // fp32 cos/sin) are cast to 16 bits first, and the casts are what it saves.
    // famdec: an additive 4-D mask (Gemma 2/3; Phi-3 at its window) makes SDPA run its
    // memory-efficient kernel, which saves the mask (attn_bias) beside q, k, v, out and lse
    int32_t sdpa_mask = famdec_sdpa_mask(bld, dm);
    if (sdpa_mask < 0) sdpa_mask = hf_padding_sdpa_mask(bld, dm);  // hfimpl: --padding
    // hfimpl: with a mask HF's sdpa_attention_forward repeats K and V to a heads (no enable_gqa),
    // and autocast casts the mask per layer
    const bool repeated = sdpa_mask >= 0 && dm.impl && dm.impl->model_masks && dm.g != dm.a;
    // feat3: MLA's qk head dim != v head dim: SDPA's flash kernel needs one head dim for q, k
    // and v (aten/src/ATen/native/transformers/sdp_utils_cpp.h check_head_dim_size_flash), the
    // memory-efficient kernel takes a v of its own (check_head_dim_size_mem_efficient)
    // mla5: TE's DotProductAttention (Megatron) picks the cuDNN fused backend, which takes a v
    // head dim of its own: no memory-efficient fallback, the kernel the implementation names
    const bool any_v_dim = dm.impl && dm.impl->mla_ops == MlaOps::kMegatronTe;
    const bool mem_efficient = sdpa_mask >= 0 || (nv != nq && !any_v_dim);
    if (repeated) {
      k = hf_repeat_kv(bld, dm, k, "repeat k");
      v = hf_repeat_kv(bld, dm, v, "repeat v");
    }
    q = o.to_half(q, "q cast", "q cast");
    k = o.to_half(k, "k cast", "k cast");
    v = o.to_half(v, "v cast", "v cast");
    // census12: K/V with fewer heads and no enable_gqa (Falcon multi_query): the math kernel
    if (!repeated && sdpa_math_kernel(dm)) return sdpa_math_attention(bld, dm, q, k, v);
    // implver: a release that repeats K and V to every query head before SDPA (ImplSpec::
    // flash_repeat_kv; torchtitan @ 9dec370 model.py:201-202): expand + reshape copies each, the
    // copy saves nothing, and the kernel then sees a heads of K and V (and saves those).
    int64_t kv_heads = repeated ? dm.a : dm.g;  // hfimpl's repeat above
    if (!repeated && dm.impl && dm.impl->flash_repeat_kv && dm.g != dm.a) {
      k = repeat_kv_copy(bld, dm, k, "repeat k");
      v = repeat_kv_copy(bld, dm, v, "repeat v");
      kv_heads = dm.a;
    }
    if (sdpa_mask >= 0 && dm.impl && dm.impl->model_masks)
      sdpa_mask = hf_sdpa_mask_operand(bld, dm, sdpa_mask);
    OpDraft d = o.draft(OpKind::kFlashAttention,
                        sdpa_mask >= 0 ? "sdpa attention (mask)" : "flash attention");
    d.exec = mem_efficient ? Exec::kMemEfficient : Exec::kFlash;  // exec12
    // time (issue 11): the kernel that runs it, timed from its table (sim/src/kernels.cpp)
    if (mem_efficient) d.op.kernel = KernelChoice::kSdpaMemEfficient;
    else if (dm.impl) d.op.kernel = dm.impl->attention_kernel;
    d.dim = {dm.b, dm.a, dm.s, hd, dm.a / kv_heads, causal ? 1 : 0};  // implver: kv_heads
    d.p = static_cast<float>(dm.p_attn);
    d.op.core_attention = true;
    d.op.sac_save = true;  // SDPA is in torchtitan's save list
    d.inputs = {{q, GradRule::kNew}, {k, GradRule::kNew}, {v, GradRule::kNew}};
    int32_t out = bld.fresh(bytes(mul(nf, nv), hdt), hdt, "attention out");
    // hfimpl: the memory-efficient kernel's logsumexp is [b, a, ceil(s / 32) * 32]
    // (aten/src/ATen/native/transformers/cuda/attention.cu _efficient_attention_forward:
    // kAlignLSE = 32)
    const int64_t lse_s = mem_efficient ? (dm.s + 31) / 32 * 32 : dm.s;
    int32_t lse = bld.fresh(bytes(mul(mul(dm.b, dm.a), lse_s), DType::kF32), DType::kF32,
                            mem_efficient ? "mem-efficient logsumexp" : "flash logsumexp");
    d.outputs = {out, lse};
    d.saves = {q, k, v, out, lse};
    if (sdpa_mask >= 0) {
      d.inputs.push_back({sdpa_mask, GradRule::kNone});
      d.saves.push_back(sdpa_mask);
    }
    const int64_t fl = mul(mul(2, dm.b), mul(mul(dm.s, dm.s), nq + nv));  // qk and av
    d.op.fwd.flops = fl;
    d.op.bwd.flops = mul(2, fl);
    // flash-attention 2 backward: dq accumulator fp32 [b, s_128, a, d_32] and softmax_d fp32
    // [b, a, s_128] (flash_api.cpp mha_bwd); per-query-head dk, dv when KV heads are fewer.
    const int64_t s128 = (dm.s + 127) / 128 * 128;
    const int64_t d32 = hd <= 128 ? (hd + 31) / 32 * 32 : (hd + 63) / 64 * 64;
    int64_t tr = bytes(mul(mul(dm.b, s128), mul(dm.a, d32)), DType::kF32) +
                 bytes(mul(mul(dm.b, dm.a), s128), DType::kF32);
    if (kv_heads != dm.a) tr += mul(2, bytes(mul(mul(dm.b, dm.s), nq), hdt));  // implver
    d.op.bwd_transient_bytes = tr;
    // feat: context parallelism's ring (sim/src/cp.cpp)
    cp_ring_attention(d, dm, bld.tensor(q).bytes, bld.tensor(k).bytes + bld.tensor(v).bytes,
                      bld.tensor(out).bytes, bld.tensor(lse).bytes);
    bld.add_op(std::move(d));
    ctx = out;  // [b, s, a, d] already: transpose(1, 2).contiguous() copies nothing
  } else {
    int32_t kk = k, vv = v;
    // census12: Falcon's one K/V head goes to torch.matmul as it is; matmul's broadcast
    // (expand + reshape to [b*a, ...]) copies it inside qk and av (saved there), no repeat_kv
    const bool kv_bcast = m.kv_index_split && dm.g != dm.a;
    if (dm.g != dm.a && !kv_bcast) {
      // GQA without flash: repeat_kv materializes a/g copies of K and V (expand + reshape)
      kk = repeat_kv_copy(bld, dm, k, "repeat k");
      vv = repeat_kv_copy(bld, dm, v, "repeat v");
    }
    const int64_t scores_numel = mul(mul(dm.b, dm.a), mul(dm.s, dm.s));
    const int64_t fl = mul(mul(2, dm.b), mul(mul(dm.s, dm.s), nq));
    const int64_t fl_av = mul(mul(2, dm.b), mul(mul(dm.s, dm.s), nv));  // feat3: MLA's v dim
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
    // famdec: partial rotary's torch.cat makes q and k contiguous [b, a, s, d] (no copy)
    // feat3: so do MLA's query and key concatenations (modeling_deepseek_v2.py torch.cat)
    const bool catted = famdec_partial_rotary(dm) || is_mla(m);
    const int32_t q_op = operand(qk, q, catted, "q for bmm");
    int32_t k_op = operand(qk, kk, dm.g != dm.a || catted, "k for bmm");
    if (kv_bcast) {  // census12: the broadcast K, a copy with every query head
      k_op = bld.fresh(bytes(mul(nf, nq), hdt), hdt, "k for bmm (broadcast)");
      qk.outputs.push_back(k_op);
    }
    qk.saves = {q_op, k_op};
    // dim[5]: which operand copies are outputs 1.. (bit 0: q's, bit 1: k's; exec10: bit 2, k's
    // is the broadcast copy, the last output)
    qk.dim = {dm.b, dm.a, dm.s, hd, 1,
              (q_op != q ? 1 : 0) | (k_op != kk ? 2 : 0) | (kv_bcast ? 4 : 0)};
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
      // the executor's qk kernel already scales: it runs this op as the identity (same bytes)
      sc.exec = Exec::kCopy;
      sc.inputs.push_back({scores, GradRule::kNew});
      // census12: Falcon's `/=` in place: the scores themselves
      int32_t scaled = m.eager_inplace ? bld.view(scores, bld.tensor(scores).bytes,
                                                  bld.tensor(scores).dtype)
                                       : o.fresh_like(scores, "scaled scores");
      sc.outputs.push_back(scaled);
      if (m.scale_by_tensor) {
        // exec10: GPT-2's 0-dim divisor tensor, made here and saved by DivBackward0 (the
        // executor leaves it as allocated: nothing reads it)
        const DType sdt = bld.tensor(scores).dtype;
        const int32_t divisor = bld.fresh(bytes(1, sdt), sdt, "attention scale divisor");
        sc.outputs.push_back(divisor);
        sc.saves.push_back(divisor);
      }
      bld.add_op(std::move(sc));
      scores = scaled;
    }
    // famdec: Gemma 2's attention soft-capping (eager_attention_forward)
    if (m.attn_softcap > 0) scores = famdec_softcap(bld, dm, scores, "attention softcap");
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
      eq.exec = Exec::kEqZero;  // exec12
      eq.dim = {dm.s, pos};
      eq.inputs.push_back({buf, GradRule::kNone});
      int32_t keep = bld.fresh(bytes(mul(dm.s, dm.s), DType::kBool), DType::kBool, "mask == 0");
      eq.outputs.push_back(keep);
      bld.add_op(std::move(eq));
      OpDraft mf = o.draft(OpKind::kMask, "masked fill");
      mf.op.core_attention = true;
      mf.op.math16 = false;
      mf.exec = Exec::kMaskedFill;  // exec12
      mf.dim = {mul(mul(dm.b, dm.a), dm.s), dm.s};
      mf.inputs.push_back({scores, GradRule::kNew});
      mf.inputs.push_back({keep, GradRule::kNone});
      int32_t masked = o.fresh_like(scores, "masked scores");
      mf.outputs.push_back(masked);
      mf.saves = {keep};
      bld.add_op(std::move(mf));
      scores = masked;
    } else if (causal && !dm.paper && !megatron_sm && !hf_eager_additive(dm)) {
      // torch.where(causal_mask, scores, -inf): a new tensor; the mask is a persistent buffer
      // (hfimpl: GPT-2's own per-layer `bias`, else one shared [s, s] buffer)
      OpDraft mk = o.draft(OpKind::kMask, "causal mask");
      mk.op.core_attention = true;
      mk.exec = Exec::kMask;
      mk.dim = {mul(mul(dm.b, dm.a), dm.s), dm.s};
      mk.op.math16 = false;
      mk.inputs.push_back({scores, GradRule::kNew});
      mk.inputs.push_back(
          {layer_bias >= 0 ? layer_bias : bld.causal_mask(mul(dm.s, dm.s)), GradRule::kNone});
      int32_t masked = o.fresh_like(scores, "masked scores");
      mk.outputs.push_back(masked);
      bld.add_op(std::move(mk));
      scores = masked;
    }
    scores = hf_eager_mask_add(bld, dm, scores);  // hfimpl: HF's additive / padding mask
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
    // fam12: HF eager's softmax(dtype=torch.float32) on 16-bit scores without autocast makes and
    // saves fp32 probabilities; `.to(query.dtype)` makes the 16-bit copy dropout and av take
    const bool fp32_probs = !dm.amp && im && im->model_softmax && m.eager_softmax_fp32 &&
                            !dm.paper && !megatron_sm && p_dt != DType::kF32;
    if (fp32_probs) p_dt = DType::kF32;
    int32_t probs = bld.fresh(bytes(scores_numel, p_dt), p_dt, "softmax out");
    sm.outputs = {probs};
    sm.saves = {probs};
    bld.add_op(std::move(sm));
    if (fp32_probs) probs = o.cast(probs, hdt, "softmax to input dtype", "probs (16-bit copy)");
    int32_t dprobs = o.dropout(probs, dm.p_attn, "attention dropout");
    if (dprobs != probs) bld.mark_core_attention_last();
    int32_t pv_in = o.to_half(dprobs, "probs cast", "probs cast");
    if (pv_in != dprobs) bld.mark_core_attention_last();
    OpDraft av = o.draft(OpKind::kBmm, "av");
    av.op.core_attention = true;
    av.exec = Exec::kAv;
    av.inputs = {{pv_in, GradRule::kNew}, {vv, GradRule::kNew}};
    int32_t out = bld.fresh(bytes(mul(nf, nv), hdt), hdt, "attention out");  // feat3: nv
    av.outputs = {out};
    av.saves = {pv_in, operand(av, vv, dm.g != dm.a, "v for bmm")};
    if (kv_bcast) {  // census12: the broadcast V, a copy with every query head
      av.saves[1] = bld.fresh(bytes(mul(nf, nq), hdt), hdt, "v for bmm (broadcast)");
      av.outputs.push_back(av.saves[1]);
    }
    // dim[5] bit 1: v's copy; exec10: bit 2, the broadcast copy (the last output)
    // exec11: dim[3] is v's head dim (MLA's v_head_dim; the qk head dim elsewhere)
    av.dim = {dm.b, dm.a, dm.s, nv / dm.a, 1, (av.saves[1] != vv ? 2 : 0) | (kv_bcast ? 4 : 0)};
    av.op.fwd.flops = fl_av;
    av.op.bwd.flops = mul(2, fl_av);
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

  return ctx;
}

int32_t build_mlp(Builder& bld, const Dims& dm, int32_t mlp_in) {
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  using Tp = Ops::Tp;
  const int64_t h = dm.h, nf = dm.n_full();
  if (famdec_mlp_variant(m)) return famdec_mlp(bld, dm, mlp_in);  // famdec: GeGLU, Phi-3
  int32_t mlp_out = -1;
  if (m.mlp == MlpKind::kGelu) {
    int32_t u = o.linear(mlp_in, h, dm.f, m.linear_bias, Tp::kColumn, "fc1", "fc1 out", -1,
                         LinearSite::kFc1);
    int32_t gu = o.gelu(u);
    mlp_out = o.linear(gu, dm.f, h, m.linear_bias, Tp::kRow, "fc2", "fc2 out", -1,
                       LinearSite::kFc2);
  } else if (dm.impl && dm.impl->fused_swiglu && !m.gated_gelu) {
    // feat14 (issue 13): Megatron's one fc1 of 2f and SwiGLUFunction (blocks_feat14.cpp)
    mlp_out = megatron_fused_swiglu_mlp(bld, dm, mlp_in);
  } else {
    // HF LlamaMLP: down(silu(gate(x)) * up(x))
    int32_t gate = o.linear(mlp_in, h, dm.f, m.linear_bias, Tp::kColumn, "gate proj", "gate out",
                            -1, LinearSite::kGate);
    int32_t up = o.linear(mlp_in, h, dm.f, m.linear_bias, Tp::kColumn, "up proj", "up out", -1,
                          LinearSite::kUp);
    int32_t act = o.unary_saving_input(OpKind::kSilu, gate, "silu", "silu out");
    const Tensor ta = bld.tensor(act);
    int32_t prod = o.mul_op(act, up, ta.bytes, ta.dtype, "swiglu mul", "swiglu out", true, true,
                            Exec::kMul, nf, dm.f);
    mlp_out = o.linear(prod, dm.f, h, m.linear_bias, Tp::kRow, "down proj", "down out",
                       -1, LinearSite::kDown);
  }
  return mlp_out;
}

int32_t build_block(Builder& bld, const Dims& dm, int32_t x, int32_t block) {
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  bld.current_block = block;
  if (famdec_block(m)) return build_block_famdec(bld, dm, x, block);  // famdec: NeoX ... OLMo 2
  using Tp = Ops::Tp;
  const int64_t h = dm.h, nq = dm.a * dm.d;

  // Attention input: pre-norm blocks normalize first; post-norm (BERT) blocks take x as is.
  int32_t attn_in = m.post_norm ? x : o.norm(x, "norm1");

  // moe: MLA (DeepSeek-V2) projects its own queries, keys and values; o_proj takes a x v_head_dim
  const int32_t ctx = is_mla(m) ? build_mla(bld, dm, attn_in) : build_attention(bld, dm, attn_in);
  const int64_t n_ctx = is_mla(m) ? dm.a * m.v_head_dim : nq;
  int32_t proj = o.linear(ctx, n_ctx, h, m.linear_bias, Tp::kRow, "proj", "proj out", -1,
                          LinearSite::kO);
  int32_t d1 = o.dropout(proj, dm.p_hidden, "proj dropout");
  int32_t x2 = o.add(x, d1, "residual 1");
  if (m.post_norm) x2 = o.norm(x2, "norm1");
  int32_t mlp_in = m.post_norm ? x2 : o.norm(x2, "norm2");

  // moe: routed experts from the model's dense_layers on (block is local to a pipeline stage)
  const int32_t mlp_out = moe_block(m, dm.layer0 + block) ? build_moe(bld, dm, mlp_in)
                                                          : build_mlp(bld, dm, mlp_in);
  int32_t d2 = o.dropout(mlp_out, dm.p_hidden, "mlp dropout");
  int32_t out = o.add(x2, d2, "residual 2");
  if (m.post_norm) out = o.norm(out, "norm2");
  return out;
}

void build_head(Builder& bld, const Dims& dm, int32_t x, int32_t word_table) {
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  // implhf: sequence and token classification heads (blocks_heads.cpp)
  if (classification_head(m)) return build_classification_head(bld, dm, x);
  bld.current_block = -1;
  using Tp = Ops::Tp;
  int32_t y = x;
  const bool mlm = m.head == Head::kMaskedLm;
  if (mlm) {
    // BERT's MLM head transform: dense h->h, GeLU, LayerNorm (replicated, not TP-split)
    y = o.linear(y, dm.h, dm.h, true, Tp::kNone, "head dense", "head dense out");
    y = o.unary_saving_input(OpKind::kGelu, y, "head gelu", "head gelu out");
    y = o.layer_norm(y, "head norm");
  } else if (!m.post_norm) {
    y = o.norm(y, "final norm");
  }
  // Output projection (vocab-parallel column linear), tied to the word embeddings or its own.
  int32_t logits = o.linear(y, dm.h, dm.v, mlm, Tp::kColumn, "lm head", "logits",
                            m.tied_embeddings ? word_table : -1, LinearSite::kLmHead);
  // famdec: Gemma 2's final logit soft-capping (Gemma2ForCausalLM.forward)
  if (m.final_softcap > 0) logits = famdec_softcap(bld, dm, logits, "final softcap");
  // nanoGPT's train.py keeps `logits` (its `logits, loss = model(X, Y)`) until the next
  // iteration's forward returns: through backward and the optimizer step.
  if (dm.impl && dm.impl->logits == LogitsLifetime::kStep) bld.hold_until_step_end(logits);
  int64_t n = dm.n_full();
  // hfimpl: HF's loss as the modeling file writes it (the forward returns the logits; GPT-2's
  // shifted .contiguous() copies, exec10): blocks_hfmask.cpp
  int32_t labels = bld.labels();
  if (!dm.vocab_parallel_ce) logits = hf_lm_loss_input(bld, dm, logits, &n, &labels);
  const int64_t lv = bytes(mul(n, dm.v), DType::kF32);
  int32_t loss = -1;
  if (dm.vocab_parallel_ce) {
    loss = bld.fresh(4, DType::kF32, "loss");
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
    // --- time5 (issue 11): the kernels of that code (cross_entropy.py @ d98e8a6), timed one by
    // one as time3 did the norm. Over the [n, v] logits, forward: `.float()` (16-bit logits: r 2,
    // w 4 B per element; a no-op on fp32 ones), `torch.max(dim=-1)` (r 4), `-= logits_max` (r 4,
    // w 4), `torch.exp(out=)` (r 4, w 4), `.sum(-1)` (r 4), `div_` (r 4, w 4): 38 B per element
    // (36 from fp32 logits) against the 6 (8) counted from the op's input and output: + 32 (+ 28).
    // Backward: `grad_input.mul_(grad_output)` (r 4, w 4) and, for 16-bit logits, the cast of the
    // gradient back (r 4, w 2): 14 B against the 6 counted from the saved softmax and the new
    // gradient: + 8 (fp32: the mul_ writes the saved softmax in place, + 0). Kernels, as written:
    // forward 20 (the six above less the no-op cast; on [n]: the two target-mask compares and
    // their `|`, `clone() - start`, the masked `= 0` (nonzero + index_put), arange, the gather
    // and its clone, `predicted_logits[target_mask] = 0.0` (nonzero + index_put), `log`, `-`);
    // backward 8 (`target_mask.float()`, `1.0 -`, arange, the indexed `-=` (gather, sub,
    // index_put), `mul_`, the cast), 7 from fp32 logits.
    {
      const bool half = bld.tensor(logits).dtype != DType::kF32;
      const int64_t nv = mul(n, dm.v);
      d.fwd_inner_bytes = mul(nv, half ? 32 : 28);
      d.bwd_inner_bytes = half ? mul(nv, 8) : 0;
      d.op.fwd.kernels = half ? 20 : 19;
      d.op.bwd.kernels = half ? 8 : 7;
    }
    // --- end time5 ---
    // --- te_norm (issue 10): --cross-entropy-loss-fusion on, Megatron's fused vocab-parallel
    // cross entropy (language_module.py compute_language_model_loss:173-198 @ d98e8a64ddf3, the
    // default cross_entropy_fusion_impl 'native': fusions/fused_cross_entropy.py). The same math
    // as above in four @jit_fuser functions, and jit_fuser is torch.compile on torch >= 2.2
    // (megatron/core/jit.py). Forward, as above: calculate_logits_max returns the fp32 copy
    // (a graph output), calculate_predicted_logits and calculate_cross_entropy_loss update that
    // graph input in place (`-=`, `exp(out=)`, `div_`), which the compiled inference graph
    // writes back into the input's own buffer; ctx.save_for_backward(exp_logits, target_mask,
    // masked_target_1d): the same storages. Backward: calculate_gradients runs
    // `grad_2d[arange_1d, masked_target_1d] -= softmax_update` on grad_2d, a view of the saved
    // softmax (a graph input), then `mul_` and `.to(torch.bfloat16)`. Functionalized, that
    // indexed update is an index_put on a view of a graph input, which Inductor's reinplace pass
    // does not turn back into index_put_: it clones the whole buffer, scatters into the clone
    // and copies it back (pytorch/pytorch#184542, reinplace.py can_inplace, fixed by #184543 in
    // May 2026; which PyTorch the measured container ran is not recorded). Modeled: that clone,
    // an fp32 [n, v/t] transient of the backward (4 B per logit), and its write and read. Not
    // read from generated code nor measured here (no torch.compile on the CPU harness's torch).
    if (dm.ce_loss_fusion) {
      d.op.name = "fused cross entropy";
      d.op.bwd_transient_bytes += lv;
      d.bwd_inner_bytes += mul(lv, 2);
    }
    // --- end te_norm ---
    bld.add_op(std::move(d));
  } else {
    // HF: logits.float(); F.cross_entropy = log_softmax (saves its output) + nll_loss (saves
    // the target); nll's backward allocates a zeroed gradient of the log-probabilities.
    // exec10: GPT2LMHeadModel's own CrossEntropyLoss (modeling_gpt2.py @ c44b2d9976e8) has no
    // .float(): without autocast (bf16-mixed) it runs in the logits' dtype; autocast's fp32 list
    // (cross_entropy_loss) casts under bf16-amp / fp16-amp as the others' .float() does.
    const bool upcast = !m.shift_logits_copy || dm.amp;
    int32_t l32 = upcast ? o.cast(logits, DType::kF32, "logits to fp32", "logits upcast") : logits;
    const DType ldt = bld.tensor(l32).dtype;
    OpDraft ls = o.draft(OpKind::kLogSoftmax, "log softmax");
    ls.op.math16 = false;
    ls.exec = Exec::kLogSoftmax;
    ls.dim = {n, dm.v};
    ls.inputs.push_back({l32, GradRule::kNew});
    int32_t logp = bld.fresh(bytes(mul(n, dm.v), ldt), ldt, "log-probabilities");
    ls.outputs = {logp};
    ls.saves = {logp};
    bld.add_op(std::move(ls));
    OpDraft nll = o.draft(OpKind::kNllLoss, "nll loss");
    nll.op.math16 = false;
    nll.exec = Exec::kNll;
    nll.dim = {n, dm.v};
    nll.inputs.push_back({logp, GradRule::kNew});
    nll.inputs.push_back({labels, GradRule::kNone});
    // nll_loss_forward returns (output, total_weight); NllLossBackward0 saves self, target and
    // total_weight (census: harness/census, "nll loss").
    loss = bld.fresh(bytes(1, ldt), ldt, "loss");  // exec10: in the log-probabilities' dtype
    int32_t total_weight = bld.fresh(bytes(1, ldt), ldt, "nll total weight");
    nll.outputs = {loss, total_weight};
    nll.saves = {logp, labels, total_weight};
    bld.add_op(std::move(nll));
  }
  // moe2: HF's load-balancing auxiliary loss over every MoE layer's router logits
  if (is_moe(m) && m.aux_loss && m.family != "deepseek_v2" && dm.impl &&
      dm.impl->moe == MoeDispatch::kHfLoop)
    loss = build_hf_aux_loss(bld, dm, loss);
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
    const LabelShape ls = label_shape(dm);  // implhf: the head's labels
    lab = bld.fresh(bytes(ls.numel, ls.dtype), ls.dtype, "labels");
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
