// hfimpl (issue 10): the masks of HF's modeling code (huggingface/transformers; files and commits
// per row in docs/memory-model.md, "Masks and padding under --impl hf"). Saved sets follow
// torch's derivatives.yaml: add saves nothing; where saves the condition (a bool buffer here);
// the memory-efficient SDPA kernel saves query, key, value, attn_bias, output and logsumexp.
// exec10: the masks, the eager mask add and GPT-2's shifted copies run in the CPU executor
// (Exec::kAdditiveMask, kMaskAdd, kShiftRows; the batch there has no padding: all-ones attention
// masks). exec12: the SDPA-with-mask ops (repeat, mask cast, the memory-efficient kernel) run
// too (Exec::kRepeatKv, kCast, kMemEfficient).
#include "blocks_hfmask.hpp"

#include "ops.hpp"

namespace sim::detail {
namespace {

bool masks_on(const Dims& dm) { return dm.impl && dm.impl->model_masks && !dm.paper; }

// exec10: `kind` and `copies` as Exec::kAdditiveMask reads them (1: causal with finfo.min, 2: an
// extended [b, 1, 1, s] mask).
int32_t mask_op(Builder& bld, const Dims& dm, int64_t numel, DType dt, int64_t transient,
                const char* name, int64_t copies, int64_t kind) {
  Ops o(bld, dm);
  OpDraft d = o.draft(OpKind::kMask, name);
  d.op.math16 = false;
  d.exec = Exec::kAdditiveMask;
  d.dim = {copies, dm.s, kind};
  d.op.fwd_transient_bytes = transient;
  const int32_t mask = bld.fresh(bytes(numel, dt), dt, name);
  d.outputs.push_back(mask);
  bld.add_op(std::move(d));
  bld.model_level(mask);
  return mask;
}

}  // namespace

void hf_model_masks(Builder& bld, const Dims& dm) {
  bld.hf_mask = -1;
  if (!masks_on(dm)) return;
  const ModelConfig& m = *dm.model;
  // The masks are made in the embeddings' dtype (the parameters': fp32 under the Trainer's
  // autocast, bf16 under bf16-mixed): Llama `inputs_embeds.dtype`, GPT-2 `self.dtype`.
  const DType dt = dm.param_dt;
  const int64_t bss = mul(dm.b, mul(dm.s, dm.s));
  if (dm.attention == AttentionKind::kFlash) {
    if (!dm.padding) return;
    // SDPA with a padding mask: LlamaModel._update_causal_mask (modeling_llama.py @ 5dd4a635;
    // _ignore_causal_mask_sdpa keeps it when attention_mask has a zero):
    // _prepare_4d_causal_attention_mask_with_cache_position builds full((s, s), min), triu,
    // expands to [b, 1, s, s], clones it ("copy to contiguous memory for in-place edit"), adds
    // the [b, 1, 1, s] padding mask (a new [b, 1, s, s]), compares it to 0 (bool [b, 1, s, s])
    // and masked_fills; on CUDA AttentionMaskConverter._unmask_unattended multiplies by
    // ~all(mask == min) (a new [b, 1, s, s]). GPT-2 (_prepare_4d_causal_attention_mask_for_sdpa,
    // modeling_gpt2.py @ c44b2d99) and BERT (_prepare_4d_attention_mask_for_sdpa) end with the
    // same [b, 1, s, s] mask. Made under the model's forward, held until it returns; the
    // transient is the clone and one bool [b, 1, s, s] beside the result.
    const int32_t mask = mask_op(bld, dm, bss, dt, bytes(bss, dt) + bytes(bss, DType::kBool),
                                 "4-D padding mask", dm.b, 1);
    if (bld.famdec_mask < 0) bld.famdec_mask = mask;  // famdec's sliding layers derive theirs
    bld.hf_mask = mask;
    return;
  }
  if (m.additive_causal_mask) {
    // Eager: _update_causal_mask always builds the 4-D mask (no SDPA shortcut): without a padding
    // mask the [s, s] triu expanded to [b, 1, s, s] (a view: one [s, s] storage), with one the
    // full [b, 1, s, s] clone as above.
    bld.hf_mask = dm.padding ? mask_op(bld, dm, bss, dt, bytes(bss, dt) + bytes(bss, DType::kBool),
                                       "4-D causal+padding mask", dm.b, 1)
                             : mask_op(bld, dm, mul(dm.s, dm.s), dt, 0, "4-D causal mask", 1, 1);
    return;
  }
  if (dm.padding || m.extended_mask_always) {
    // GPT2Model.forward (eager): attention_mask[:, None, None, :].to(self.dtype), then
    // (1.0 - mask) * finfo.min: [b, 1, 1, s]. BertModel.get_extended_attention_mask makes the
    // same [b, 1, 1, s] mask always (from ones when no mask is passed), and BertSelfAttention
    // adds it to every layer's scores.
    bld.hf_mask = mask_op(bld, dm, mul(dm.b, dm.s), dt, 0, "extended attention mask", dm.b, 2);
  }
}

int32_t hf_causal_buffer(Builder& bld, const Dims& dm) {
  const ModelConfig& m = *dm.model;
  if (!masks_on(dm) || !m.causal_buffer_per_layer) return -1;
  // GPT2Attention.__init__ (modeling_gpt2.py @ c44b2d99): register_buffer("bias",
  // tril(ones((P, P), dtype=bool)).view(1, 1, P, P), persistent=False), P = max_position_
  // embeddings, in every attention module (GPT2SdpaAttention inherits it): P^2 bytes per layer,
  // on the device with the weights. The eager `_attn` slices it for torch.where.
  const int64_t pos = m.max_positions > 0 ? m.max_positions : dm.s;
  return bld.buffer(mul(pos, pos), DType::kBool, "causal bias buffer (bool, per layer)");
}

int32_t hf_padding_sdpa_mask(Builder& bld, const Dims& dm) {
  return masks_on(dm) && dm.padding ? bld.hf_mask : -1;
}

int32_t hf_sdpa_mask_operand(Builder& bld, const Dims& dm, int32_t mask) {
  // autocast_mode.cpp: scaled_dot_product_attention is lower_precision_fp; cached_cast casts
  // every floating tensor argument, attn_mask included, and caches only leaves that require
  // grad. `.to()` of the expanded [b, 1, s, s] view allocates it whole (a non-dense input gets
  // contiguous strides): the per-layer bf16 copy is what SDPA saves as attn_bias.
  if (!dm.amp) return mask;
  Ops o(bld, dm);
  const int64_t bss = mul(dm.b, mul(dm.s, dm.s));
  OpDraft d = o.draft(OpKind::kCast, "mask cast");
  d.op.math16 = false;
  d.exec = Exec::kCast;  // exec12
  d.op.core_attention = true;
  d.inputs.push_back({mask, GradRule::kNone});
  const int32_t c = bld.fresh(bytes(bss, dm.half_dt), dm.half_dt, "mask cast");
  d.outputs.push_back(c);
  bld.add_op(std::move(d));
  return c;
}

int32_t hf_repeat_kv(Builder& bld, const Dims& dm, int32_t t, const char* name) {
  // integrations/sdpa_attention.py @ 00c238bd: use_gqa_in_sdpa is false when a mask is passed,
  // so repeat_kv runs: hidden[:, :, None].expand(b, g, a/g, s, d).reshape(b, a, s, d), a copy
  // in K's dtype (fp32 under autocast: the rotated K is promoted by the fp32 cos/sin); its
  // backward sums the gradient back to g heads.
  Ops o(bld, dm);
  const Tensor tt = bld.tensor(t);
  OpDraft d = o.draft(OpKind::kCopy, name);
  d.op.core_attention = true;
  d.op.math16 = false;
  // exec12: the executor's repeat ([tokens, g*d] -> [tokens, a*d], heads h from h / (a/g))
  d.exec = Exec::kRepeatKv;
  d.dim = {dm.n_full(), dm.g, numel_of(tt) / mul(dm.n_full(), dm.g), dm.a / dm.g};
  d.inputs.push_back({t, GradRule::kNew});
  const int64_t numel = mul(numel_of(tt), dm.a / dm.g);
  const int32_t y = bld.fresh(bytes(numel, tt.dtype), tt.dtype, "repeated kv");
  d.outputs.push_back(y);
  bld.add_op(std::move(d));
  return y;
}

bool hf_eager_additive(const Dims& dm) {
  return masks_on(dm) && dm.model->additive_causal_mask && dm.attention != AttentionKind::kFlash;
}

int32_t hf_eager_mask_add(Builder& bld, const Dims& dm, int32_t scores) {
  if (!masks_on(dm) || bld.hf_mask < 0 || dm.attention == AttentionKind::kFlash) return scores;
  // Llama eager_attention_forward `attn_weights + causal_mask`; GPT-2 `_attn`
  // `attn_weights + attention_mask`; BERT `attention_scores + attention_mask`: a new
  // [b, a, s, s] tensor promoted to the mask's dtype (16-bit scores + an fp32 mask under
  // autocast: fp32; the softmax then needs no cast). AddBackward0 saves nothing; it hands the
  // gradient on, cast back to the scores' dtype where they differ.
  Ops o(bld, dm);
  const Tensor ts = bld.tensor(scores);
  const DType dt = promote(ts.dtype, bld.tensor(bld.hf_mask).dtype);
  OpDraft d = o.draft(OpKind::kAdd, "attention mask add");
  d.op.math16 = false;
  d.op.core_attention = true;
  // exec10: the mask's layout as hf_model_masks made it ([s, s], [b, s, s] or [b, s])
  d.exec = Exec::kMaskAdd;
  d.dim = {dm.b, dm.a, dm.s,
           dm.model->additive_causal_mask ? (dm.padding ? 1 : 0) : 2};
  d.inputs.push_back({scores, dt == ts.dtype ? GradRule::kPass : GradRule::kNew, 0});
  d.inputs.push_back({bld.hf_mask, GradRule::kNone});
  const int32_t y = bld.fresh(bytes(numel_of(ts), dt), dt, "masked scores");
  d.outputs.push_back(y);
  bld.add_op(std::move(d));
  return y;
}

int32_t hf_lm_loss_input(Builder& bld, const Dims& dm, int32_t logits, int64_t* rows,
                         int32_t* labels) {
  if (!dm.impl || !dm.impl->model_losses || dm.paper) return logits;
  // LlamaForCausalLM.forward (modeling_llama.py @ 5dd4a635): `logits = self.lm_head(...)`, then
  // `self.loss_function(logits=logits, ...)` and the logits returned in CausalLMOutputWithPast;
  // ForCausalLMLoss (loss_utils.py @ d0fed636) rebinds `logits = logits.float()`, so the 16-bit
  // logits stay alive beside the fp32 copy and the log-probabilities until the forward returns
  // (the Trainer's compute_loss drops the outputs before backward). GPT2LMHeadModel and
  // BertForMaskedLM hold theirs the same way.
  bld.hold_until_forward_end(logits);
  if (!dm.model->shift_logits_copy || dm.s < 2) return logits;
  // exec10: GPT2LMHeadModel.forward (modeling_gpt2.py @ c44b2d9976e8, read at that commit):
  //   shift_logits = lm_logits[..., :-1, :].contiguous()
  //   shift_labels = labels[..., 1:].contiguous()
  //   loss = CrossEntropyLoss()(shift_logits.view(-1, v), shift_labels.view(-1))
  // The logits' copy is a new [b, s - 1, v] tensor in the logits' dtype, saving nothing; its
  // backward (CloneBackward0, SliceBackward0) makes a zeroed full [b, s, v] gradient of the
  // logits. The labels' copy is int64 [b, s - 1], which nll_loss saves as its target.
  Ops o(bld, dm);
  const Tensor t = bld.tensor(logits);
  const int64_t shifted = mul(dm.b, dm.s - 1);
  OpDraft d = o.draft(OpKind::kCopy, "shift logits copy");
  d.op.math16 = false;
  d.exec = Exec::kShiftRows;
  d.dim = {dm.b, dm.s, dm.v, 0};
  d.inputs.push_back({logits, GradRule::kNew});
  const int32_t y = bld.fresh(bytes(mul(shifted, dm.v), t.dtype), t.dtype, "shifted logits");
  d.outputs.push_back(y);
  bld.add_op(std::move(d));
  OpDraft l = o.draft(OpKind::kCopy, "shift labels copy");
  l.op.math16 = false;
  l.exec = Exec::kShiftRows;
  l.dim = {dm.b, dm.s, 1, 1};
  l.inputs.push_back({*labels, GradRule::kNone});
  const int32_t sl = bld.fresh(bytes(shifted, DType::kI64), DType::kI64, "shifted labels");
  l.outputs.push_back(sl);
  bld.add_op(std::move(l));
  *labels = sl;
  *rows = shifted;
  return y;
}

}  // namespace sim::detail
