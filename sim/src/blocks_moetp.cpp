// moetp (issue 13): Megatron-core's shared experts under tensor parallelism. The rows and the
// hand derivation of a Qwen2-MoE-shaped layer at --tp 2 are in docs/memory-model.md "Shared
// experts under tensor parallelism"; tests/test_moetp.cpp asserts them to the byte.
//
// NVIDIA/Megatron-LM @ d98e8a64ddf3, megatron/core/transformer/moe/shared_experts.py:
// SharedExpertMLP(MLP) is Megatron's MLP with ffn_hidden_size = moe_shared_expert_intermediate_size
// over the tensor-parallel group (linear_fc1 column-parallel, linear_fc2 row-parallel; under
// sequence parallelism the input shard is all-gathered for fc1 and fc2's partial sums
// reduce-scattered), built here as the dense MLP of that width (graph_blocks.cpp build_mlp, the
// megatron rows' gate/up/silu/mul/down); then, with the gate (Qwen2-MoE's shared_expert_gate),
// `logits = F.linear(hidden_states, self.gate_weight)` on the block's own (sequence-sharded)
// input, `sigmoid`, `output * gate_score`: the gate weight [1, h] is replicated over TP
// (`sequence_parallel` attribute: its gradient is all-reduced with the layer norms', timed since
// feat14: engine.cpp tp_grad_allreduce).
//
// --moe-shared-expert-overlap (SharedExpertMLP.__init__: `linear.parallel_mode = None` on both
// linears; pre_forward_comm, linear_fc1_forward_and_act, linear_fc2_forward, post_forward_comm,
// get_output, called by MoEAlltoAllTokenDispatcher between its all-to-alls): the gate is computed
// first, the input is all-gathered explicitly (gather_from_sequence_parallel_region: a new [N, h]
// buffer that fc1, now a plain linear, saves whole where the TP linear saved the [N / t, h]
// shard), fc2 writes whole [N, h] partial sums, reduce_scatter_to_sequence_parallel_region makes
// the [N / t, h] output and the partial sums are dropped (`self.cached_fc2_output = None`).
#include "blocks_moe.hpp"

namespace sim::detail {

namespace {

// A TP collective of Megatron's mappings.py as its own op (saves nothing): all-gather of the
// sequence shards (its backward reduce-scatters) or reduce-scatter of partial sums (its backward
// all-gathers). Payload: the whole tensor, as Ops::linear counts its SP collectives.
int32_t sp_collective(Builder& bld, const Dims& dm, int32_t in, int64_t out_numel, bool gather,
                      const char* name) {
  Ops o(bld, dm);
  const DType dt = bld.tensor(in).dtype;
  OpDraft d = o.draft(OpKind::kCopy, name);
  d.op.math16 = false;
  d.inputs.push_back({in, GradRule::kNew});
  const int32_t y = bld.fresh(bytes(out_numel, dt), dt, name);
  d.outputs.push_back(y);
  const int64_t whole = gather ? bytes(out_numel, dt) : bld.tensor(in).bytes;
  d.op.fwd.comm_bytes = whole, d.op.fwd.comm_kind = gather ? kAllGather : kReduceScatter;
  d.op.bwd.comm_bytes = whole, d.op.bwd.comm_kind = gather ? kReduceScatter : kAllGather;
  bld.add_op(std::move(d));
  return y;
}

// The gate: F.linear(hidden_states, gate_weight) (saves its input, already the router's, and the
// weight), sigmoid (saves its output: derivatives.yaml sigmoid: result).
int32_t gate_score(Builder& bld, const Dims& dm, int32_t x) {
  Ops o(bld, dm);
  const int32_t g = o.linear(x, dm.h, 1, false, Ops::Tp::kNone, "shared expert gate",
                             "shared gate logit", -1, LinearSite::kOther);
  OpDraft d = o.draft(OpKind::kSilu, "shared gate sigmoid");
  d.op.math16 = false;
  d.inputs.push_back({g, GradRule::kNew});
  const int32_t s = bld.fresh(bld.tensor(g).bytes, bld.tensor(g).dtype, "shared gate sigmoid");
  d.outputs.push_back(s);
  d.saves.push_back(s);
  bld.add_op(std::move(d));
  return s;
}

}  // namespace

int32_t megatron_shared_experts(Builder& bld, const Dims& dm, int32_t x) {
  const ModelConfig& m = *dm.model;
  if (m.shared_ffn == 0) return -1;
  Ops o(bld, dm);
  Dims ds = dm;
  ds.f = m.shared_ffn / dm.t;  // ColumnParallelLinear: divide(ffn_hidden_size, tp); checked
  int32_t score = -1;
  int32_t y = -1;
  const int32_t first = bld.op_count();
  if (dm.shared_overlap && dm.t > 1) {
    if (m.shared_gate) score = gate_score(bld, dm, x);  // pre_forward_comm: the gate first
    const int64_t nf = dm.n_full();
    const int32_t gathered = sp_collective(bld, dm, x, mul(nf, dm.h), true,
                                           "shared expert all-gather (overlap)");
    // the linears with parallel_mode None: Megatron's MLP on the gathered tokens, no TP
    // communication of their own (a Dims of one rank over the whole sequence)
    Dims d1 = ds;
    d1.t = 1;
    d1.sp = false;
    d1.s_local = d1.s;
    const int32_t partial = build_mlp(bld, d1, gathered);
    y = sp_collective(bld, dm, partial, mul(dm.n_local(), dm.h), false,
                      "shared expert reduce-scatter (overlap)");
  } else {
    y = build_mlp(bld, ds, x);
    if (m.shared_gate) score = gate_score(bld, dm, x);
  }
  if (score >= 0) {
    const DType dt = promote(bld.tensor(score).dtype, bld.tensor(y).dtype);
    y = o.mul_op(y, score, bytes(numel_of(bld.tensor(y)), dt), dt, "shared gate *",
                 "gated shared out", true, true, Exec::kNone, 0, 0);
  }
  // get_output runs the gate's product on the side stream too; the current stream waits for it
  if (dm.shared_overlap) bld.mark_moe_overlap_from(first);
  return y;
}

}  // namespace sim::detail
