"""Models the project writes itself, for the tests of harness/measure_torch.py.

mlp_chain: n blocks of Linear(d, f) -> ReLU -> Linear(f, d), no biases, on an input [b, d] that
needs no gradient, loss = output.sum(). Small enough that every byte of its step can be derived
by hand (tests/measure_torch.cmake does, op by op).

small_gpt: a pre-LayerNorm GPT (learned positions, fused QKV, causal softmax attention as
explicit ops, GELU MLP, tied embeddings, cross-entropy) in a few lines, for strategy ordering.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class MlpBlock(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.up = nn.Linear(d, f, bias=False)
        self.down = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


class MlpChain(nn.Module):
    def __init__(self, n, d, f):
        super().__init__()
        self.blocks = nn.ModuleList([MlpBlock(d, f) for _ in range(n)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def mlp_chain(n=4, batch=1024, d=16, f=64):
    torch.manual_seed(0)
    model = MlpChain(n, d, f)
    return {"model": model, "blocks": list(model.blocks),
            "loss_fn": lambda m, x: m(x).sum(), "inputs": torch.randn(batch, d)}


class GptBlock(nn.Module):
    def __init__(self, h, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.fc, self.out = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=2)
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(h // self.heads)
        mask = torch.ones(s, s, dtype=torch.bool).triu(1)
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, h)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class SmallGpt(nn.Module):
    def __init__(self, layers, h, heads, vocab, seq):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, h), nn.Embedding(seq, h)
        self.blocks = nn.ModuleList([GptBlock(h, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(h)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.ln(x) @ self.wte.weight.t()


def small_gpt(layers=4, h=32, heads=2, vocab=64, batch=8, seq=64):
    torch.manual_seed(0)
    model = SmallGpt(layers, h, heads, vocab, seq)
    idx = torch.randint(0, vocab, (batch, seq))
    tgt = torch.randint(0, vocab, (batch, seq))

    def loss_fn(m, inputs):
        logits = m(inputs[0])
        return F.cross_entropy(logits.view(-1, vocab), inputs[1].view(-1))
    return {"model": model, "blocks": list(model.blocks), "loss_fn": loss_fn,
            "inputs": (idx, tgt)}


def broken_builder():
    raise ValueError("this builder fails on purpose")


def not_a_model():
    return {"model": 3, "blocks": [], "loss_fn": None, "inputs": None}


_KEPT = []


def leaky_mlp():
    """mlp_chain whose loss_fn keeps every output alive: the step's sum does not return to 0."""
    spec = mlp_chain(n=2, batch=64)

    def loss_fn(m, x):
        out = m(x)
        _KEPT.append(out)
        return out.sum()
    spec["loss_fn"] = loss_fn
    return spec
