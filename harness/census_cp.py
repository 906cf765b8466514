#!/usr/bin/env python3
"""cpfp8 (issue 13): what torch 1.13 on the CPU can run of torch's context-parallel ring.

torch's ring (torch/distributed/tensor/experimental/_attention.py, read at 0123248a; the API of
torch 1963fc8 that torchtitan 9dec370 calls) is DTensor dispatch around SDPA's flash kernel, an
all-gather and an all-to-all: none of that exists in torch 1.13 (no SDPA, no DTensor, no
functional collectives, one process here). What it does between the kernels is eager tensor
code that 1.13 runs: the k, v made contiguous, the flattened k, v concatenated, the gathered
buffer viewed per step, the fp32 merge of each step's output and logsumexp (sigmoid, logsigmoid,
chunk + cat partial updates) and, in backward, the fp32 accumulators, their partial updates and
the flattened dk, dv concatenation. This script re-expresses those steps (written from the
source as read, not copied) for one rank, with stand-ins for what 1.13 lacks:
  - the all-gather: a fresh buffer of cp x the concatenated k, v (the gathered bytes);
  - the flash call: fresh tensors of the flash kernel's output shapes (out in q's dtype,
    logsumexp fp32 [b, h, s_q]); the flash backward: fresh dq, dk, dv in the inputs' dtype;
  - the all-to-all of dk, dv: a fresh buffer of the sent bytes (the received one).
It records the CPU allocator (the legacy profiler's memory records, as harness/measure_torch.py)
and prints, per configuration, the peak rise of the forward ring over its inputs less its two
outputs, and of the backward ring less its three gradients: the transients sim/src/cp.cpp
declares for torch's ring. tests/test_cpfp8.cpp holds cp.cpp to the committed figures
(harness/census/cp.json). Usage: python3 harness/census_cp.py [-o harness/census/cp.json]
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F
from torch.autograd import ProfilerState


class Window:
    def __enter__(self):
        cfg = torch.autograd.ProfilerConfig(ProfilerState.CPU, False, True, False, False, False,
                                            torch._C._profiler._ExperimentalConfig())
        torch.autograd.profiler_legacy._enable_profiler_legacy(cfg)
        return self

    def __exit__(self, *exc):
        lists = torch.autograd._disable_profiler_legacy()
        # In-place adds of a 16-bit tensor into an fp32 one (`grad_key += grad_key_`) cast the
        # operand into a temporary on the CPU; CUDA's TensorIterator casts inside the kernel.
        # Those records (everything allocated and freed inside aten::add_, which makes no
        # output) are dropped: the rest is what CUDA would allocate.
        self.sizes, self.dropped = [], 0
        for rl in lists:
            stack = []
            for e in rl:
                if e.kind() == "push":
                    stack.append(e.name())
                elif e.kind() == "pop" and stack:
                    stack.pop()
                elif e.kind() == "memory_alloc":
                    if "aten::add_" in stack:
                        self.dropped += 1
                    else:
                        self.sizes.append(e.cpu_memory_usage())
        return False

    def peak(self):
        run = top = 0
        for s in self.sizes:
            run += s
            top = max(top, run)
        return top, run


def flash_stub(q, k, v):
    """The flash kernel's outputs: out like q, logsumexp fp32 [b, h, s_q]."""
    out = torch.empty_like(q, memory_format=torch.contiguous_format).fill_(0.5)
    lse = torch.zeros(q.shape[0], q.shape[1], q.shape[2], dtype=torch.float32)
    return out, lse


def flash_bwd_stub(q, k, v):
    return (torch.zeros(q.shape, dtype=q.dtype), torch.zeros(k.shape, dtype=k.dtype),
            torch.zeros(v.shape, dtype=v.dtype))


def partial_update(whole, part, idx, add):
    pieces = list(whole.chunk(2, dim=2))
    if add:
        pieces[idx] += part
    else:
        pieces[idx] = part
    return torch.cat(pieces, dim=2)


