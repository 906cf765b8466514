#!/usr/bin/env python3
"""fp8sac (issue 10): what AOTAutograd's min-cut partitioner saves for a torchtitan-style Llama
block, against what the same block saves in eager mode, on torch 1.13's CPU (functorch.compile:
aot_function + min_cut_rematerialization_partition, the partitioner torch.compile uses).

The block is written here from torchtitan's Llama (torchtitan/models/llama/model.py and
norms.py @ 9dec370): RMSNorm as `_norm(x.float()).type_as(x) * weight`, wq/wk/wv, rope through
view_as_complex(x.float()), attention, wo, residual, RMSNorm, w2(silu(w1 x) * w3 x), residual.
Attention is the math path (torch 1.13 has no SDPA): matmul, softmax, matmul. No selective AC:
this measures the partitioner on a plain compiled block (what compile changes outside a SAC
region), which actsim does not model (docs/memory-model.md "torch.compile").

Prints, per token of one block, the bytes of the tensors saved for backward beyond the block's
inputs and parameters: eager (saved_tensors_hooks, distinct storages) and partitioned (the
forward graph's outputs after the block output, distinct storages).
Usage: python3 harness/compile_partition.py [--dtype fp32|bf16]
"""
import argparse
import sys

import torch


def block_fn(h, heads, head_dim, f):
    def rms(x, w):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)
        return y.type_as(x) * w

    def rope(x, freqs):
        # torchtitan's complex product written in real arithmetic (torch 1.13's partitioner
        # does not size complex64): the same fp32 upcast and pointwise chain
        cos, sin = freqs
        xf = x.float().reshape(*x.shape[:-1], -1, 2)
        x1, x2 = xf[..., 0], xf[..., 1]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(3).type_as(x)

    def fn(x, freqs, wn1, wq, wk, wv, wo, wn2, w1, w2, w3):
        b, s, _ = x.shape
        a = rms(x, wn1)
        q = (a @ wq.t()).view(b, s, heads, head_dim)
        k = (a @ wk.t()).view(b, s, heads, head_dim)
        v = (a @ wv.t()).view(b, s, heads, head_dim)
        q, k = rope(q, freqs), rope(k, freqs)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / head_dim ** 0.5
        p = torch.softmax(scores.float(), dim=-1).type_as(q)
        o = (p @ v).transpose(1, 2).reshape(b, s, h)
        x = x + o @ wo.t()
        m = rms(x, wn2)
        return x + (torch.nn.functional.silu(m @ w1.t()) * (m @ w3.t())) @ w2.t()
    return fn


def nbytes(t):
    return t.numel() * t.element_size()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    args = ap.parse_args()
    try:
        from functorch.compile import aot_function, min_cut_rematerialization_partition
    except ImportError as e:
        sys.exit("compile_partition.py: functorch.compile is not importable: %s" % e)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dt = torch.float32 if args.dtype == "fp32" else torch.bfloat16
    b, s, h, heads, f = 2, 64, 128, 4, 344
    hd = h // heads
    fn0 = block_fn(h, heads, hd, f)
    fn = lambda x, cos, sin, *p: fn0(x, (cos, sin), *p)
    x = torch.randn(b, s, h, dtype=dt, requires_grad=True)
    ang = torch.randn(s, hd // 2)
    cos, sin = ang.cos().view(1, s, 1, hd // 2), ang.sin().view(1, s, 1, hd // 2)
    shapes = [(h,), (h, h), (h, h), (h, h), (h, h), (h,), (f, h), (h, f), (f, h)]
    params = [(torch.randn(*sh, dtype=dt) * 0.05).requires_grad_() for sh in shapes]
    inputs = [x, cos, sin] + params
    excluded = {t.data_ptr() for t in inputs}

    saved = {}
    def pack(t):
        if t.data_ptr() not in excluded:
            saved[t.data_ptr()] = max(saved.get(t.data_ptr(), 0), t.untyped_storage().nbytes()
                                      if hasattr(t, "untyped_storage") else t.storage().nbytes())
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*inputs)
    eager = sum(saved.values())
    out.sum().backward()

    part = {}
    def fw_compiler(gm, example):
        def run(*a):
            res = gm(*a)
            seen = set()
            tot = 0
            for t in res[1:]:
                if isinstance(t, torch.Tensor) and t.data_ptr() not in excluded \
                        and t.data_ptr() not in seen:
                    seen.add(t.data_ptr())
                    tot += nbytes(t)
            part["bytes"] = tot
            part["n"] = len(res) - 1
            return res
        return run
    compiled = aot_function(fn, fw_compiler=fw_compiler, bw_compiler=lambda gm, ex: gm,
                            partition_fn=min_cut_rematerialization_partition)
    out2 = compiled(*inputs)
    out2.sum().backward()
    tokens = b * s
    print("dtype %s, h %d, heads %d, f %d, %d tokens" % (args.dtype, h, heads, f, tokens))
    print("eager saved:       %8d B = %7.1f B/token" % (eager, eager / tokens))
    print("partitioned saved: %8d B = %7.1f B/token (%d tensors)"
          % (part["bytes"], part["bytes"] / tokens, part["n"]))


if __name__ == "__main__":
    main()
