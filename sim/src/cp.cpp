// feat (issue 13): context parallelism, ring attention (docs/memory-model.md "Context
// parallelism"). Every token-wise shape of a rank is already its s / cp share (make_dims); this
// file adds what the ring itself costs to the flash-attention op.
//
// Source: NVIDIA/TransformerEngine transformer_engine/pytorch/attention/dot_product_attention/
// context_parallel.py @ d0067d0da6cb (AttnFuncWithCPAndKVP2P, Megatron-core's default cp_comm_type
// "p2p"):
//   forward: p2p_comm_buffers[0] = cat(k, v); p2p_comm_buffers[i + 1] = empty_like(...) for each of
//     the cp - 1 ring steps (all kept in the list until the forward ends); one flash call per step
//     on (q, the step's kv chunk) giving out_per_step[i] (q's dtype) and softmax_lse_per_step[i]
//     (fp32), kept to the end; then the output correction (flash_attn_fwd_out_correction_init:
//     an fp32 product cast back to q's dtype) into one output; saves q, the last kv buffer, the
//     output and the merged lse (ctx.save_for_backward): the same bytes as one local flash call.
//   backward: dq_buffer = empty_like(q); p2p_comm_buffers = two (2, kv) buffers (kv and dkv,
//     double-buffered); per step a flash backward (its dq, dk, dv) added into the buffers; kv
//     and dkv travel the ring.
//   Work: rank r's q meets every kv chunk once: cp x the local flash FLOPs (load-balanced causal:
//     the causal half of each, as the whole sequence's).
//
// feat2: torch's ring (CpRing::kTorchAllGather; torchtitan). pytorch/pytorch
// torch/distributed/tensor/experimental/_attention.py, read at 0123248a (the stored version; the
// table's torch 1963fc8 of 2024-12-23 has the same API: torchtitan 9dec370 calls its
// set_rotate_method, and the rotater classes, _SDPAMerger and the load balancing are those below):
//   _templated_ring_attention: key, value made contiguous; at step 0 `torch.cat([key.flatten(),
//     value.flatten()])` handed to _AllGatherRotater.exchange_buffers, which all-gathers it once
//     (ft_c.all_gather_tensor, waited at step 1: overlapping step 0's attention) and serves
//     each step's chunk as a view of the gathered buffer (cp chunks, kept to the loop's end).
//     Load balancing (enable_load_balance, round robin): step 0 causal on the local chunks;
//     step i <= rank: the full q against the first half of the chunk's k, v; i > rank: the
//     second half of q against the whole chunk; not causal: each step after the first does the
//     FLOPs of half a local block, so the work is the local causal work x cp, as modeled.
//     _SDPAMerger.step (convert_to_f32): the step's output and lse cast to fp32, then `out = out
//     - F.sigmoid(block_lse - lse) * (out - block_out)`, `lse = lse - F.logsigmoid(lse -
//     block_lse)` (partial steps update the second half through _partial_update's torch.cat);
//     results(): out.to(q's dtype).
//   _templated_ring_attention_backward: k, v gathered again (the same rotater); grad_query,
//     grad_key, grad_value fp32 zeros; per step the flash backward (dq, dk, dv in 16 bits) added
//     into the fp32 accumulators (_partial_update: chunk add + torch.cat), `torch.cat([grad_key
//     .flatten(), grad_value.flatten()])` sent on by _AllToAllRotater (ft_c.permute_tensor) at
//     every step, the last one waited after the loop; then the fp32 grads cast back.
//   The ring carries the k, v SDPA is given: torchtitan @ 9dec370 repeats them to the query
//   heads first (models/llama/model.py:201-202, repeat_kv; the graph's k, v are then the repeated
//   ones, ImplSpec::flash_repeat_kv), v0.2.2 passes enable_gqa (g heads).
//   What runs after each step's attention are memory-bound kernels, timed from their bytes
//   (Op::fwd_serial_bytes); the slowest rank, cp - 1, merges full-length outputs every step.
#include "ops.hpp"

#include "inductor.hpp"  // cptime2: cp_compiled_dead_cats
#include "sim/impl.hpp"

