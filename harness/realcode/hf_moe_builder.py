"""A small Mixtral causal LM written from transformers' modeling_mixtral.py (@ 00d4b3d2142c:
MixtralRMSNorm, MixtralAttention with eager_attention_forward, apply_rotary_pos_emb, repeat_kv,
MixtralSparseMoeBlock with its loop over the experts hit, MixtralBlockSparseTop2MLP) and the
loss as HF computes it (logits.float(), cross entropy), for harness/measure_torch.py: the real
op sequence of HF's MoE layer on the CPU in fp32. `dense=True` swaps each MoE layer for
Mistral's SwiGLU MLP of the same width (a difference of the two isolates the MoE layer);
`qwen=True` is Qwen2-MoE's block instead (modeling_qwen2_moe.py Qwen2MoeSparseMoeBlock: top-k
weights not renormalized, a shared expert scaled by sigmoid(shared_expert_gate(x)); q/k/v biases).

Written from the source, not copied: the forward passes below perform the same torch calls in
the same order (their saves are what autograd records). The matching HF config is written by
`config_json` (tests/measure_torch.cmake feeds it to actsim).
"""
import json

import torch
import torch.nn as nn
import torch.nn.functional as F

DIMS = dict(hidden=64, layers=2, heads=4, kv_heads=2, ffn=96, vocab=128, experts=4, top_k=2,
            positions=256, shared=80)


class RMSNorm(nn.Module):
    def __init__(self, h, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return self.weight * x.to(dt)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, n):
    b, g, s, d = x.shape
    if n == 1:
        return x
    return x[:, :, None, :, :].expand(b, g, n, s, d).reshape(b, g * n, s, d)


