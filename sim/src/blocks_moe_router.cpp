// etp (issue 13): Megatron's top-k router from its logits to the dense probs the dispatcher
// permutes, with the options DeepSeek's configs take: NVIDIA/Megatron-LM @ d98e8a64ddf3
// megatron/core/transformer/moe/router.py (TopKRouter.routing) and moe_utils.py
// (topk_routing_with_score_function, group_limited_topk), moe_router_fusion off (its default).
// Which option a model takes (docs/memory-model.md "Megatron's router options"):
//   - the HF top-k weights renormalized (norm_topk: Mixtral): Megatron's default, top-k of the
//     logits then a softmax of the k scores (the same weights);
//   - not renormalized (Qwen2-MoE, DeepSeek-V2 with norm_topk_prob false): softmax over every
//     expert before the top-k, --moe-router-pre-softmax;
//   - DeepSeek's topk_method "group_limited_greedy": --moe-router-num-groups n_group,
//     --moe-router-group-topk topk_group;
//   - routed_scaling_factor != 1: --moe-router-topk-scaling-factor.
// What each saves for backward (torch autograd, derivatives.yaml): softmax its fp32 output,
// topk its int64 indices, masked_fill its bool mask, scatter its index; a product with a Python
// scalar and a dtype cast save nothing.
#include "blocks_moe.hpp"

namespace sim::detail {
namespace {

// An op of one differentiable input, fresh outputs as given, saving `saves`.
int32_t unary(Builder& bld, Ops& o, OpKind kind, const char* name, int32_t in, int64_t numel,
              DType dt, bool save_out) {
  OpDraft d = o.draft(kind, name);
  d.op.math16 = false;
  d.inputs.push_back({in, GradRule::kNew});
  const int32_t y = bld.fresh(bytes(numel, dt), dt, name);
  d.outputs.push_back(y);
  if (save_out) d.saves.push_back(y);
  bld.add_op(std::move(d));
  return y;
}

// torch.topk along the last dim: values (the input's dtype) and int64 indices [n, k];
// TopkBackward0 saves the indices.
int32_t topk(Builder& bld, Ops& o, int32_t in, int64_t n, int64_t k, const char* name,
             int32_t* idx) {
  OpDraft t = o.draft(OpKind::kCopy, name);
  t.op.math16 = false;
  t.inputs.push_back({in, GradRule::kNew});
  const DType dt = bld.tensor(in).dtype;
  const int32_t v = bld.fresh(bytes(mul(n, k), dt), dt, "top-k scores");
  *idx = bld.fresh(bytes(mul(n, k), DType::kI64), DType::kI64, "top-k indices");
  t.outputs = {v, *idx};
  t.saves = {*idx};
  bld.add_op(std::move(t));
  return v;
}

}  // namespace

int32_t megatron_router(Builder& bld, const Dims& dm, int32_t logits, int64_t n, int32_t* sel) {
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  const int64_t e = m.experts, k = m.experts_per_token;
  const DType dt = bld.tensor(logits).dtype;
  int32_t idx = -1, probs = -1;
  if (m.norm_topk) {
    // `scores, top_indices = topk(logits, k)`, `probs = softmax(scores, dtype=float32)`
    const int32_t sc = topk(bld, o, logits, n, k, "router topk", &idx);
    probs = unary(bld, o, OpKind::kSoftmax, "router softmax", sc, mul(n, k), DType::kF32, true);
  } else {
    // use_pre_softmax: `scores = softmax(logits, dim=-1, dtype=float32)` (a 16-bit CUDA input
    // goes to _softmax(half_to_float=True): no copy), saving its fp32 [N, E] output
    int32_t scores =
        unary(bld, o, OpKind::kSoftmax, "router pre-softmax", logits, mul(n, e), DType::kF32, true);
    if (m.router_groups > 0) {
      // group_limited_topk: group scores (the top k / group_topk of each group, summed), their
      // top group_topk (indices only: the values' graph dies), a [N, G] mask scattered, expanded
      // and reshaped to [N, E] (a copy), then `scores.masked_fill(~score_mask.bool(), -inf)`:
      // MaskedFillBackward0 saves the bool mask [N, E]
      const int64_t g = m.router_groups, per = k / m.router_group_topk;
      // group top-k values fp32 and indices int64 [N, G, per], their sum [N, G], the groups'
      // top-k [N, group_topk] values and indices, group_mask fp32 [N, G], score_mask fp32
      // [N, E], its .bool() [N, E]
      scores = group_masked_scores(
          bld, o, scores, n, e,
          mul(n, mul(g, mul(per, 12)) + 4 * g + 12 * m.router_group_topk + 4 * g + 4 * e + e), 0);
    }
    probs = topk(bld, o, scores, n, k, "router topk", &idx);
  }
  // `if scaling_factor: probs = probs * scaling_factor` (MulBackward0 with a Python scalar saves
  // nothing): a new fp32 [N, k]
  if (m.routed_scaling != 1.0)
    probs = unary(bld, o, OpKind::kMul, "router topk scaling", probs, mul(n, k), DType::kF32, false);
  // `probs.type_as(logits)`, then `zeros_like(logits).scatter(1, top_indices, probs)`
  // (ScatterBackward0 saves the index); the routing map is a bool [N, E] without gradient
  probs = o.cast(probs, dt, "router probs cast", "router probs");
  OpDraft sc = o.draft(OpKind::kCopy, "router probs scatter");
  sc.op.math16 = false;
  sc.inputs.push_back({probs, GradRule::kNew});
  sc.inputs.push_back({idx, GradRule::kNone});
  probs = bld.fresh(bytes(mul(n, e), dt), dt, "router probs scatter");
  sc.outputs.push_back(probs);
  sc.saves = {idx};
  bld.add_op(std::move(sc));
  *sel = idx;
  return probs;
}

}  // namespace sim::detail
