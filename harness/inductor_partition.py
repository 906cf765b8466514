#!/usr/bin/env python3
"""inductor (issue 10): what torch 1.13's AOTAutograd min-cut partitioner saves per block when
Inductor compiles it (min_cut_rematerialization_partition(compiler="inductor"), the partition
torchinductor's compile_fx uses), measured on the CPU; tests/test_inductor.cpp holds actsim's
min-cut (sim/src/inductor.cpp) to these figures.

Blocks (written here from the sources; no third-party code is run):
  llama: torchtitan's Llama block (torchtitan models/llama/model.py @ 9dec370, as in
         harness/compile_partition.py) with actsim's math attention in place of SDPA (torch 1.13
         has none): q k^T / sqrt(d), causal masked_fill, softmax in the block's dtype, p v;
  gpt2:  a GPT-2 block with nn.GELU (exact): LayerNorm, fused qkv linear, causal math attention
         (masked_fill, softmax), output proj, residual, LayerNorm, fc, gelu, proj, residual.
Per block and dtype it records the bytes of the tensors the forward graph hands the backward
beyond the block's inputs (x, the rotary tables, the causal mask) and parameters (distinct
storages), and eager's saved bytes
(saved_tensors_hooks, distinct storages).
Usage: python3 harness/inductor_partition.py -o harness/inductor/partition.json
(tests/census.cmake `census.inductor_regenerate` re-runs it and diffs against the committed file.)
"""
import functools
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

B, S, H, HEADS, F_LLAMA = 2, 64, 128, 4, 344


def llama_block(h, heads, head_dim, f):
    def rms(x, w):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)
        return y.type_as(x) * w

    def rope(x, freqs):
        # torchtitan's complex product in real arithmetic (compile_partition.py's note)
        cos, sin = freqs
        xf = x.float().reshape(*x.shape[:-1], -1, 2)
        x1, x2 = xf[..., 0], xf[..., 1]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(3).type_as(x)

    def fn(x, cos, sin, mask, wn1, wq, wk, wv, wo, wn2, w1, w2, w3):
        b, s, _ = x.shape
        a = rms(x, wn1)
        q = (a @ wq.t()).view(b, s, heads, head_dim)
        k = (a @ wk.t()).view(b, s, heads, head_dim)
        v = (a @ wv.t()).view(b, s, heads, head_dim)
        q, k = rope(q, (cos, sin)), rope(k, (cos, sin))
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / head_dim ** 0.5
        p = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        o = (p @ v).transpose(1, 2).reshape(b, s, h)
        x = x + o @ wo.t()
        m = rms(x, wn2)
        return x + (torch.nn.functional.silu(m @ w1.t()) * (m @ w3.t())) @ w2.t()
    return fn


def gpt2_block(h, heads):
    hd = h // heads

    def fn(x, mask, g1, b1, wqkv, bqkv, wo, bo, g2, b2, w1, bb1, w2, bb2):
        b, s, _ = x.shape
        a = torch.nn.functional.layer_norm(x, (h,), g1, b1)
        q, k, v = torch.nn.functional.linear(a, wqkv, bqkv).split(h, dim=2)
        q = q.view(b, s, heads, hd).transpose(1, 2)
        k = k.view(b, s, heads, hd).transpose(1, 2)
        v = v.view(b, s, heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(mask, float("-inf"))
        att = torch.softmax(att, dim=-1)
        o = (att @ v).transpose(1, 2).contiguous().view(b, s, h)
        x = x + torch.nn.functional.linear(o, wo, bo)
        m = torch.nn.functional.layer_norm(x, (h,), g2, b2)
        u = torch.nn.functional.gelu(torch.nn.functional.linear(m, w1, bb1))
        return x + torch.nn.functional.linear(u, w2, bb2)
    return fn


def case(name, dt):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(B, S, H, dtype=dt, generator=g).requires_grad_()
    if name == "llama":
        hd = H // HEADS
        fn = llama_block(H, HEADS, hd, F_LLAMA)
        ang = torch.randn(S, hd // 2, generator=g)
        extra = [ang.cos().view(1, S, 1, hd // 2), ang.sin().view(1, S, 1, hd // 2),
                 torch.ones(S, S, dtype=torch.bool).triu(1).view(1, 1, S, S)]
        shapes = [(H,), (H, H), (H, H), (H, H), (H, H), (H,), (F_LLAMA, H), (H, F_LLAMA),
                  (F_LLAMA, H)]
    else:
        fn = gpt2_block(H, HEADS)
        extra = [torch.ones(S, S, dtype=torch.bool).triu(1).view(1, 1, S, S)]
        f = 4 * H
        shapes = [(H,), (H,), (3 * H, H), (3 * H,), (H, H), (H,), (H,), (H,), (f, H), (f,),
                  (H, f), (H,)]
    params = [(torch.randn(*sh, dtype=dt, generator=g) * 0.05).requires_grad_() for sh in shapes]
    inputs = [x] + extra + params
    excluded = {t.data_ptr() for t in inputs}

    saved = {}

    def pack(t):
        if t.data_ptr() not in excluded:
            saved[t.data_ptr()] = max(saved.get(t.data_ptr(), 0), t.storage().nbytes())
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*inputs)
    out.sum().backward()

    from functorch.compile import aot_function, min_cut_rematerialization_partition
    got = {}

    def fw_compiler(gm, example):
        def run(*a):
            res = gm(*a)
            seen, tot, rows = set(), 0, []
            for t in res[1:]:
                if isinstance(t, torch.Tensor) and t.data_ptr() not in excluded \
                        and t.data_ptr() not in seen:
                    seen.add(t.data_ptr())
                    tot += t.storage().nbytes()
                    rows.append([list(t.shape), str(t.dtype).replace("torch.", ""),
                                 t.storage().nbytes()])
            got["bytes"], got["tensors"] = tot, rows
            return res
        return run
    part = functools.partial(min_cut_rematerialization_partition, compiler="inductor")
    compiled = aot_function(fn, fw_compiler=fw_compiler, bw_compiler=lambda gm, ex: gm,
                            partition_fn=part)
    compiled(*inputs).sum().backward()
    return {"block": name, "dtype": "bf16" if dt == torch.bfloat16 else "fp32",
            "eager_saved_bytes": sum(saved.values()), "partitioned_saved_bytes": got["bytes"],
            "partitioned_saved": got["tensors"]}


def main():
    import argparse
    import warnings
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", "--output", default="-", help="JSON file (default: stdout)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    try:
        import functorch.compile  # noqa: F401
        import networkx  # noqa: F401
    except ImportError as e:  # exit 77: the census tests' skip code
        sys.stderr.write("inductor_partition.py: functorch.compile or networkx is not importable: "
                         "%s: skipped\n" % e)
        sys.exit(77)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rows = [case(n, dt) for n in ("llama", "gpt2") for dt in (torch.bfloat16, torch.float32)]
    doc = {"torch": torch.__version__, "partitioner": "functorch min_cut_rematerialization_partition"
           " (compiler=inductor)", "batch": B, "seq": S, "hidden": H, "heads": HEADS,
           "llama_ffn": F_LLAMA, "gpt2_ffn": 4 * H, "cases": rows}
    out = sys.stdout if args.output == "-" else open(args.output, "w")
    json.dump(doc, out, indent=1)
    out.write("\n")
    if out is not sys.stdout:
        out.close()


if __name__ == "__main__":
    main()