class Pending:
    """A collective in flight: holds its input until waited, its output allocated at launch."""

    def __init__(self, inp, out):
        self.inp, self.out = inp, out

    def wait(self):
        self.inp = None
        return self.out


class AllGather:
    """The all-gather rotation: one gather of the first buffer, a chunk per step after."""

    def __init__(self, cp, rank):
        self.cp, self.rank, self.idx, self.pending, self.buf = cp, rank, 0, None, None

    def exchange(self, flat):
        self.idx += 1
        if self.pending is None and self.buf is None:
            self.pending = Pending(flat, torch.cat([flat] * self.cp))

    def next(self):
        if self.pending is not None:
            self.buf, self.pending = self.pending.wait(), None
        return self.buf.chunk(self.cp)[(self.rank - self.idx) % self.cp]


class Permute:
    """The all-to-all rotation: each exchange sends the buffer and receives a fresh one."""

    def __init__(self):
        self.pending = None

    def exchange(self, flat):
        self.pending = Pending(flat, flat.clone())

    def next(self):
        out, self.pending = self.pending.wait(), None
        return out


def ring_forward(query, key, value, rank, cp):
    """One rank's forward ring (all-gather rotation, round-robin load balance, causal), with
    the source's variable lifetimes: the step's 16-bit output stays referenced through the merge
    (the caller's `out`), the concatenated k, v is held by the gather until step 1 waits."""
    key = key.contiguous()
    value = value.contiguous()
    rot = AllGather(cp, rank)
    m_out = m_lse = None  # the merger's fp32 state
    out = lse = None
    for i in range(cp):
        if i > 0:
            flat = rot.next()
            key = flat[: key.numel()].reshape(key.shape)
            value = flat[key.numel():].reshape(value.shape)
            del flat
        if i < cp - 1:
            rot.exchange(torch.cat([key.flatten(), value.flatten()]))
        if i == 0:
            q, k, v, partial = query, key, value, False
        elif i <= rank:
            q, k, v, partial = query, key.chunk(2, dim=2)[0], value.chunk(2, dim=2)[0], False
        else:
            q, k, v, partial = query.chunk(2, dim=2)[1], key, value, True
        out, lse = flash_stub(q, k, v)  # the previous step's are freed only now
        del q, k, v
        b_out = out.to(torch.float32)
        b_lse = lse.to(torch.float32).unsqueeze(-1)
        if m_lse is None:
            m_out, m_lse = b_out, b_lse
        else:
            o = m_out.chunk(2, dim=2)[1] if partial else m_out
            l_ = m_lse.chunk(2, dim=2)[1] if partial else m_lse
            o = o - torch.sigmoid(b_lse - l_) * (o - b_out)
            l_ = l_ - F.logsigmoid(l_ - b_lse)
            if partial:
                m_lse = partial_update(m_lse, l_, 1, False)
                m_out = partial_update(m_out, o, 1, False)
            else:
                m_out, m_lse = o, l_
            del o, l_
        del b_out, b_lse
    final = m_out.to(query.dtype), m_lse.squeeze(-1).to(torch.float32)
    del rot, key, value, out, lse, m_out, m_lse
    return final


