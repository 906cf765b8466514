// moe (issue 13): the MoE layer's op lists, one per token dispatch (sim/impl.hpp MoeDispatch),
// and the routed-token counts under --ep, --moe-imbalance and --moe-capacity. The rows, with the
// upstream files they were read from, are in docs/memory-model.md "Mixture of experts"; the
// per-layer bytes of a Mixtral-shaped layer are derived by hand there and asserted to the byte in
// tests/test_moe.cpp.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "blocks_moe.hpp"

namespace sim::detail {
namespace {

using Tp = Ops::Tp;

// Tokens each local expert of the simulated rank receives, dropless: the hottest expert F x the
// mean, the other E - 1 sharing the rest evenly (integer split, the first ones one more). The
// rank holding the hottest expert is simulated; with ep ranks, mean = ep k N / E.
std::vector<int64_t> expert_tokens(const Dims& dm, int64_t tokens) {
  const ModelConfig& m = *dm.model;
  const int64_t e = m.experts, local = m.experts / dm.ep;
  const int64_t total = mul(mul(tokens, m.experts_per_token), dm.ep);  // routed over all ranks
  const int64_t hot = std::llround(dm.moe_imbalance * static_cast<double>(total) /
                                   static_cast<double>(e));
  std::vector<int64_t> n(static_cast<size_t>(local), 0);
  n[0] = std::min(hot, total);
  const int64_t rest = total - n[0];
  for (int64_t i = 1; i < local; ++i)
    n[static_cast<size_t>(i)] = rest / (e - 1) + (i - 1 < rest % (e - 1) ? 1 : 0);
  return n;
}

// A new tensor of `numel` elements made by an op that records no gradient (indices, masks).
// exec12: `exec` and `dim` are the CPU executor's kernel and sizes (Exec::kNone: none)
int32_t no_grad_op(Builder& bld, Ops& o, int32_t input, int64_t numel, DType dt, const char* name,
                   Exec exec = Exec::kNone, std::array<int64_t, 6> dim = {}) {
  OpDraft d = o.draft(OpKind::kCopy, name);
  d.op.math16 = false;
  d.exec = exec;
  d.dim = dim;
  if (input >= 0) d.inputs.push_back({input, GradRule::kNone});
  int32_t y = bld.fresh(bytes(numel, dt), dt, name);
  d.outputs.push_back(y);
  bld.add_op(std::move(d));
  return y;
}

// An op with inputs (gradient rule each), one fresh output and the saves given.
int32_t op(Builder& bld, Ops& o, OpKind kind, const char* name,
           std::initializer_list<InputUse> inputs, int64_t out_numel, DType dt,
           std::initializer_list<int32_t> saves, bool save_out = false, Exec exec = Exec::kNone,
           std::array<int64_t, 6> dim = {}) {
  OpDraft d = o.draft(kind, name);
  d.op.math16 = false;
  d.exec = exec;  // exec12
  d.dim = dim;
  for (const InputUse& u : inputs) d.inputs.push_back(u);
  int32_t y = bld.fresh(bytes(out_numel, dt), dt, name);
  d.outputs.push_back(y);
  for (int32_t s : saves) d.saves.push_back(s);
  if (save_out) d.saves.push_back(y);
  bld.add_op(std::move(d));
  return y;
}

// One SwiGLU MLP as HF writes it (w2(act(w1(x)) * w3(x))): each linear saves its (autocast)
// input and weight, silu its input, the product both operands. Marks its weights as an expert's.
// lora6 (issue 13): the weights are marked where param() makes them (Builder::expert_params), not
// through `bld.params.back()`, which under LoRA holds no frozen weight (the crash polish found);
// an expert's PEFT adapters are marked with it (per-expert adapters: sharded as the expert is).
// Sites: Mixtral's w1, w3, w2 and Qwen2-MoE's experts' and every shared expert's gate_proj,
// up_proj, down_proj are nn.Linear modules (modeling_mixtral.py @ 00d4b3d2142c
// MixtralBlockSparseTop2MLP; PEFT wraps each expert's own: one adapter per expert); DeepSeek-V2's
// routed experts are slices of 3D nn.Parameters (DeepseekV2Experts @ 0233e509531a), no nn.Linear
// PEFT's target_modules or all-linear reaches: no site, frozen without adapters.
int32_t hf_swiglu(Builder& bld, const Dims& dm, int32_t x, int64_t f, bool expert) {
  Ops o(bld, dm);
  const int64_t h = dm.h;
  const bool no_modules = expert && dm.model->family == "deepseek_v2";
  auto lin = [&](int32_t in, int64_t i, int64_t out, const char* name, const char* role,
                 LinearSite site) {
    const bool was = bld.expert_params;
    bld.expert_params = expert;
    int32_t y = o.linear(in, i, out, false, Tp::kNone, name, role, -1,
                         no_modules ? LinearSite::kNone : site);
    bld.expert_params = was;
    return y;
  };
  int32_t g = -1, u = -1;
  if (expert && dm.model->family == "deepseek_v2") {
    // DeepseekV2Experts (modeling_deepseek_v2.py @ 0233e509): one F.linear with the expert's
    // slice of the 3D gate_up_proj, then .chunk(2): one input cast, gate and up are views
    int32_t gu = lin(x, h, 2 * f, "expert gate_up", "expert gate_up out", LinearSite::kNone);
    const int64_t half = bld.tensor(gu).bytes / 2;
    // exec14 (issue 10): split_views' two views with their geometry for the executor (each row
    // of [n_e, 2f]: gate columns 0..f, up f..2f; Exec::kSplit), the same bytes
    OpDraft d = o.draft(OpKind::kSplit, "expert gate_up chunk");
    d.op.math16 = false;
    d.exec = Exec::kSplit;
    d.inputs.push_back({gu, GradRule::kNew});
    const DType gdt = bld.tensor(gu).dtype;
    const int32_t fc = static_cast<int32_t>(f);
    g = bld.view(gu, half, gdt, 0, fc, 2 * fc);
    u = bld.view(gu, half, gdt, fc, fc, 2 * fc);
    d.outputs = {g, u};
    bld.add_op(std::move(d));
  } else {
    // moe2: Python evaluates `act_fn(w1(x)) * w3(x)` left to right: w1, silu, w3 (census)
    g = lin(x, h, f, expert ? "expert w1" : "shared gate proj", "expert w1 out", LinearSite::kGate);
  }
  int32_t a = o.unary_saving_input(OpKind::kSilu, g, "expert silu", "expert silu out");
  if (u < 0)
    u = lin(x, h, f, expert ? "expert w3" : "shared up proj", "expert w3 out", LinearSite::kUp);
  const Tensor ta = bld.tensor(a);
  int32_t p = o.mul_op(a, u, ta.bytes, ta.dtype, "expert swiglu mul", "expert swiglu out", true,
                       true, Exec::kMul, 0, 0);  // exec12
  return lin(p, f, h, expert ? "expert w2" : "shared down proj", "expert w2 out",
             LinearSite::kDown);
}

// feat13 (issue 13): DeepseekV2Moe.route_tokens_to_experts with topk_method
// "group_limited_greedy" (transformers src/transformers/models/deepseek_v2/
// modeling_deepseek_v2.py @ 0233e509531a), between the fp32 softmax `scores` [N, E] and the top-k,
// for N tokens, E experts, G = n_group groups, T = topk_group:
//   group_scores = scores.view(N, G, -1).max(dim=-1).values  fp32 [N, G], int64 indices [N, G]
//   group_idx = torch.topk(group_scores, k=T, sorted=False)[1]  int64 [N, T] (its fp32 values
//                                                                 die with the statement)
//   group_mask = torch.zeros_like(group_scores); group_mask.scatter_(1, group_idx, 1)  fp32 [N, G]
//   score_mask = group_mask.unsqueeze(-1).expand(N, G, E / G).reshape(N, -1)  fp32 [N, E], a copy
//   tmp_scores = scores.masked_fill(~score_mask.bool(), 0.0)  .bool() [N, E] (freed after ~),
//                                                              ~ bool [N, E], fp32 [N, E] out
// Saved for backward: masked_fill's bool mask (MaskedFillBackward0: `mask`), N E bytes. The max
// and the group top-k belong to a graph whose output (the group top-k's values) is dropped at
// once; their nodes, and the max's indices, die when group_scores does. Every local above lives
// until route_tokens_to_experts returns, after the top-k: the mask op holds all of them at its
// peak (the ~ made while .bool() is alive): 4NG + 8NG + 8NT + 4NG + 4NE + NE besides its NE
// output; masked_fill and the top-k then run with 16NG + 8NT + 4NE still alive (*temps).
// Returns tmp_scores.
int32_t hf_group_limited(Builder& bld, Ops& o, const Dims& dm, int32_t scores, int64_t n,
                         int64_t* temps) {
  const ModelConfig& m = *dm.model;
  const int64_t e = m.experts, g = m.router_groups, t = m.router_group_topk;
  *temps = mul(n, 16 * g + 8 * t + 4 * e);
  return group_masked_scores(bld, o, scores, n, e, *temps + mul(n, e), *temps);
}

// The router of HF's blocks: gate logits, softmax in fp32, top-k (and the renormalization).
// Returns the routing weights [N, k] in the hidden states' dtype; *sel the selected experts.
int32_t hf_router(Builder& bld, const Dims& dm, int32_t x, int64_t n, int32_t* sel) {
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  const int64_t e = m.experts, k = m.experts_per_token;
  int32_t logits = -1;
  const bool deepseek = m.family == "deepseek_v2";
  if (deepseek && !dm.amp && bld.tensor(x).dtype != DType::kF32) {
    // moe2: DeepseekV2Moe.forward (modeling_deepseek_v2.py @ 0233e509): F.linear(hidden_states.
    // type(torch.float32), self.gate.weight.type(torch.float32)): without autocast (bf16-mixed)
    // both are fp32 copies the linear saves; under autocast the linear undoes them (census)
    const int32_t x32 = o.cast(x, DType::kF32, "router input fp32", "router input fp32");
    const int32_t w = bld.param(mul(dm.h, e), dm.param_dt, "router");
    const int32_t w32 = o.cast(w, DType::kF32, "router weight fp32", "router weight fp32");
    logits = o.linear(x32, dm.h, e, false, Tp::kNone, "router", "router logits", w32);
  } else {
    // lora6: Mixtral's and Qwen2-MoE's `gate` is an nn.Linear: PEFT's all-linear adapts it.
    // DeepSeek-V2's forward calls F.linear on gate.weight, so an adapter there never runs
    // (kNone; the unused adapter's (h + E) r parameters under all-linear are not modeled).
    logits = o.linear(x, dm.h, e, false, Tp::kNone, "router", "router logits", -1,
                      deepseek ? LinearSite::kNone : LinearSite::kOther);
  }
  // F.softmax(logits, dim=1, dtype=torch.float): a copy to fp32 (ToCopyBackward saves nothing),
  // then softmax saves its fp32 output (SoftMax.cpp softmax() with a dtype)
  int32_t l32 = o.cast(logits, DType::kF32, "router logits to fp32", "router logits fp32");
  int32_t probs = op(bld, o, OpKind::kSoftmax, "router softmax", {{l32, GradRule::kNew}},
                     mul(n, e), DType::kF32, {}, true, Exec::kSoftmax, {n, e, 0});
  // feat13 (issue 13): DeepSeek-V2's topk_method "group_limited_greedy" (hf_group_limited)
  int64_t group_temps = 0;
  if (deepseek && m.router_groups > 0) probs = hf_group_limited(bld, o, dm, probs, n, &group_temps);
  // torch.topk: values and int64 indices; TopkBackward0 saves the indices (census, torch 1.13)
  OpDraft t = o.draft(OpKind::kCopy, "router topk");
  t.op.math16 = false;
  t.exec = Exec::kTopK;  // exec12
  // exec13: dim[3] 1: the executor routes each expert the tokens this graph's loop sizes it for
  // (expert_tokens, --moe-imbalance), not by the data (see Exec::kTopK)
  t.dim = {n, e, k, 1};
  t.op.fwd_transient_bytes = group_temps;  // feat13: the group routing's tensors, still alive
  t.inputs.push_back({probs, GradRule::kNew});
  int32_t w = bld.fresh(bytes(mul(n, k), DType::kF32), DType::kF32, "routing weights");
  int32_t idx = bld.fresh(bytes(mul(n, k), DType::kI64), DType::kI64, "selected experts");
  t.outputs = {w, idx};
  t.saves = {idx};
  bld.add_op(std::move(t));
  if (m.norm_topk) {
    // routing_weights /= routing_weights.sum(-1, keepdim=True): SumBackward saves sizes only;
    // the in-place DivBackward0 saves other (the sum) and the original self (census, torch 1.13)
    // moe2: in place, the result is topk's values storage (a view); the clone of the original
    // self is the op's new storage (census)
    int32_t sum = op(bld, o, OpKind::kAdd, "routing weight sum", {{w, GradRule::kNew}}, n,
                     DType::kF32, {}, false, Exec::kRowSum, {n, k});
    int32_t orig = bld.fresh(bytes(mul(n, k), DType::kF32), DType::kF32, "routing weights before div");
    OpDraft d = o.draft(OpKind::kMul, "routing weights / sum");
    d.op.math16 = false;
    d.exec = Exec::kDivInPlace;  // exec12
    d.dim = {n, k};
    d.inputs.push_back({w, GradRule::kNew});
    d.inputs.push_back({sum, GradRule::kNew});
    int32_t y = bld.view(w, bytes(mul(n, k), DType::kF32), DType::kF32);
    d.outputs = {y, orig};
    d.saves = {sum, orig};
    bld.add_op(std::move(d));
    w = y;
  }
  // DeepseekV2Moe.route_tokens_to_experts: `topk_weight * routed_scaling_factor`, a new [N, k]
  // (MulBackward0 with a Python scalar saves nothing)
  if (m.family == "deepseek_v2") {
    OpDraft d = o.draft(OpKind::kMul, "routed scaling");
    d.op.math16 = false;
    // exec14 (issue 10): the executor's x * scalar; torch multiplies an fp32 tensor by the Python
    // float in fp32 (the scalar rounded to float)
    d.exec = Exec::kScale;
    d.p = static_cast<float>(m.routed_scaling);
    d.inputs.push_back({w, GradRule::kNew});
    w = bld.fresh(bytes(mul(n, k), DType::kF32), DType::kF32, "routed scaling");
    d.outputs.push_back(w);
    bld.add_op(std::move(d));
  }
  // .to(hidden_states.dtype): a copy when the hidden states are 16-bit (bf16-mixed)
  // (DeepSeek keeps its fp32 top-k weights: route_tokens_to_experts returns them uncast, and
  // the expert output times them is promoted, then cast back for index_add_; census)
  if (!deepseek) w = o.cast(w, bld.tensor(x).dtype, "routing weights cast", "routing weights");
  *sel = idx;
  return w;
}

// HF's loop (MixtralSparseMoeBlock.forward, Qwen2MoeSparseMoeBlock, DeepseekV2MoE): per expert
// with n_e tokens, `torch.where(expert_mask[e])` (idx, top_x: int64 [n_e]), the gather
// `hidden_states[None, top_x]` (IndexBackward0 saves top_x), the expert's SwiGLU,
// `* routing_weights[top_x, idx, None]` (the index saves both index tensors; the product saves
// the expert output and the [n_e, 1] weights; promoted to fp32 under autocast), and
// `final.index_add_(0, top_x, y)` (IndexAddBackward0 saves top_x and the source y: census).
int32_t hf_loop(Builder& bld, const Dims& dm, int32_t x) {
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  const int64_t h = dm.h, n = dm.n_full();
  const DType xdt = bld.tensor(x).dtype;
  int32_t sel = -1;
  int32_t w = hf_router(bld, dm, x, n, &sel);
  int32_t out = no_grad_op(bld, o, -1, mul(n, h), xdt, "moe output (zeros)", Exec::kHeld);
  // one_hot(selected_experts, E).permute(2, 1, 0): int64 [E, k, N], no gradient; alive until
  // the loop over experts ends (it is read by every iteration). Made after the zeros (census).
  const int32_t mask = no_grad_op(bld, o, sel, mul(mul(n, m.experts_per_token), m.experts),
                                  DType::kI64, "expert mask (one-hot)", Exec::kOneHot,
                                  {n, m.experts_per_token, m.experts});
  int64_t expert = -1;  // exec12: the local expert's index (the executor's torch.where)
  for (int64_t ne : expert_tokens(dm, n)) {
    ++expert;
    if (ne == 0) continue;  // expert_hit: experts with no token are skipped
    // moe2: torch.where(cond) is nonzero(cond).unbind(1) (ATen TensorCompare.cpp where,
    // nonzero_numpy): idx and top_x are views of one int64 [n_e, 2] storage, which every save of
    // either keeps alive whole (census)
    const int32_t ids = no_grad_op(bld, o, mask, mul(2, ne), DType::kI64, "expert token ids",
                                   Exec::kWhere, {n, m.experts_per_token, expert, ne});
    const int32_t top_x = bld.view(ids, bytes(ne, DType::kI64), DType::kI64);
    const int32_t slot = bld.view(ids, bytes(ne, DType::kI64), DType::kI64);
    int32_t xe = op(bld, o, OpKind::kCopy, "expert gather", {{x, GradRule::kNew}, {top_x, GradRule::kNone}},
                    mul(ne, h), xdt, {top_x}, false, Exec::kGatherRows, {ne, h});
    int32_t y = hf_swiglu(bld, dm, xe, m.expert_ffn, true);
    int32_t we = op(bld, o, OpKind::kCopy, "expert routing weight",
                    {{w, GradRule::kNew}, {top_x, GradRule::kNone}, {slot, GradRule::kNone}}, ne,
                    bld.tensor(w).dtype, {top_x, slot}, false, Exec::kGatherWeight,
                    {ne, m.experts_per_token});
    const DType pdt = promote(bld.tensor(y).dtype, bld.tensor(we).dtype);
    int32_t yw = o.mul_op(y, we, bytes(mul(ne, h), pdt), pdt, "expert * weight", "weighted expert out",
                          true, true, Exec::kRowScale, ne, h);  // exec12: y [ne, h] * w [ne]
    yw = o.cast(yw, xdt, "expert out cast", "weighted expert out");
    OpDraft d = o.draft(OpKind::kAdd, "expert index_add_");
    d.op.math16 = false;
    d.exec = Exec::kIndexAdd;  // exec12
    d.dim = {ne, h};
    d.inputs.push_back({out, GradRule::kPass, 0});
    d.inputs.push_back({yw, GradRule::kNew});
    d.inputs.push_back({top_x, GradRule::kNone});
    const int32_t next = bld.view(out, bld.tensor(out).bytes, xdt);
    d.outputs.push_back(next);
    d.saves = {top_x, yw};
    bld.add_op(std::move(d));
    out = next;
  }
  return out;
}

// mla5 (issue 13): Megatron's load-balancing loss with --moe-aux-loss-coeff > 0, the default
// "aux_loss" balancing type (NVIDIA/Megatron-LM @ d98e8a64ddf3: router.py TopKRouter.routing ->
// compute_routing_scores_for_aux_loss -> _apply_aux_loss -> attach_and_log_load_balancing_loss;
// moe_utils.py compute_routing_scores_for_aux_loss, get_tokens_per_expert_and_token_count,
// switch_load_balancing_loss_func, MoEAuxLossAutoScaler; moe_router_fusion False, its default).
// Saved per MoE layer of N tokens and E experts: 4 N E (the fp32 scores) + 8 E (the int64 tokens
// per expert) + 4 (the 0-dim loss) bytes. Returns probs with the loss attached.
int32_t megatron_aux_loss(Builder& bld, const Dims& dm, int32_t logits, int32_t probs, int64_t n) {
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  const int64_t e = m.experts, k = m.experts_per_token;
  // scores = torch.softmax(logits, dim=-1, dtype=torch.float32): a 16-bit CUDA input goes to
  // _softmax(half_to_float=True) (ATen SoftMax.cpp softmax): no copy; SoftmaxBackward0 saves
  // its fp32 result
  const int32_t scores = op(bld, o, OpKind::kSoftmax, "aux scores softmax (fp32)",
                            {{logits, GradRule::kNew}}, mul(n, e), DType::kF32, {}, true);
  // `_, top_indices = torch.topk(scores, k)` (fp32 values, int64 indices: TopkBackward0 dies
  // with the discarded values), `torch.zeros_like(logits).int().scatter(1, top_indices, 1)
  // .bool()` (int32 [N, E] twice at the scatter, then the bool map), routing_map.sum(dim=0):
  // int64 [E] tokens per expert, no gradient (reduce_from_tensor_model_parallel_region over
  // TP x CP: one rank, --tp > 1 being refused)
  OpDraft t = o.draft(OpKind::kCopy, "aux tokens per expert");
  t.op.math16 = false;
  t.inputs.push_back({scores, GradRule::kNone});
  t.op.fwd_transient_bytes = mul(n, 12 * k + 9 * e);
  const int32_t tpe = bld.fresh(bytes(e, DType::kI64), DType::kI64, "aux tokens per expert");
  t.outputs.push_back(tpe);
  bld.add_op(std::move(t));
  // switch_load_balancing_loss_func: probs.sum(dim=0) (SumBackward0 saves sizes only) times
  // tokens_per_expert (MulBackward0 saves other, the int64 [E], for self's gradient; promoted
  // to fp32), torch.sum, times a Python scalar (saves nothing): the fp32 0-dim aux loss
  OpDraft a = o.draft(OpKind::kMul, "aux loss");
  a.op.math16 = false;
  a.inputs.push_back({scores, GradRule::kNew});
  a.inputs.push_back({tpe, GradRule::kNone});
  const int32_t aux = bld.fresh(4, DType::kF32, "aux loss");
  a.outputs.push_back(aux);
  a.saves = {tpe};
  a.op.fwd_transient_bytes = mul(2, bytes(e, DType::kF32));
  a.op.bwd_transient_bytes = mul(2, bytes(e, DType::kF32));
  bld.add_op(std::move(a));
  // MoEAuxLossAutoScaler.apply(probs, aux_loss): returns probs, save_for_backward(aux_loss);
  // backward hands probs' gradient on and gives aux_loss `ones_like(aux_loss) * scale`
  OpDraft d = o.draft(OpKind::kAdd, "aux loss auto-scaler");
  d.op.math16 = false;
  d.inputs.push_back({probs, GradRule::kPass, 0});
  d.inputs.push_back({aux, GradRule::kNew});
  const int32_t out = bld.view(probs, bld.tensor(probs).bytes, bld.tensor(probs).dtype);
  d.outputs.push_back(out);
  d.saves = {aux};
  bld.add_op(std::move(d));
  return out;
}

// Megatron-core's MoE layer, alltoall dispatcher with TEGroupedMLP (token_dispatcher.py,
// moe_utils.py permute/unpermute unfused, experts.py, fused_bias_swiglu.py @ d98e8a6).
int32_t megatron_alltoall(Builder& bld, const Dims& dm, int32_t x) {
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  // etp (issue 13): the MoE layer takes the block's tokens as they are: sequence-sharded under
  // --tp with --sp (n_local; MoELayer.forward gets [s/tp, b, h]), all of them at --tp 1; each
  // expert's width is split over the expert-TP ranks (TEGroupedMLP: moe_ffn_hidden_size / etp)
  const int64_t h = dm.h, n = numel_of(bld.tensor(x)) / dm.h, e = m.experts, k = m.experts_per_token;
  const int64_t local = e / dm.ep, f = m.expert_ffn / dm.etp, etp = dm.etp;
  const DType dt = dm.half_dt;
  // Router (router.py TopKRouter: gating linear, topk_routing_with_score_function): logits
  // [N, E], the probs scattered into a dense [N, E] (blocks_moe_router.cpp)
  int32_t logits = o.linear(x, h, e, false, Tp::kNone, "router", "router logits");
  int32_t idx = -1;
  int32_t probs = megatron_router(bld, dm, logits, n, &idx);
  // mla5: the load-balancing loss is attached to the probs before dispatch (router.py routing)
  if (dm.moe_aux_loss_coeff > 0) probs = megatron_aux_loss(bld, dm, logits, probs, n);
  int32_t map = no_grad_op(bld, o, idx, mul(n, e), DType::kBool, "routing map");
  // Tokens each rank sends (permute's num_out_tokens) and the simulated rank receives.
  int64_t sent = mul(n, k), recv = 0;
  if (dm.moe_capacity > 0) {
    const int64_t cap = static_cast<int64_t>(
        std::ceil(static_cast<double>(mul(n, k)) / static_cast<double>(e) * dm.moe_capacity));
    sent = mul(cap, e);
    recv = mul(cap, e);  // drop and pad: every local expert takes cap tokens from each rank
  } else {
    for (int64_t ne : expert_tokens(dm, n)) recv += ne;
  }
  // permute: sorted indices (argsort of the routing map, int64 [sent], no gradient), the probs
  // gathered (IndexBackward saves the indices) and tokens.index_select (saves the indices)
  int32_t sorted = no_grad_op(bld, o, map, sent, DType::kI64, "permutation indices");
  int32_t pprobs = op(bld, o, OpKind::kCopy, "permute probs",
                      {{probs, GradRule::kNew}, {sorted, GradRule::kNone}}, sent, dt, {sorted});
  int32_t px = op(bld, o, OpKind::kCopy, "permute tokens",
                  {{x, GradRule::kNew}, {sorted, GradRule::kNone}}, mul(sent, h), dt, {sorted});
  // all_to_all over the expert-parallel group (tensor_parallel/mappings.py _AllToAll saves
  // nothing): new buffers of the received tokens and probs
  auto a2a = [&](int32_t in, int64_t out_numel, const char* name) {
    OpDraft d = o.draft(OpKind::kCopy, name);
    d.op.math16 = false;
    d.inputs.push_back({in, GradRule::kNew});
    int32_t y = bld.fresh(bytes(out_numel, dt), dt, name);
    d.outputs.push_back(y);
    if (dm.ep > 1) {
      d.op.fwd.comm_bytes = bld.tensor(in).bytes, d.op.fwd.comm_kind = 5;  // Collective::kAllToAll
      d.op.bwd.comm_bytes = bytes(out_numel, dt), d.op.bwd.comm_kind = 5;
    }
    bld.add_op(std::move(d));
    return y;
  };
  int32_t gx = a2a(px, mul(recv, h), "all-to-all tokens");
  int32_t gp = a2a(pprobs, recv, "all-to-all probs");
  // etp (issue 13): dispatch_postprocess (token_dispatcher.py @ d98e8a64ddf3, tp_size > 1 over
  // pg_collection.expt_tp): gather_from_sequence_parallel_region of the received tokens and probs
  // (tensor_parallel/mappings.py _GatherFromSequenceParallelRegion: a new [etp x rows] buffer,
  // saves nothing; its backward reduce-scatters the gradient). Every expert-TP rank then runs
  // its width shard of the local experts on the tokens all etp ranks received.
  const int64_t rows = mul(recv, etp);
  auto etp_collective = [&](int32_t in, int64_t out_numel, bool gather, const char* name) {
    OpDraft d = o.draft(OpKind::kCopy, name);
    d.op.math16 = false;
    d.inputs.push_back({in, GradRule::kNew});
    int32_t y = bld.fresh(bytes(out_numel, dt), dt, name);
    d.outputs.push_back(y);
    // payload: the gathered (whole) tensor, as Ops::linear counts its SP collectives
    const int64_t whole = gather ? bytes(out_numel, dt) : bld.tensor(in).bytes;
    d.op.fwd.comm_bytes = whole, d.op.fwd.comm_kind = gather ? kAllGather : kReduceScatter;
    d.op.bwd.comm_bytes = whole, d.op.bwd.comm_kind = gather ? kReduceScatter : kAllGather;
    d.op.fwd.comm_group = d.op.bwd.comm_group = 1;  // the expert-TP group (engine.cpp tp_ns)
    bld.add_op(std::move(d));
    return y;
  };
  if (etp > 1) {
    gx = etp_collective(gx, mul(rows, h), true, "expert-TP all-gather tokens");
    gp = etp_collective(gp, rows, true, "expert-TP all-gather probs");
  }
  if (local > 1) {  // sort_chunks_by_idxs: torch.cat of the chunks by local expert (saves none)
    gx = op(bld, o, OpKind::kCopy, "sort tokens by expert", {{gx, GradRule::kNew}}, mul(rows, h), dt, {});
    gp = op(bld, o, OpKind::kCopy, "sort probs by expert", {{gp, GradRule::kNew}}, rows, dt, {});
  }
  // TEGroupedMLP: linear_fc1 (h -> 2f per expert, GroupedLinear saves its input), the weighted
  // fused SwiGLU (WeightedSwiGLUFunction saves its input and the probs), linear_fc2
  const int32_t w1 = bld.param(mul(local, mul(h, 2 * f)), dm.param_dt, "experts fc1");
  bld.mark_expert(w1);
  int32_t fc1 = o.linear(gx, h, 2 * f, false, Tp::kNone, "experts fc1", "experts fc1 out", w1);
  int32_t act = op(bld, o, OpKind::kSilu, "experts weighted swiglu",
                   {{fc1, GradRule::kNew}, {gp, GradRule::kNew}}, mul(rows, f), dt, {fc1, gp});
  const int32_t w2 = bld.param(mul(local, mul(f, h)), dm.param_dt, "experts fc2");
  bld.mark_expert(w2);
  int32_t y = o.linear(act, f, h, false, Tp::kNone, "experts fc2", "experts fc2 out", w2);
  if (local > 1) y = op(bld, o, OpKind::kCopy, "unsort tokens", {{y, GradRule::kNew}}, mul(rows, h), dt, {});
  // etp (issue 13): combine_preprocess: reduce_scatter_to_sequence_parallel_region of
  // `hidden_states.to(self.probs.dtype)` over the expert-TP group: the partial sums of the etp
  // width shards, each rank keeping its own received rows. probs take the logits' dtype
  // (moe_utils.py topk_routing_with_score_function `probs.type_as(logits)`; moe_router_dtype
  // unset), the hidden states': no cast.
  if (etp > 1) y = etp_collective(y, mul(recv, h), false, "expert-TP reduce-scatter");
  y = a2a(y, mul(sent, h), "all-to-all back");
  // unpermute: zeros [N, h] then scatter_add_ of the tokens (ScatterAddBackward saves the index)
  return op(bld, o, OpKind::kAdd, "unpermute (scatter_add)",
            {{y, GradRule::kNew}, {sorted, GradRule::kNone}}, mul(n, h), dt, {sorted});
}

// The shared experts: HF Qwen2-MoE `sigmoid(shared_expert_gate(x)) * shared_expert(x)`,
// DeepSeek's shared_experts(x); Megatron's SharedExpertMLP (fc1 h -> 2f, SwiGLU, fc2; the gate
// as HF's). The routed output is added to it.
int32_t shared_experts(Builder& bld, const Dims& dm, int32_t x, int32_t routed) {
  const ModelConfig& m = *dm.model;
  if (m.shared_ffn == 0) return routed;
  Ops o(bld, dm);
  int32_t y = hf_swiglu(bld, dm, x, m.shared_ffn, false);
  if (m.shared_gate) {
    int32_t g = o.linear(x, dm.h, 1, false, Tp::kNone, "shared expert gate", "shared gate logit",
                         -1, LinearSite::kOther);  // lora6: nn.Linear(h, 1): all-linear adapts it
    // sigmoid saves its output (derivatives.yaml sigmoid: result)
    const int64_t rows = numel_of(bld.tensor(g));
    int32_t s = op(bld, o, OpKind::kSilu, "shared gate sigmoid", {{g, GradRule::kNew}},
                   rows, bld.tensor(g).dtype, {}, true, Exec::kSigmoid);  // exec13
    const DType dt = promote(bld.tensor(s).dtype, bld.tensor(y).dtype);
    y = o.mul_op(s, y, bytes(numel_of(bld.tensor(y)), dt), dt, "shared gate *", "gated shared out",
                 true, true, Exec::kGateMul, rows, dm.h);  // exec13: [N, 1] * [N, h]
  }
  return o.add(routed, y, "routed + shared");
}

}  // namespace

int32_t group_masked_scores(Builder& bld, Ops& o, int32_t scores, int64_t n, int64_t e,
                            int64_t mask_temps, int64_t fill_temps) {
  OpDraft gm = o.draft(OpKind::kCopy, "router group mask");
  gm.op.math16 = false;
  gm.inputs.push_back({scores, GradRule::kNone});  // no gradient flows back through the mask
  const int32_t mask = bld.fresh(bytes(mul(n, e), DType::kBool), DType::kBool, "router group mask");
  gm.outputs.push_back(mask);
  gm.op.fwd_transient_bytes = mask_temps;
  bld.add_op(std::move(gm));
  OpDraft mf = o.draft(OpKind::kMul, "router masked_fill");
  mf.op.math16 = false;
  mf.inputs.push_back({scores, GradRule::kNew});
  mf.inputs.push_back({mask, GradRule::kNone});
  const int32_t masked = bld.fresh(bytes(mul(n, e), DType::kF32), DType::kF32, "masked scores");
  mf.outputs.push_back(masked);
  mf.saves = {mask};  // MaskedFillBackward0 keeps the bool mask
  mf.op.fwd_transient_bytes = fill_temps;
  bld.add_op(std::move(mf));
  return masked;
}

// moe2: HF's load-balancing auxiliary loss (MixtralForCausalLM.forward and
// load_balancing_loss_func, src/transformers/models/mixtral/modeling_mixtral.py @ 00d4b3d2142c;
// Qwen2MoeForCausalLM the same), computed after the LM loss when output_router_logits is set:
// every MoE layer's router logits [N, E] (16-bit under autocast) are returned in the model output
// (OutputRecorder) and held to the end of forward; torch.cat of them [L N, E]; softmax (fp32 under
// CUDA autocast, whose fp32 list has softmax; saves its output); topk's indices and their one_hot
// [L N, k, E] int64 (no gradient); with the Trainer's attention_mask, the expanded masks
// [L N, k, E] and [L N, E] (int64: the tokenizer's) and the products: tokens_per_expert has no
// gradient (transients), `routing_weights * router_per_expert_attention_mask` saves the mask
// (MulBackward0: other, as self requires grad), the division its int64 [E] sum; sums to [E] and
// [k, E]; `loss += coef * aux`. Saves checked on torch 1.13 (CPU, saved_tensors_hooks on the
// function written from the source): softmax output, the [L N, E] mask, its [E] sum,
// tokens_per_expert (and topk's indices, whose node dies with the discarded values).
// Approximation: the per-layer logits are made here as one [L N, E] tensor (they exist from each
// layer's router on: at most L N E 16-bit bytes more before the head), and the aux gradient into
// each layer's router logits ([N, E] per layer) is not added to the layers' backward.
int32_t build_hf_aux_loss(Builder& bld, const Dims& dm, int32_t loss) {
  const ModelConfig& m = *dm.model;
  Ops o(bld, dm);
  const int64_t layers = m.layers - m.dense_layers, e = m.experts, k = m.experts_per_token;
  const int64_t rows = mul(layers, dm.n_full());  // L N
  const DType ldt = dm.amp ? dm.half_dt : dm.resid_dt;  // the gate linear's output dtype
  int32_t held = no_grad_op(bld, o, -1, mul(rows, e), ldt, "router logits (every layer)");
  int32_t cat = op(bld, o, OpKind::kCopy, "aux router logits cat", {{held, GradRule::kNew}},
                   mul(rows, e), ldt, {});
  // autocast's fp32 softmax on CUDA: a cast, then the softmax saving its output
  const DType sdt = dm.amp ? DType::kF32 : ldt;
  cat = o.cast(cat, sdt, "softmax input cast", "aux router logits fp32");
  int32_t probs = op(bld, o, OpKind::kSoftmax, "aux softmax", {{cat, GradRule::kNew}},
                     mul(rows, e), sdt, {}, true);
  int32_t sel = no_grad_op(bld, o, probs, mul(rows, k), DType::kI64, "aux topk indices");
  // one_hot int64 [L N, k, E], the expanded attention mask int64 [L N, k, E], the float copy and
  // the product fp32 [L N, k, E]: temporaries of the mean (no gradient)
  OpDraft t = o.draft(OpKind::kCopy, "aux tokens per expert");
  t.op.math16 = false;
  t.inputs.push_back({sel, GradRule::kNone});
  const int64_t lke = mul(rows, mul(k, e));
  t.op.fwd_transient_bytes = mul(lke, 8 + 8 + 4 + 4);
  int32_t tpe = bld.fresh(bytes(mul(k, e), DType::kF32), DType::kF32, "aux tokens per expert");
  t.outputs.push_back(tpe);
  bld.add_op(std::move(t));
  // routing_weights * router_per_expert_attention_mask (int64 [L N, E], saved), the product's
  // sum over tokens / the mask's sum: [E]
  OpDraft p = o.draft(OpKind::kMul, "aux router prob per expert");
  p.op.math16 = false;
  p.inputs.push_back({probs, GradRule::kNew});
  int32_t mask = bld.fresh(bytes(mul(rows, e), DType::kI64), DType::kI64, "aux attention mask [L N, E]");
  int32_t ppe = bld.fresh(bytes(e, DType::kF32), DType::kF32, "aux router prob per expert");
  // the division by torch.sum(mask, dim=0) (int64 [E]): DivBackward0 saves it (other)
  int32_t msum = bld.fresh(bytes(e, DType::kI64), DType::kI64, "aux attention mask sum");
  p.outputs = {ppe, mask, msum};
  p.saves = {mask, msum};
  p.op.fwd_transient_bytes = bytes(mul(rows, e), DType::kF32);  // the product
  p.op.bwd_transient_bytes = bytes(mul(rows, e), DType::kF32);
  bld.add_op(std::move(p));
  // sum(tokens_per_expert * prob.unsqueeze(0)) * E; loss += coef * aux (MulBackward0 saves
  // tokens_per_expert)
  int32_t aux = op(bld, o, OpKind::kMul, "aux loss", {{ppe, GradRule::kNew}, {tpe, GradRule::kNone}},
                   1, DType::kF32, {tpe});
  OpDraft d = o.draft(OpKind::kAdd, "loss + coef * aux");
  d.op.math16 = false;
  // the root of backward: each input gets a new (scalar) gradient (a root's output has none to
  // pass on)
  d.inputs.push_back({loss, GradRule::kNew});
  d.inputs.push_back({aux, GradRule::kNew});
  const int32_t total = bld.fresh(bld.tensor(loss).bytes, bld.tensor(loss).dtype, "loss");
  d.outputs.push_back(total);
  bld.add_op(std::move(d));
  return total;
}

int32_t build_moe(Builder& bld, const Dims& dm, int32_t mlp_in) {
  const MoeDispatch how = dm.impl ? dm.impl->moe : MoeDispatch::kNone;
  // moetp (issue 13): Megatron's SharedExpertMLP, at any --tp (blocks_moetp.cpp).
  // MoELayer.forward (moe_layer.py @ d98e8a64ddf3 custom_forward) runs shared_experts_compute
  // before route; with --moe-shared-expert-overlap the dispatcher runs it between the
  // all-to-alls instead (token_dispatcher.py), built after the routed path here.
  if (how == MoeDispatch::kAllToAll) {
    const int32_t shared = dm.shared_overlap ? -1 : megatron_shared_experts(bld, dm, mlp_in);
    const int32_t routed = megatron_alltoall(bld, dm, mlp_in);
    const int32_t late = dm.shared_overlap ? megatron_shared_experts(bld, dm, mlp_in) : shared;
    return late < 0 ? routed : Ops(bld, dm).add(routed, late, "routed + shared");
  }
  const int32_t routed =
      how == MoeDispatch::kAllToAll ? megatron_alltoall(bld, dm, mlp_in) : hf_loop(bld, dm, mlp_in);
  return shared_experts(bld, dm, mlp_in, routed);
}

}  // namespace sim::detail