class Attention(nn.Module):
    def __init__(self, h, a, g, bias=False):
        super().__init__()
        self.a, self.g, self.d = a, g, h // a
        self.q_proj = nn.Linear(h, a * self.d, bias=bias)
        self.k_proj = nn.Linear(h, g * self.d, bias=bias)
        self.v_proj = nn.Linear(h, g * self.d, bias=bias)
        self.o_proj = nn.Linear(a * self.d, h, bias=False)

    def forward(self, x, cos, sin, mask):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, -1, self.d).transpose(1, 2)
        k = self.k_proj(x).view(b, s, -1, self.d).transpose(1, 2)
        v = self.v_proj(x).view(b, s, -1, self.d).transpose(1, 2)
        c, sn = cos.unsqueeze(1), sin.unsqueeze(1)
        q = (q * c) + (rotate_half(q) * sn)
        k = (k * c) + (rotate_half(k) * sn)
        k, v = repeat_kv(k, self.a // self.g), repeat_kv(v, self.a // self.g)
        w = torch.matmul(q, k.transpose(2, 3)) * self.d ** -0.5
        w = w + mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        o = torch.matmul(w, v).transpose(1, 2).contiguous()
        return self.o_proj(o.reshape(b, s, -1))


class Expert(nn.Module):  # MixtralBlockSparseTop2MLP
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)
        self.w3 = nn.Linear(h, f, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class SparseMoe(nn.Module):  # MixtralSparseMoeBlock (qwen: Qwen2MoeSparseMoeBlock)
    def __init__(self, h, f, e, k, qwen=False, shared=0):
        super().__init__()
        self.e, self.k, self.qwen = e, k, qwen
        self.gate = nn.Linear(h, e, bias=False)
        self.experts = nn.ModuleList([Expert(h, f) for _ in range(e)])
        if qwen:
            self.shared_expert = Mlp(h, shared)
            self.shared_expert_gate = nn.Linear(h, 1, bias=False)

    def forward(self, hidden):
        b, s, h = hidden.shape
        hidden = hidden.view(-1, h)
        logits = self.gate(hidden)
        rw = F.softmax(logits, dim=1, dtype=torch.float)
        rw, sel = torch.topk(rw, self.k, dim=-1)
        if not self.qwen:  # Mixtral renormalizes; Qwen1.5-MoE's norm_topk_prob is false
            rw /= rw.sum(dim=-1, keepdim=True)
        rw = rw.to(hidden.dtype)
        out = torch.zeros((b * s, h), dtype=hidden.dtype, device=hidden.device)
        mask = F.one_hot(sel, num_classes=self.e).permute(2, 1, 0)
        hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
        for e in hit:
            idx, top_x = torch.where(mask[e].squeeze(0))
            cur = hidden[None, top_x].reshape(-1, h)
            y = self.experts[e](cur) * rw[top_x, idx, None]
            out.index_add_(0, top_x, y.to(hidden.dtype))
        if self.qwen:
            sh = self.shared_expert(hidden)
            sh = F.sigmoid(self.shared_expert_gate(hidden)) * sh
            out = out + sh
        return out.reshape(b, s, h)


class Mlp(nn.Module):  # MistralMLP
    def __init__(self, h, f):
        super().__init__()
        self.gate_proj = nn.Linear(h, f, bias=False)
        self.up_proj = nn.Linear(h, f, bias=False)
        self.down_proj = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, d, dense, qwen=False):
        super().__init__()
        h = d["hidden"]
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(h), RMSNorm(h)
        self.self_attn = Attention(h, d["heads"], d["kv_heads"], bias=qwen)
        self.mlp = Mlp(h, d["ffn"]) if dense else SparseMoe(h, d["ffn"], d["experts"], d["top_k"],
                                                            qwen, d["shared"])
        self.ctx = None

    def forward(self, x):
        cos, sin, mask = self.ctx
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Model(nn.Module):
    def __init__(self, d, dense, qwen=False):
        super().__init__()
        self.d = d
        self.embed_tokens = nn.Embedding(d["vocab"], d["hidden"])
        self.layers = nn.ModuleList([Layer(d, dense, qwen) for _ in range(d["layers"])])
        self.norm = RMSNorm(d["hidden"])
        self.lm_head = nn.Linear(d["hidden"], d["vocab"], bias=False)

    def forward(self, ids):
        b, s = ids.shape
        x = self.embed_tokens(ids)
        hd = self.d["hidden"] // self.d["heads"]
        inv = 1.0 / (1e6 ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
        pos = torch.arange(s).float()
        freqs = (inv[None, :, None].expand(b, -1, 1) @ pos[None, None, :].expand(b, 1, s)).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        mask = torch.full((s, s), float("-inf")).triu(1)[None, None]
        for layer in self.layers:
            layer.ctx = (cos, sin, mask)
            x = layer(x)
            layer.ctx = None
        return self.lm_head(self.norm(x))


def config_json(dense=False, qwen=False, **over):
    d = dict(DIMS, **over)
    c = {"model_type": "mistral" if dense else "qwen2_moe" if qwen else "mixtral", "hidden_size": d["hidden"],
         "num_hidden_layers": d["layers"], "num_attention_heads": d["heads"],
         "num_key_value_heads": d["kv_heads"], "intermediate_size": d["ffn"],
         "vocab_size": d["vocab"], "max_position_embeddings": d["positions"],
         "tie_word_embeddings": False, "hidden_act": "silu", "rms_norm_eps": 1e-5}
    if qwen:
        c.update(num_experts=d["experts"], num_experts_per_tok=d["top_k"],
                 moe_intermediate_size=d["ffn"], shared_expert_intermediate_size=d["shared"],
                 norm_topk_prob=False)
    elif not dense:
        c.update(num_local_experts=d["experts"], num_experts_per_tok=d["top_k"])
    return json.dumps(c, indent=1, sort_keys=True)


def build(batch=2, seq=32, dense=False, qwen=False, **over):
    torch.manual_seed(0)
    d = dict(DIMS, **over)
    model = Model(d, dense, qwen).train()
    ids = torch.randint(0, d["vocab"], (batch, seq))
    labels = torch.randint(0, d["vocab"], (batch, seq))

    def loss_fn(m, inp):
        logits = m(inp[0]).float()
        return F.cross_entropy(logits.view(-1, d["vocab"]), inp[1].view(-1))

    return {"model": model, "blocks": list(model.layers), "loss_fn": loss_fn,
            "inputs": (ids, labels)}


if __name__ == "__main__":  # writes the two HF configs: python3 hf_moe_builder.py DIR
    import os
    import sys
    for dense, qwen, name in ((False, False, "hf-moe-small.json"),
                              (True, False, "hf-moe-small-dense.json"),
                              (False, True, "hf-moe-small-qwen.json")):
        with open(os.path.join(sys.argv[1], name), "w") as fh:
            fh.write(config_json(dense, qwen) + "\n")
