// feat14 (issue 13): Megatron-core's gated MLP as it runs by default (ImplSpec::fused_swiglu).
//
// NVIDIA/Megatron-LM @ d98e8a64ddf3:
//   megatron/core/transformer/mlp.py MLP.__init__: linear_fc1 is ONE column-parallel linear of
//     `ffn_hidden_size * 2` output features when gated_linear_unit (--swiglu); MLP.forward:
//     `intermediate_parallel, bias_parallel = self.linear_fc1(hidden_states)`, then with
//     bias_activation_fusion and activation_func F.silu, `bias_swiglu_impl(intermediate_parallel,
//     bias_parallel, activation_func_fp8_input_store, ...)`, then linear_fc2.
//   megatron/core/fusions/fused_bias_swiglu.py SwiGLUFunction.forward (no bias: --swiglu turns
//     --disable-bias-linear's models' bias off; BiasSwiGLUFunction with one):
//     `ctx.save_for_backward(input_for_backward)` -- the whole [n, 2f] fc1 output (the fp8 copy
//     only under --activation-func-fp8-input-store, not modeled: refused nowhere, it is not a
//     flag of actsim) -- and returns `swiglu(input)`: `y_1, y_2 = torch.chunk(y, 2, -1);
//     F.silu(y_1) * y_2`, a new [n, f] tensor (jit-fused: no intermediate kept). backward:
//     swiglu_back(g, y) returns `torch.cat((...), -1)`, a new [n, 2f] gradient.
//   megatron/training/arguments.py:2895 --no-bias-swiglu-fusion (store_false: on by default),
//     argument_utils.py:317 `kw_args['bias_activation_fusion'] = args.bias_swiglu_fusion`.
//
// Against gate/up/silu/mul (HF's LlamaMLP), per token of the MLP: one TP all-gather of the input
// under SP instead of two; saved 2f (fc1 out) + f (fc2's input) = 3f elements instead of
// gate out + up out + silu out + mul out = 4f. docs/memory-model.md "megatron"; asserted to the
// byte in tests/test_feat14.cpp.
#include "blocks_feat14.hpp"

#include <vector>

namespace sim::detail {

int32_t megatron_fused_swiglu_mlp(Builder& bld, const Dims& dm, int32_t mlp_in) {
  Ops o(bld, dm);
  const ModelConfig& m = *dm.model;
  using Tp = Ops::Tp;
  const int64_t h = dm.h, f = dm.f;  // f: per rank (ffn_hidden / tp)
  const int32_t fc1 = o.linear(mlp_in, h, 2 * f, m.linear_bias, Tp::kColumn, "fc1 (gate+up)",
                               "fc1 out", -1, LinearSite::kGateUp);
  const Tensor t = bld.tensor(fc1);
  const int64_t rows = numel_of(t) / (2 * f);
  OpDraft d = o.draft(OpKind::kSilu, "fused swiglu");
  d.exec = Exec::kSwiglu;
  d.dim = {rows, f};
  d.inputs.push_back({fc1, GradRule::kNew});
  const int32_t y = bld.fresh(bytes(mul(rows, f), t.dtype), t.dtype, "swiglu out");
  d.outputs.push_back(y);
  d.saves = {fc1};  // SwiGLUFunction: ctx.save_for_backward(input)
  bld.add_op(std::move(d));
  return o.linear(y, f, h, m.linear_bias, Tp::kRow, "fc2", "fc2 out", -1, LinearSite::kDown);
}

}  // namespace sim::detail

// feat14 (issue 13): Megatron's TP all-reduce of the gradients of the parameters replicated over
// the TP group (Graph::tp_replicated_grad_bytes; ImplSpec::tp_replicated_grad_allreduce). Under
// sequence parallelism each TP rank's replicated parameter sees only its shard of the tokens, so
// its gradient is partial; finalize_model_grads.py @ d98e8a64ddf3 sums them over TP after the DP
// reduction. Which ones: every parameter read by a norm (LayerNorm, RMSNorm, TE's norms: TE sets
// `sequence_parallel` on its norm weights) and every non-expert linear weight without a TP
// collective of its own (Ops::Tp::kNone: the MoE router, router.py:85; Qwen2-MoE's shared gate,
// shared_experts.py:143; MLA's down projections, TELinear parallel_mode "duplicated",
// transformer_engine.py:1316). Excluded: the shared experts' linears under
// --moe-shared-expert-overlap (parallel_mode None but their weights are TP-split: Op::moe_overlap),
// the routed experts (their own expert-TP grid), frozen weights, buffers (not parameters).
// Read from Op::persistent_reads (the persistent storages an op reads). Not counted (small, noted in
// docs): row-parallel linears' biases (stored inside their weight's storage here), learned
// position embeddings, MLA's q/kv layernorm without SP (qk_layernorm).
namespace sim::detail {

int64_t tp_replicated_grad_bytes(const Graph& g) {
  std::vector<char> is_param(g.storages.size(), 0), seen(g.storages.size(), 0);
  for (int32_t s : g.param_storages) is_param[static_cast<size_t>(s)] = 1;
  int64_t numel = 0;
  for (const Op& op : g.ops) {
    const bool norm = op.kind == OpKind::kLayerNorm || op.kind == OpKind::kRmsNorm;
    const bool replicated_linear = op.kind == OpKind::kLinear && op.fwd.comm_kind == 0 &&
                                   op.bwd.comm_kind == 0 && !op.moe_overlap;
    if (!norm && !replicated_linear) continue;
    for (const int32_t* id = g.begin(op.persistent_reads); id != g.end(op.persistent_reads); ++id) {
      const size_t s = static_cast<size_t>(*id);
      const Storage& st = g.storages[s];
      if (!is_param[s] || seen[s] || st.expert || st.frozen) continue;
      seen[s] = 1;
      numel += st.bytes / bytes_of(st.dtype);
    }
  }
  return numel * 4;  // fp32 main_grad (Megatron's DDP under --bf16)
}

}  // namespace sim::detail