def ring_backward(query, key, value, rank, cp):
    """One rank's backward ring with the source's lifetimes: k, v gathered again; fp32
    accumulators; each step's dq, dk, dv referenced until the next step's replace them; dk, dv
    sent on by a permute every step, the previous send held until its wait."""
    grad_query = torch.zeros_like(query, dtype=torch.float32)
    grad_key = torch.zeros_like(key, dtype=torch.float32)
    grad_value = torch.zeros_like(value, dtype=torch.float32)
    key = key.contiguous()
    value = value.contiguous()
    kv_rot, dkv_rot = AllGather(cp, rank), Permute()
    next_kv = next_grad_kv = None
    gq = gk = gv = None
    for i in range(cp):
        if i > 0:
            buf = kv_rot.next()
            key = buf[: key.numel()].reshape(key.shape)
            value = buf[key.numel():].reshape(value.shape)
            del buf
        if i != cp - 1:
            next_kv = torch.cat([key.flatten(), value.flatten()])  # the old one freed only now
            kv_rot.exchange(next_kv)
        if i == 0:
            q, k, v = query, key, value
        elif i <= rank:
            q, k, v = query, key.chunk(2, dim=2)[0], value.chunk(2, dim=2)[0]
        else:
            q, k, v = query.chunk(2, dim=2)[1], key, value
        gq, gk, gv = flash_bwd_stub(q, k, v)
        del q, k, v
        if i == 0:
            grad_key += gk
            grad_value += gv
        else:
            next_grad_kv = dkv_rot.next()
            grad_key = next_grad_kv[: grad_key.numel()].reshape(grad_key.shape)
            grad_value = next_grad_kv[grad_key.numel():].reshape(grad_value.shape)
            if i <= rank:
                grad_key = partial_update(grad_key, gk, 0, True)
                grad_value = partial_update(grad_value, gv, 0, True)
            else:
                grad_key += gk
                grad_value += gv
        next_grad_kv = torch.cat([grad_key.flatten(), grad_value.flatten()])
        dkv_rot.exchange(next_grad_kv)
        if i <= rank:
            grad_query += gq
        else:
            grad_query = partial_update(grad_query, gq, 1, True)
    grad_query = grad_query.to(query.dtype)
    next_grad_kv = dkv_rot.next().to(query.dtype)
    result = grad_query, next_grad_kv
    del kv_rot, dkv_rot, next_kv, gq, gk, gv, grad_key, grad_value, key, value, next_grad_kv
    return result


def measure(b, h, hkv, s, d, cp, rank, dtype):
    torch.manual_seed(0)
    # torchtitan's q, k, v: [b, s, h, d] in memory, handed to SDPA transposed ([b, h, s, d]
    # views); hkv < h: k, v with fewer heads than q (to separate the q and kv terms)
    q = torch.randn(b, s, h, d).to(dtype).transpose(1, 2)
    k = torch.randn(b, s, hkv, d).to(dtype).transpose(1, 2)
    v = torch.randn(b, s, hkv, d).to(dtype).transpose(1, 2)
    qb = q.numel() * q.element_size()
    kvb = 2 * k.numel() * k.element_size()
    lseb = b * h * s * 4
    with Window() as w:
        out, lse = ring_forward(q, k, v, rank, cp)
    fwd_peak, fwd_end = w.peak()
    del out, lse
    with Window() as wb:
        res = ring_backward(q, k, v, rank, cp)
    bwd_peak, bwd_end = wb.peak()
    del res
    return {
        "b": b, "heads": h, "kv_heads": hkv, "s_local": s, "head_dim": d, "cp": cp, "rank": rank,
        "dtype": str(dtype).replace("torch.", ""), "q_bytes": qb, "kv_bytes": kvb,
        "lse_bytes": lseb,
        # the forward's transients: its peak rise less its two outputs (out, lse)
        "fwd_peak_rise": fwd_peak, "fwd_end": fwd_end, "fwd_transient": fwd_peak - (qb + lseb),
        # the backward's: its peak rise less its gradients (dq, and dk, dv as one buffer)
        "bwd_peak_rise": bwd_peak, "bwd_end": bwd_end, "bwd_transient": bwd_peak - (qb + kvb),
        "cpu_only_records_dropped": w.dropped + wb.dropped,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for cp in (2, 4, 8):
        for hkv in (4, 2, 1):
            rows.append(measure(1, 4, hkv, 64, 16, cp, cp - 1, torch.bfloat16))
    text = json.dumps({"rows": rows}, indent=1, sort_keys=True) + "\n"
    if a.output:
        open(a.output, "w").write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
