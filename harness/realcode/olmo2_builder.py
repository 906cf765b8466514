"""A harness/measure_torch.py builder: OLMo 2 as HF transformers' modeling code runs it in eager
mode, written for torch 1.13 from the source read (transformers is not installed here; no line
of it is copied): huggingface/transformers src/transformers/models/olmo2/modeling_olmo2.py
@ 000c33fdfde1 (Olmo2RMSNorm, Olmo2Attention, eager_attention_forward, Olmo2MLP,
Olmo2DecoderLayer) with the rotary tables computed once per forward and shared by the layers,
and loss_utils.py ForCausalLMLoss. The Trainer keeps only the loss.

Per layer, as the source has it:
  h = x + post_attention_layernorm(o_proj(eager(rope(q_norm(q_proj(x)), k_norm(k_proj(x)),
                                                   v_proj(x)))))
  out = h + post_feedforward_layernorm(down(silu(gate(h)) * up(h)))
  Olmo2RMSNorm: x32 = x.to(fp32); x32 * rsqrt(x32.pow(2).mean(-1) + eps); (w * .).to(dtype)
  rope (this version): q_embed = (q * cos) + (rotate_half(q) * sin), cast back to q's dtype
"""
import torch
from torch import nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, n, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return (self.weight * x).to(dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, h, a, g, d):
        super().__init__()
        self.a, self.g, self.d = a, g, d
        self.scaling = d ** -0.5
        self.q_proj = nn.Linear(h, a * d, bias=False)
        self.k_proj = nn.Linear(h, g * d, bias=False)
        self.v_proj = nn.Linear(h, g * d, bias=False)
        self.o_proj = nn.Linear(a * d, h, bias=False)
        self.q_norm = RMSNorm(a * d)
        self.k_norm = RMSNorm(g * d)

    def forward(self, x, mask, cos, sin):
        b, s, _ = x.shape
        q = self.q_norm(self.q_proj(x)).view(b, s, -1, self.d).transpose(1, 2)
        k = self.k_norm(self.k_proj(x)).view(b, s, -1, self.d).transpose(1, 2)
        v = self.v_proj(x).view(b, s, -1, self.d).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        qt, kt = q.dtype, k.dtype
        q = ((q * cos) + (rotate_half(q) * sin)).to(qt)
        k = ((k * cos) + (rotate_half(k) * sin)).to(kt)
        if self.g != self.a:  # repeat_kv
            n = self.a // self.g
            k = k[:, :, None].expand(b, self.g, n, s, self.d).reshape(b, self.a, s, self.d)
            v = v[:, :, None].expand(b, self.g, n, s, self.d).reshape(b, self.a, s, self.d)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling
        w = w + mask[:, :, :, : k.shape[-2]]
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).contiguous()
        return self.o_proj(out.reshape(b, s, -1).contiguous())


class Layer(nn.Module):
    def __init__(self, h, a, g, d, f):
        super().__init__()
        self.self_attn = Attention(h, a, g, d)
        self.gate_proj = nn.Linear(h, f, bias=False)
        self.up_proj = nn.Linear(h, f, bias=False)
        self.down_proj = nn.Linear(f, h, bias=False)
        self.post_attention_layernorm = RMSNorm(h)
        self.post_feedforward_layernorm = RMSNorm(h)

    def forward(self, x, mask, cos, sin):
        x = x + self.post_attention_layernorm(self.self_attn(x, mask, cos, sin))
        mlp = self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return x + self.post_feedforward_layernorm(mlp)


class Olmo2ForCausalLM(nn.Module):
    def __init__(self, h, layers, a, g, f, v):
        super().__init__()
        d = h // a
        self.embed_tokens = nn.Embedding(v, h)
        self.layers = nn.ModuleList([Layer(h, a, g, d, f) for _ in range(layers)])
        self.norm = RMSNorm(h)
        self.lm_head = nn.Linear(h, v, bias=False)
        inv = 1.0 / (500000.0 ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
        self.register_buffer("inv_freq", inv, persistent=False)

    def forward(self, ids, labels):
        x = self.embed_tokens(ids)
        b, s = ids.shape
        with torch.no_grad():
            pos = torch.arange(s)[None, :].float()
            freqs = (self.inv_freq[None, :, None].expand(b, -1, 1) @ pos[:, None, :].expand(b, 1, s)
                     ).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos(), emb.sin()
        mask = torch.full((s, s), torch.finfo(x.dtype).min, dtype=x.dtype).triu(1)
        mask = mask[None, None, :, :].expand(b, 1, -1, -1)
        for layer in self.layers:
            x = layer(x, mask, cos, sin)
        logits = self.lm_head(self.norm(x)).float()
        labels = F.pad(labels, (0, 1), value=-100)[..., 1:].contiguous()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1),
                               ignore_index=-100)


def build(hidden=256, layers=4, heads=4, kv_heads=4, intermediate=688, vocab=4096, batch=4,
          seq=256, seed=0):
    torch.manual_seed(seed)
    model = Olmo2ForCausalLM(hidden, layers, heads, kv_heads, intermediate, vocab)
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, vocab, (batch, seq), generator=g)
    y = torch.randint(0, vocab, (batch, seq), generator=g)

    def loss_fn(m, inputs):
        return m(inputs[0], inputs[1])
    return {"model": model, "blocks": list(model.layers), "loss_fn": loss_fn, "inputs": (x, y)}
