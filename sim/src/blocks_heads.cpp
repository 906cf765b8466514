// implhf: the classification heads of HF's modeling code (ModelConfig::head; the loader reads
// them from `architectures`, sim_io hf_heads.cpp). What each op saves is in docs/memory-model.md,
// "Heads"; the upstream files:
//   modeling_bert.py @ 8ec58104 (BertPooler, BertForSequenceClassification,
//   BertForTokenClassification), modeling_gpt2.py @ c44b2d99 (GPT2ForSequenceClassification,
//   GPT2ForTokenClassification), modeling_llama.py @ 5dd4a635 (LlamaFor*Classification).
#include "ops.hpp"

namespace sim::detail {

LabelShape label_shape(const Dims& dm) {
  const ModelConfig& m = *dm.model;
  if (m.head != Head::kSequenceClassification) return {dm.n_full(), DType::kI64};
  // BertForSequenceClassification.forward's labels: [b] class ids for CrossEntropyLoss; float
  // targets for MSELoss ([b] for one label, else [b, num_labels]) and BCEWithLogitsLoss
  // ([b, num_labels]).
  if (m.class_loss == ClassLoss::kCrossEntropy) return {dm.b, DType::kI64};
  return {mul(dm.b, m.num_labels), DType::kF32};
}

namespace {

// The classification loss over `rows` rows of `classes` logits (torch.nn.CrossEntropyLoss,
// MSELoss or BCEWithLogitsLoss, mean reduction). CrossEntropyLoss is log_softmax + nll_loss;
// on CUDA autocast both run in fp32 (autocast_mode.cpp: log_softmax fp32_set_opt_dtype, nll_loss
// fp32), so 16-bit logits are cast first; mse_loss and binary_cross_entropy_with_logits are on
// the fp32 list too. Returns the loss.
int32_t class_loss(Builder& bld, const Dims& dm, int32_t logits, int64_t rows, int64_t classes) {
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  int32_t l32 = o.cast(logits, DType::kF32, "classifier logits to fp32", "logits upcast");
  int32_t loss = bld.fresh(4, DType::kF32, "loss");
  if (m.class_loss == ClassLoss::kCrossEntropy) {
    OpDraft ls = o.draft(OpKind::kLogSoftmax, "log softmax");
    ls.op.math16 = false;
    ls.exec = Exec::kLogSoftmax;
    ls.dim = {rows, classes};
    ls.inputs.push_back({l32, GradRule::kNew});
    int32_t logp = bld.fresh(bytes(mul(rows, classes), DType::kF32), DType::kF32, "log-probabilities");
    ls.outputs = {logp};
    ls.saves = {logp};
    bld.add_op(std::move(ls));
    OpDraft nll = o.draft(OpKind::kNllLoss, "nll loss");
    nll.op.math16 = false;
    nll.exec = Exec::kNll;
    nll.dim = {rows, classes};
    nll.inputs.push_back({logp, GradRule::kNew});
    nll.inputs.push_back({bld.labels(), GradRule::kNone});
    int32_t total_weight = bld.fresh(4, DType::kF32, "nll total weight");
    nll.outputs = {loss, total_weight};
    nll.saves = {logp, bld.labels(), total_weight};
    bld.add_op(std::move(nll));
  } else {
    // mse_loss (MseLossBackward0) and binary_cross_entropy_with_logits (its backward) save the
    // input and the target (derivatives.yaml); no kernel in the CPU executor.
    OpDraft d = o.draft(OpKind::kNllLoss, m.class_loss == ClassLoss::kMse ? "mse loss" : "bce loss");
    d.op.math16 = false;
    d.inputs.push_back({l32, GradRule::kNew});
    d.inputs.push_back({bld.labels(), GradRule::kNone});
    d.outputs = {loss};
    d.saves = {l32, bld.labels()};
    bld.add_op(std::move(d));
  }
  return loss;
}

}  // namespace

void build_classification_head(Builder& bld, const Dims& dm, int32_t x) {
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  using Tp = Ops::Tp;
  bld.current_block = -1;
  const int64_t h = dm.h, nl = m.num_labels, n = dm.n_full();
  // Pre-norm decoders end with the final norm (GPT2Model ln_f, LlamaModel norm); BERT's last
  // block ends with its LayerNorm.
  int32_t y = m.post_norm ? x : o.norm(x, "final norm");
  int32_t logits = -1;
  int64_t rows = n;
  if (m.head == Head::kSequenceClassification && m.seq_pool == SeqPool::kFirstTokenPooler) {
    // BertPooler: first_token_tensor = hidden_states[:, 0] is a strided view [b, h] (no copy);
    // the dense layer's addmm saves it (in fp32 the view keeps the last hidden state's storage),
    // or, under autocast, the 16-bit cast of those b rows.
    const Tensor ty = bld.tensor(y);
    OpDraft sel = o.draft(OpKind::kSplit, "first token");
    sel.op.math16 = false;
    // SelectBackward0 (select_backward) makes a zero gradient of the whole input and copies the
    // b rows in: the input's gradient is new, of its full size.
    sel.inputs.push_back({y, GradRule::kNew});
    int32_t first = bld.view(y, bytes(mul(dm.b, h), ty.dtype), ty.dtype);
    sel.outputs = {first};
    bld.add_op(std::move(sel));
    int32_t pd = o.linear(first, h, h, true, Tp::kNone, "pooler dense", "pooler dense out");
    // nn.Tanh: TanhBackward0 saves its result (derivatives.yaml tanh: result)
    OpDraft th = o.draft(OpKind::kGelu, "pooler tanh");
    th.inputs.push_back({pd, GradRule::kNew});
    int32_t pooled = o.fresh_like(pd, "pooled output");
    th.outputs = {pooled};
    th.saves = {pooled};
    bld.add_op(std::move(th));
    int32_t dp = o.dropout(pooled, dm.p_classifier, "classifier dropout");
    logits = o.linear(dp, h, nl, m.classifier_bias, Tp::kNone, "classifier", "logits");
    rows = dm.b;
  } else if (m.head == Head::kSequenceClassification) {
    // GPT2/LlamaForSequenceClassification: score on every token ([b, s, num_labels], no bias),
    // then pooled_logits = logits[arange(b), sequence_lengths]. The index, transient:
    // GPT-2 (c44b2d99) `torch.eq(input_ids, pad_token_id).int().argmax(-1) - 1`, a bool and an
    // int32 [b, s] (5 bytes per token); Llama (5dd4a635) `(input_ids != pad).to(int32)`,
    // `arange(s)` (int64) and their int64 product (12 bytes per token + 8s). IndexBackward0
    // saves the two int64 [b] index tensors and scatters the gradient into zeros
    // [b, s, num_labels].
    int32_t all = o.linear(y, h, nl, m.classifier_bias, Tp::kNone, "score", "score out");
    OpDraft d = o.draft(OpKind::kCopy, "last-token logits");
    d.op.math16 = false;
    d.inputs.push_back({all, GradRule::kNew});
    const Tensor ta = bld.tensor(all);
    logits = bld.fresh(bytes(mul(dm.b, nl), ta.dtype), ta.dtype, "pooled logits");
    int32_t idx = bld.fresh(bytes(mul(2, dm.b), DType::kI64), DType::kI64, "pooling indices");
    d.outputs = {logits, idx};
    d.saves = {idx};
    d.op.fwd_transient_bytes = m.seq_pool == SeqPool::kLastToken
                                   ? mul(n, 1 + 4)
                                   : mul(n, 4 + 8) + mul(dm.s, 8);
    bld.add_op(std::move(d));
    rows = dm.b;
  } else {
    // Bert/GPT2/LlamaForTokenClassification: dropout, classifier on every token.
    int32_t dp = o.dropout(y, dm.p_classifier, "classifier dropout");
    logits = o.linear(dp, h, nl, m.classifier_bias, Tp::kNone, "classifier", "logits");
  }
  bld.set_loss(class_loss(bld, dm, logits, rows, nl));
}

}  // namespace sim::detail
