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
#include "ops.hpp"

namespace sim::detail {

void cp_ring_attention(OpDraft& d, const Dims& dm, int64_t q_bytes, int64_t kv_bytes,
                       int64_t out_bytes, int64_t lse_bytes) {
  if (dm.cp <= 1) return;
  const int64_t cp = dm.cp;
  d.op.fwd.flops = mul(d.op.fwd.flops, cp);
  d.op.bwd.flops = mul(d.op.bwd.flops, cp);
  // The kernel-time model reads the shape (b, heads, s, d): cp flash calls of the local length
  // each, as a batch cp times larger (kernels.cpp attention_seconds; the executor, which reads
  // dim too, refuses multi-rank graphs).
  d.dim[0] = mul(d.dim[0], cp);
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

}  // namespace sim::detail
