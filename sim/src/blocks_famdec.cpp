// famdec (issue 12): the ops of GPT-NeoX, Falcon, Gemma 1/2/3, Phi-3 and OLMo 2 as HF's
// modeling code runs them (huggingface/transformers; files and commits per row in
// docs/memory-model.md, "Decoder families"). Saved sets follow torch's derivatives.yaml:
// mul.Tensor saves the other operand of each input that needs a gradient (a 0-dim constant or
// Python scalar: nothing of size), div by a scalar saves nothing, tanh saves its result, pow
// saves its input, rsqrt its result, cat nothing, add nothing. These ops have no executor kernel
// (Exec::kNone): the CPU executor refuses these families by op name.
#include "blocks_famdec.hpp"

#include "ops.hpp"

namespace sim::detail {
namespace {

using Residual = ModelConfig::Residual;
using SubNorms = ModelConfig::SubNorms;
using QkNorm = ModelConfig::QkNorm;

// A pointwise op of one input making a new tensor of `dt`: saves its output (tanh) or nothing
// (division or multiplication by a Python scalar, adding one).
int32_t pointwise(Builder& bld, const Dims& dm, int32_t x, OpKind kind, DType dt, bool save_out,
                  const char* name, const char* role) {
  Ops o(bld, dm);
  OpDraft d = o.draft(kind, name);
  d.op.math16 = false;
  d.inputs.push_back({x, GradRule::kNew});
  const int32_t y = bld.fresh(bytes(numel_of(bld.tensor(x)), dt), dt, role);
  d.outputs.push_back(y);
  if (save_out) d.saves.push_back(y);
  bld.add_op(std::move(d));
  return y;
}

// Whether the block being built attends within a window: Gemma 2's even layers
// (modeling_gemma2.py Gemma2DecoderLayer: is_sliding = not bool(layer_idx % 2)), Gemma 3's
// layers but every sliding_window_pattern-th ((layer_idx + 1) % pattern != 0), every layer when
// global_every is 0 (Phi-3, Mistral-style).
bool sliding_layer(const ModelConfig& m, int32_t block) {
  if (m.sliding_window <= 0 || block < 0) return false;
  if (m.global_every <= 0) return true;
  return (block + 1) % m.global_every != 0;
}

// Whether HF passes SDPA an additive 4-D mask (so SDPA runs its memory-efficient kernel, which
// saves the mask, not flash): Gemma 2/3 build one whatever the padding (Gemma2Model.
// _update_causal_mask returns a 4-D mask unless flash_attention_2), Phi-3 when the sequence
// reaches its window (AttentionMaskConverter._ignore_causal_mask_sdpa keeps the mask when
// key_value_length >= sliding_window).
bool sdpa_gets_mask(const ModelConfig& m, const Dims& dm) {
  if (!dm.impl || dm.paper || m.sliding_window <= 0) return false;
  if (m.global_every > 0) return true;  // Gemma 2/3
  return dm.s >= m.sliding_window;      // Phi-3
}

}  // namespace

bool famdec_block(const ModelConfig& m) {
  return m.residual != Residual::kSequential || m.sub_norms != SubNorms::kPre;
}

bool famdec_heterogeneous(const ModelConfig& m, const Dims& dm) {
  // Local and global layers differ in ops only where a sliding layer makes its own mask; fam12:
  // and in the rotary pair they save where there are two (Gemma 3)
  if (m.sliding_window > 0 && m.global_every > 0 && m.local_rope_tables &&
      m.positions == PosEmbedding::kRope)
    return true;
  return m.sliding_window > 0 && m.global_every > 0 && dm.attention == AttentionKind::kFlash &&
         sdpa_gets_mask(m, dm);
}

int64_t famdec_rotary_width(const Dims& dm) {
  const ModelConfig& m = *dm.model;
  return m.rotary_dim > 0 ? m.rotary_dim : dm.d;
}

int64_t famdec_rotary_tables(const ModelConfig& m) { return m.local_rope_tables ? 2 : 1; }

void famdec_model_tensors(Builder& bld, const Dims& dm) {
  const ModelConfig& m = *dm.model;
  bld.famdec_mask = -1;
  if (dm.attention != AttentionKind::kFlash || !sdpa_gets_mask(m, dm)) return;
  if (dm.padding) return;  // hfimpl: the padded [b, 1, s, s] mask instead (blocks_hfmask.cpp)
  // _prepare_4d_causal_attention_mask_with_cache_position: torch.full((s, s), min, dtype of the
  // embeddings), triu, then expand to [b, 1, s, s] (Gemma 2's 4-D mask; a view, one [s, s]
  // storage); Phi-3's (Mistral's) is made the same way with the window folded in. Made under
  // no_grad, held by the model's forward, saved by every SDPA call that takes it.
  Ops o(bld, dm);
  OpDraft d = o.draft(OpKind::kMask, "4-D causal mask");
  d.op.math16 = false;
  const DType dt = dm.param_dt;
  const int32_t mask = bld.fresh(bytes(mul(dm.s, dm.s), dt), dt, "4-D causal mask (additive)");
  d.outputs.push_back(mask);
  bld.add_op(std::move(d));
  bld.model_level(mask);
  bld.famdec_mask = mask;
}

int32_t famdec_sdpa_mask(Builder& bld, const Dims& dm) {
  const ModelConfig& m = *dm.model;
  if (bld.famdec_mask < 0) return -1;
  if (m.global_every <= 0 || !sliding_layer(m, bld.current_block)) return bld.famdec_mask;
  // Gemma2DecoderLayer.forward on a sliding layer (not flash_attention_2):
  //   sliding_window_mask = torch.tril(torch.ones_like(attention_mask, dtype=bool), -window)
  //   attention_mask = torch.where(sliding_window_mask, min_dtype, attention_mask)
  // ones_like of the expanded mask is a full [b, 1, s, s] bool tensor (freed after tril), and
  // the where result a new [b, 1, s, s] mask this layer's SDPA saves.
  Ops o(bld, dm);
  const Tensor tm = bld.tensor(bld.famdec_mask);
  const int64_t full = mul(dm.b, mul(dm.s, dm.s));
  OpDraft d = o.draft(OpKind::kMask, "sliding window mask");
  d.op.math16 = false;
  d.op.core_attention = true;
  d.inputs.push_back({bld.famdec_mask, GradRule::kNone});
  d.op.fwd_transient_bytes = mul(2, bytes(full, DType::kBool));  // ones_like, tril
  const int32_t local = bld.fresh(bytes(full, tm.dtype), tm.dtype, "sliding window mask");
  d.outputs.push_back(local);
  bld.add_op(std::move(d));
  return local;
}

int32_t famdec_rope_tables(Builder& bld, const Dims& dm) {
  // Gemma3DecoderLayer.forward: position_embeddings_local on sliding layers, _global otherwise
  // (two cos/sin pairs made once per forward by Gemma3TextModel; each layer saves its own)
  return bld.famdec_local_rope >= 0 && sliding_layer(*dm.model, bld.current_block)
             ? bld.famdec_local_rope
             : bld.rope_tables();
}

int32_t famdec_embed_scale(Builder& bld, const Dims& dm, int32_t x) {
  // GemmaModel.forward: normalizer = torch.tensor(hidden_size**0.5, dtype=hidden_states.dtype);
  // hidden_states = hidden_states * normalizer (a new tensor; MulBackward0 saves the 0-dim
  // normalizer only, the embedding output is freed).
  const Tensor t = bld.tensor(x);
  return pointwise(bld, dm, x, OpKind::kMul, t.dtype, false, "embedding * sqrt(h)",
                   "scaled embeddings");
}

int32_t famdec_rms_norm(Builder& bld, const Dims& dm, int32_t x, int64_t width, const char* name) {
  // Gemma2RMSNorm.forward (modeling_gemma2.py):
  //   output = self._norm(x.float())      # x * torch.rsqrt(x.pow(2).mean(-1, keepdim) + eps)
  //   output = output * (1.0 + self.weight.float())
  //   return output.type_as(x)
  // Olmo2RMSNorm the same with `self.weight * x` and `.to(input_dtype)`. pow saves the fp32
  // input, rsqrt its [n] result, the first mul both, the weight mul its fp32 operand and the
  // [width] weight term; the cast back to a 16-bit input dtype makes a new tensor.
  Ops o(bld, dm);
  const Tensor tx = bld.tensor(x);
  const int64_t n = numel_of(tx) / width;
  const int32_t w = bld.param(width, dm.param_dt, name);
  const int32_t x32 = o.cast(x, DType::kF32, "rmsnorm to fp32", "rmsnorm fp32 input");
  OpDraft d = o.draft(OpKind::kRmsNorm, name);  // pow(2).mean(-1): the norm's first saving op
  d.op.math16 = false;
  d.inputs.push_back({x32, GradRule::kNew});
  d.op.fwd_transient_bytes = bytes(mul(n, width), DType::kF32);
  d.op.bwd_transient_bytes = bytes(mul(n, width), DType::kF32);
  const int32_t var = bld.fresh(bytes(n, DType::kF32), DType::kF32, "rmsnorm variance");
  d.outputs.push_back(var);
  d.saves = {x32};
  bld.add_op(std::move(d));
  const int32_t rs = pointwise(bld, dm, var, OpKind::kRmsNorm, DType::kF32, true, "rmsnorm rsqrt",
                               "rmsnorm rstd");
  const int32_t hn = o.mul_op(x32, rs, bytes(mul(n, width), DType::kF32), DType::kF32,
                              "rmsnorm scale", "rmsnorm normalized", true, true, Exec::kNone, 0, 0);
  if (dm.model->norm_weight_plain) {
    // census12: Olmo2RMSNorm `(self.weight * hidden_states).to(input_dtype)`: the parameter
    // itself is the other operand (promoted to fp32 by the fp32 input); MulBackward0 saves the
    // weight (a parameter) and the fp32 normalized tensor; no weight term.
    OpDraft wd = o.draft(OpKind::kMul, "rmsnorm weight");
    wd.op.math16 = false;
    wd.exec = Exec::kNone;
    wd.inputs.push_back({hn, GradRule::kNew});
    wd.inputs.push_back({w, GradRule::kNew});
    const int32_t y = bld.fresh(bytes(mul(n, width), DType::kF32), DType::kF32, "rmsnorm weighted");
    wd.outputs.push_back(y);
    wd.saves.push_back(hn);
    bld.add_op(std::move(wd));
    return o.cast(y, tx.dtype, "rmsnorm to input dtype", "norm out");
  }
  // (1 + w.float()): a [width] fp32 tensor from the parameter (needs grad), Gemma
  const int32_t wf = pointwise(bld, dm, w, OpKind::kAdd, DType::kF32, false, "rmsnorm weight term",
                               "rmsnorm weight term");
  const int32_t y = o.mul_op(hn, wf, bytes(mul(n, width), DType::kF32), DType::kF32,
                             "rmsnorm weight", "rmsnorm weighted", true, true, Exec::kNone, 0, 0);
  return o.cast(y, tx.dtype, "rmsnorm to input dtype", "norm out");
}

bool famdec_mlp_variant(const ModelConfig& m) { return m.gated_gelu || m.fused_gate_up; }

int32_t famdec_mlp(Builder& bld, const Dims& dm, int32_t mlp_in) {
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  using Tp = Ops::Tp;
  const int64_t h = dm.h;
  if (m.fused_gate_up) {
    // Phi3MLP.forward (modeling_phi3.py): up_states = self.gate_up_proj(x);
    // gate, up_states = up_states.chunk(2, dim=-1); up_states = up_states * act(gate);
    // down_proj(up_states). chunk makes views: silu saves the gate view and the product saves the
    // up view, so the whole [n, 2f] projection output stays alive until backward.
    const int32_t gu = o.linear(mlp_in, h, mul(2, dm.f), m.linear_bias, Tp::kColumn, "gate_up proj",
                                "gate_up out", -1, LinearSite::kGateUp);
    const Tensor t = bld.tensor(gu);
    const int32_t gate = bld.view(gu, t.bytes / 2, t.dtype);
    const int32_t up = bld.view(gu, t.bytes / 2, t.dtype);
    OpDraft d = o.draft(OpKind::kSplit, "gate_up chunk");
    d.op.math16 = false;
    d.inputs.push_back({gu, GradRule::kNew});
    d.outputs = {gate, up};
    bld.add_op(std::move(d));
    const int32_t act = m.gated_gelu ? o.gelu(gate)
                                     : o.unary_saving_input(OpKind::kSilu, gate, "silu", "silu out");
    const Tensor ta = bld.tensor(act);
    const int32_t prod = o.mul_op(up, act, ta.bytes, ta.dtype, "gated mul", "gated out", true, true,
                                  Exec::kNone, 0, 0);
    return o.linear(prod, dm.f, h, m.linear_bias, Tp::kRow, "down proj", "down out", -1,
                    LinearSite::kDown);
  }
  // GemmaMLP.forward (modeling_gemma.py, Gemma2MLP, Gemma3MLP):
  //   down_proj(act_fn(gate_proj(x)) * up_proj(x)), act_fn = ACT2FN[hidden_activation]: F.gelu
  //   (tanh approximation for gelu_pytorch_tanh), one op saving its input.
  const int32_t gate = o.linear(mlp_in, h, dm.f, m.linear_bias, Tp::kColumn, "gate proj", "gate out",
                                  -1, LinearSite::kGate);
  const int32_t act = o.gelu(gate);
  const int32_t up = o.linear(mlp_in, h, dm.f, m.linear_bias, Tp::kColumn, "up proj", "up out", -1,
                                LinearSite::kUp);
  const Tensor ta = bld.tensor(act);
  const int32_t prod = o.mul_op(act, up, ta.bytes, ta.dtype, "geglu mul", "geglu out", true, true,
                                Exec::kNone, 0, 0);
  return o.linear(prod, dm.f, h, m.linear_bias, Tp::kRow, "down proj", "down out", -1,
                    LinearSite::kDown);
}

int32_t famdec_qk_norm(Builder& bld, const Dims& dm, int32_t t, int64_t heads, const char* name) {
  const ModelConfig& m = *dm.model;
  // Olmo2Attention.forward: q_norm(q_proj(x)) over the whole projection (RMSNorm(a*d));
  // Gemma3Attention.forward: q_norm(query_states.view(..., a, d)) over each head (RMSNorm(d)).
  const int64_t width = m.qk_norm == QkNorm::kFull ? mul(heads, dm.d) : dm.d;
  return famdec_rms_norm(bld, dm, t, width, name);
}

bool famdec_partial_rotary(const Dims& dm) {
  const ModelConfig& m = *dm.model;
  return m.rotary_dim > 0 && m.rotary_dim < dm.d;
}

int32_t famdec_rotary_slice(Builder& bld, const Dims& dm, int32_t t) {
  // GPTNeoXAttention: query_rot = query[..., : self.rotary_ndims] (a view; SliceBackward0
  // makes a zeroed gradient of the whole input and copies the slice's in)
  Ops o(bld, dm);
  const Tensor tt = bld.tensor(t);
  const int64_t rot = numel_of(tt) / dm.d * famdec_rotary_width(dm);
  const int32_t slice = bld.view(t, bytes(rot, tt.dtype), tt.dtype);
  OpDraft d = o.draft(OpKind::kSplit, "rotary slice");
  d.op.math16 = false;
  d.inputs.push_back({t, GradRule::kNew});
  d.outputs = {slice};
  bld.add_op(std::move(d));
  return slice;
}

int32_t famdec_rotary_cat(Builder& bld, const Dims& dm, int32_t rotated, int32_t t,
                          const char* name) {
  // query = torch.cat((query, query_pass), dim=-1): a new tensor of the whole width in the
  // promoted dtype (the rotated part is fp32 under autocast: fp32 cos and sin); CatBackward0
  // saves nothing, its gradients are slices of the output's.
  Ops o(bld, dm);
  const Tensor tt = bld.tensor(t);
  const DType dt = promote(tt.dtype, bld.tensor(rotated).dtype);
  OpDraft d = o.draft(OpKind::kCopy, name);
  d.op.math16 = false;
  d.inputs.push_back({rotated, GradRule::kPass, 0});
  d.inputs.push_back({t, GradRule::kPass, 0});
  const int32_t y = bld.fresh(bytes(numel_of(tt), dt), dt, "rotary cat");
  d.outputs.push_back(y);
  bld.add_op(std::move(d));
  return y;
}

int32_t famdec_softcap(Builder& bld, const Dims& dm, int32_t x, const char* name) {
  // eager_attention_forward (modeling_gemma2.py): attn_weights = attn_weights / softcap;
  // attn_weights = torch.tanh(attn_weights); attn_weights = attn_weights * softcap; the same on
  // the logits in Gemma2ForCausalLM.forward. Division and multiplication by a Python float save
  // nothing; tanh saves its output (TanhBackward0: result).
  (void)name;
  const DType dt = bld.tensor(x).dtype;
  const int32_t a = pointwise(bld, dm, x, OpKind::kMul, dt, false, "softcap / cap", "softcap in");
  const int32_t t = pointwise(bld, dm, a, OpKind::kGelu, dt, true, "softcap tanh", "softcap tanh");
  return pointwise(bld, dm, t, OpKind::kMul, dt, false, "softcap * cap", "softcapped");
}

int32_t build_block_famdec(Builder& bld, const Dims& dm, int32_t x, int32_t block) {
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  bld.current_block = block;
  using Tp = Ops::Tp;
  const int64_t h = dm.h, nq = dm.a * dm.d;

  if (m.sub_norms == SubNorms::kPrePost || m.sub_norms == SubNorms::kPost) {
    // Gemma2DecoderLayer.forward (modeling_gemma2.py), Gemma3DecoderLayer:
    //   x = x + post_attention_layernorm(self_attn(input_layernorm(x)))
    //   x = x + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(x)))
    // Olmo2DecoderLayer.forward (modeling_olmo2.py): the same without the pre-norms.
    const bool pre = m.sub_norms == SubNorms::kPrePost;
    const int32_t attn_in = pre ? o.norm(x, "input norm") : x;
    const int32_t ctx = build_attention(bld, dm, attn_in);
    const int32_t proj = o.linear(ctx, nq, h, m.linear_bias, Tp::kRow, "proj", "proj out", -1,
                                  LinearSite::kO);
    const int32_t pn = o.norm(proj, "post-attention norm");
    const int32_t x2 = o.add(x, o.dropout(pn, dm.p_hidden, "proj dropout"), "residual 1");
    const int32_t mlp_in = pre ? o.norm(x2, "pre-feedforward norm") : x2;
    const int32_t mlp_out = build_mlp(bld, dm, mlp_in);
    const int32_t fn = o.norm(mlp_out, "post-feedforward norm");
    return o.add(x2, o.dropout(fn, dm.p_hidden, "mlp dropout"), "residual 2");
  }
  // Parallel residual. GPTNeoXLayer.forward (use_parallel_residual):
  //   attn = post_attention_dropout(attention(input_layernorm(x)))
  //   mlp = post_mlp_dropout(mlp(post_attention_layernorm(x)))
  //   x = mlp + attn + x
  // FalconDecoderLayer.forward (parallel_attn, or new_decoder_architecture): one
  // input_layernorm feeding both (or ln_attn and ln_mlp); mlp_output += attention_output (in
  // place: modeled as an add); output = dropout_add(mlp_output, residual, hidden_dropout).
  const int32_t ln1 = o.norm(x, "norm1");
  const int32_t ctx = build_attention(bld, dm, ln1);
  const int32_t proj = o.linear(ctx, nq, h, m.linear_bias, Tp::kRow, "proj", "proj out", -1,
                                  LinearSite::kO);
  const int32_t d1 = o.dropout(proj, m.family == "falcon" ? 0.0 : dm.p_hidden, "proj dropout");
  const int32_t ln2 = m.residual == Residual::kParallelOneNorm ? ln1 : o.norm(x, "norm2");
  const int32_t mlp_out = build_mlp(bld, dm, ln2);
  if (m.family == "falcon") {
    int32_t sum = -1;
    if (m.eager_inplace) {
      // census12: `mlp_output += attention_output` in place (AddBackward0 saves nothing)
      OpDraft d = o.draft(OpKind::kAdd, "attention + mlp");
      d.op.math16 = false;
      d.exec = Exec::kAdd;  // exec10: into the mlp output's own storage
      d.inputs.push_back({mlp_out, GradRule::kPass, 0});
      d.inputs.push_back({d1, GradRule::kPass, 0});
      const Tensor t = bld.tensor(mlp_out);
      sum = bld.view(mlp_out, t.bytes, t.dtype);
      d.outputs.push_back(sum);
      bld.add_op(std::move(d));
    } else {
      sum = o.add(mlp_out, d1, "attention + mlp");
    }
    return o.add(x, o.dropout(sum, dm.p_hidden, "dropout_add"), "residual");
  }
  const int32_t d2 = o.dropout(mlp_out, dm.p_hidden, "mlp dropout");
  return o.add(o.add(d2, d1, "mlp + attention"), x, "residual");
}

}  // namespace sim::detail
