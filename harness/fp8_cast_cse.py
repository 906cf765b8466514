#!/usr/bin/env python3
"""time8 (issue 11): AOTAutograd's min-cut partitioner runs fx_graph_cse on the joint graph, so
three Float8 linears casting one input (q, k, v) share one amax and one cast when compiled.
A torchao-style tensorwise cast (torch.max(torch.abs(x)), a scale, x.float() * scale, clamp,
cast back; float8 dtypes are not in torch 1.13, bf16 stands in) applied three times to one input
before three matmuls, partitioned by torch 1.13's min_cut_rematerialization_partition on the CPU.
Prints the forward graph's op counts and exits 1 unless abs and max appear once.
Usage: /usr/bin/python3 harness/fp8_cast_cse.py"""
import sys
from collections import Counter

import torch
from functorch.compile import aot_function, min_cut_rematerialization_partition


def cast(x):
    s = 448.0 / torch.clamp(torch.max(torch.abs(x)).to(torch.float64), min=1e-12)
    return (x.to(torch.float32) * s.to(torch.float32)).clamp(-448, 448).to(torch.bfloat16)


def f(x, wq, wk, wv):
    return cast(x) @ wq + cast(x) @ wk + cast(x) @ wv


graphs = []


def keep(g, _):
    graphs.append(g)
    return g


x = torch.randn(8, 16, dtype=torch.bfloat16, requires_grad=True)
w = [torch.randn(16, 16, dtype=torch.bfloat16, requires_grad=True) for _ in range(3)]
aot_function(f, fw_compiler=keep, bw_compiler=keep,
             partition_fn=min_cut_rematerialization_partition)(x, *w).sum().backward()
ops = Counter(str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function")
print(dict(ops))
sys.exit(0 if ops["aten.abs.default"] == 1 and ops["aten.max.default"] == 1 else 1)