namespace sim::detail {
namespace {

void torch_allgather_ring(OpDraft& d, const Dims& dm, int64_t q, int64_t kv16, int64_t lse) {
  const int64_t cp = dm.cp;
  const int64_t kv = kv16;  // the k, v SDPA sees (repeated under flash_repeat_kv)
  const int64_t q32 = mul(2, q), lse32 = lse;                // fp32 copies (lse is fp32)
  // forward, at its peak (a merge step): the gathered cp chunks; the merger's fp32 out; the
  // step's 16-bit output (still the caller's `out`), its fp32 copy, (out - block_out) and the
  // product; lse-sized: the merger's lse and the sigmoid. The cat(k, v) handed to the gather is
  // freed once the gather is waited at step 1, the contiguous k, v once step 1 rebinds them
  // (step 0's (cp + 2) kv + 2q is never above this, kv <= 2q). cpfp8: held by torch 1.13 on the
  // CPU, harness/census_cp.py (the ring's eager code with stand-ins for flash and the
  // collectives; harness/census/cp.json): cp kv + 8q + 2 lse for cp 2, 4, 8 and kv = 2q or q/2,
  // where feat2 had (cp + 1) kv + 11q + 2 lse.
  // At that peak: cp kv + 4 fp32 q-sized (merger out, copy, difference, product) + q + 3 lse
  // (merger lse, the step's lse, the sigmoid); the op's outputs (out, lse), which the engine
  // counts, are made only after it (results()), so they come off the transient.
  d.op.fwd_transient_bytes += mul(cp, kv) + mul(4, q32) + q + mul(3, lse32) - (q + lse32);
  // backward: the gathered chunks and cat again; fp32 grad_query, grad_key, grad_value; one
  // step's dq, dk, dv; the fp32 dk, dv cat and the permute's receive buffer. cpfp8: torch 1.13's
  // measurement of the ring's eager code (harness/census_cp.py; the CPU's cast temporaries of
  // the in-place fp32 += bf16 adds left out, CUDA casts inside the kernel) is cp kv + 3q +
  // 7.5 kv for kv = 2q, q, q/2 (feat2's account had cp kv + 3q + 8 kv; the half kv is one
  // fp32 dk or dv less at the peak than that sum of the step's buffers assumed).
  d.op.bwd_transient_bytes += mul(cp, kv) + q32 + q + (15 * kv) / 2;
  d.op.cp_gather_bytes = mul(cp, kv);  // all-gather output bytes, forward and backward
  d.op.cp_dkv_bytes = mul(2, kv);      // fp32 dk, dv per step, cp steps
  // Bytes read + written by the merges on rank cp - 1 (full-length q every step):
  //   per step after the first: cast 3q, out - block_out 6q, sigmoid x diff 4q, out - prod 6q
  //   (q = the 16-bit output's bytes) and six lse-sized ops (3 lse each); step 0's cast 3q, the
  //   final cast 3q, and the cat of k, v (2 kv), which the loop makes again at every step but
  //   the last (`if i < size - 1: next_kv = torch.cat(...)`; the all-gather rotater ignores all
  //   but the first).
  // cpfp8: and first `key = key.contiguous(); value = value.contiguous()` (_templated_ring_
  // attention, and again in _templated_ring_attention_backward on the k, v SDPA saved): the k, v
  // torchtitan hands SDPA are transposed views, [b, s, h, d] in memory (model.py @ 9dec370:
  // repeat_kv's reshape, then .transpose(1, 2)), so each is a copy: read kv, write kv.
  d.op.fwd_serial_bytes =
      mul(cp - 1, mul(19, q) + mul(18, lse) + mul(2, kv)) + mul(6, q) + mul(2, kv);
  d.op.fwd_serial_kernels = static_cast<int32_t>(mul(cp - 1, 10) + 3 + 2);
  //   backward per step: grad_query += dq (5q), grad_key/value's _partial_update (chunk add
  //   2.5 kv, torch.cat 4 kv), the dk, dv cat (4 kv), the cat of k, v (2 kv, all but the last
  //   step); once: zeros (2q + 2 kv), casts back (3q + 3 kv)
  d.op.bwd_serial_bytes = mul(cp, mul(5, q) + (21 * kv) / 2) + mul(cp - 1, mul(2, kv)) +
                          mul(5, q) + mul(5, kv) + mul(2, kv);  // cpfp8: + the contiguous k, v
  d.op.bwd_serial_kernels = static_cast<int32_t>(mul(cp, 6) + 6 + 2);
}

}  // namespace

void cp_ring_attention(OpDraft& d, const Dims& dm, int64_t q_bytes, int64_t kv_bytes,
                       int64_t out_bytes, int64_t lse_bytes) {
  if (dm.cp <= 1) return;
  const int64_t cp = dm.cp;
  d.op.fwd.flops = mul(d.op.fwd.flops, cp);
  d.op.bwd.flops = mul(d.op.bwd.flops, cp);
  // The kernel-time model reads the shape (b, heads, s, d): cp flash calls of the local length
  // each, as a batch cp times larger (kernels.cpp attention_seconds; the executor, which reads
  // dim too, refuses multi-rank graphs). The load-balanced steps after the first are
  // non-causal calls of half the pairs, which the kernels run faster than causal ones.
  // time6 (issue 11): of the cp calls per sequence, cp - 1 run without
  // the causal mask (Op::noncausal_calls, kernels.cpp attention_seconds), in both rings (torch's
  // round-robin steps after the first, _templated_ring_attention; TE's load-balanced p2p steps,
  // AttnFuncWithCPAndKVP2P: "causal" only where the step's kv is the rank's own). The flash op's
  // dims carry the causal flag at dim[5] (graph_builder.cpp op.shape).
  if (d.dim[5] != 0) d.op.noncausal_calls = mul(d.dim[0], cp - 1);
  d.dim[0] = mul(d.dim[0], cp);
  if (dm.impl && dm.impl->cp_ring == CpRing::kTorchAllGather) {  // feat2
    torch_allgather_ring(d, dm, out_bytes, kv_bytes, lse_bytes);
    (void)q_bytes;
    return;
  }
  // forward: cp kv buffers, cp partial outputs and lse, the corrected output and the fp32
  // product of its correction
  d.op.fwd_transient_bytes += mul(cp, kv_bytes + out_bytes + lse_bytes) + mul(3, out_bytes);
  // backward: dq_buffer, two (kv, dkv) pairs, and one step's dq, dk, dv
  d.op.bwd_transient_bytes += q_bytes + mul(4, kv_bytes) + q_bytes + kv_bytes;
  // the ring: cp - 1 steps of one kv chunk forward, of kv and dkv backward (send/recv on the
  // context-parallel group, overlapped with the steps' attention: sim/src/engine.cpp)
  d.op.fwd.comm_bytes = mul(cp - 1, kv_bytes);
  d.op.fwd.comm_kind = kSendRecv;
  d.op.bwd.comm_bytes = mul(cp - 1, mul(2, kv_bytes));
  d.op.bwd.comm_kind = kSendRecv;
}


// --- cptime2 (issue 11): the ring's dead torch.cat under torch.compile. In both loops of
// _templated_ring_attention(_backward) (torch/distributed/tensor/experimental/_attention.py, the
// Dec 2024 form read for feat2) every step but the last makes `next_kv = torch.cat([key.flatten(),
// value.flatten()])` and hands it to the rotater; _AllGatherRotater.exchange_buffers gathers only
// the first ("We only need to perform the allgather once": `if self._aggregated_buffer is None`)
// and drops the others. Traced into the compiled block (torchtitan 9dec370 apply_compile,
// fullgraph=True), the cats of steps 1 .. cp - 2 are nodes without users, which Inductor's
// Scheduler.dead_node_elimination removes ("Remove any nodes without users", torch/_inductor/
// scheduler.py; a cat has no side effects). Eager torch runs them: torch_allgather_ring charges
// cp - 1 cats each way (2 kv bytes and one kernel each). Under compile only the first stays.
void cp_compiled_dead_cats(Graph& g) {
  if (g.cp <= 2) return;
  const int64_t dead = g.cp - 2;
  for (Op& op : g.ops) {
    if (op.cp_gather_bytes <= 0) continue;  // torch's all-gather ring only (CpRing::kTorchAllGather)
    const int64_t kv = op.cp_gather_bytes / g.cp;  // cp_gather_bytes = cp kv (torch_allgather_ring)
    const int64_t bytes = mul(dead, mul(2, kv));
    const int32_t kernels = static_cast<int32_t>(dead);
    if (op.fwd_serial_bytes >= bytes && op.fwd_serial_kernels >= kernels)
      op.fwd_serial_bytes -= bytes, op.fwd_serial_kernels -= kernels;
    if (op.bwd_serial_bytes >= bytes && op.bwd_serial_kernels >= kernels)
      op.bwd_serial_bytes -= bytes, op.bwd_serial_kernels -= kernels;
  }
}
// --- end cptime2 ---

}  // namespace sim::detail
