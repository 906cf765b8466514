"""A harness/measure_torch.py builder: GPT-NeoX (Pythia) as HF transformers' modeling code runs
it in eager mode, written for torch 1.13 from the source read (transformers is not installed
here, and its newest modeling code needs a newer torch; no line of it is copied):
huggingface/transformers src/transformers/models/gpt_neox/modular_gpt_neox.py @ 00dcc6dda6f6
(GPTNeoXLayer, GPTNeoXAttention, eager_attention_forward, apply_rotary_pos_emb, GPTNeoXMLP)
with LlamaRotaryEmbedding (cos and sin computed once per forward and shared by the layers) and
the loss of loss_utils.py ForCausalLMLoss (logits.float(), labels padded and shifted, mean
cross entropy). The Trainer's step keeps only the loss (its compute_loss returns the loss, the
model output and its logits are dropped), so loss_fn returns the loss alone.

The op sequence, per layer, as the source has it:
  attn = dense(eager(rope(qkv(ln1(x)))))   qkv: Linear(h, 3h).view(b, s, a, 3d).transpose(1, 2)
                                           chunked into q, k, v (views)
  rope: q_rot = q[..., :rd]; q_emb = q_rot * cos + rotate_half(q_rot) * sin;
        q = cat([q_emb, q[..., rd:]], -1) (same for k)
  eager: w = matmul(q, k^T) * scaling; w = w + mask; softmax(w, -1, float32).to(q.dtype);
         out = matmul(w, v).transpose(1, 2).contiguous(); reshape(b, s, h)
  mlp = dense_4h_to_h(gelu(dense_h_to_4h(ln2(x))))
  x = mlp + attn + x                       (use_parallel_residual; else sequential)
"""
import math

import torch
from torch import nn
import torch.nn.functional as F


class Config:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Rotary(nn.Module):
    def __init__(self, dim, base):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        pos = position_ids[:, None, :].float()
        freqs = (inv @ pos).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.head_size = c.hidden_size // c.num_attention_heads
        self.rotary_ndims = int(self.head_size * c.rotary_pct)
        self.scaling = self.head_size ** -0.5
        self.query_key_value = nn.Linear(c.hidden_size, 3 * c.hidden_size, bias=True)
        self.dense = nn.Linear(c.hidden_size, c.hidden_size, bias=True)

    def forward(self, x, mask, cos, sin):
        b, s, _ = x.shape
        qkv = self.query_key_value(x).view(b, s, -1, 3 * self.head_size).transpose(1, 2)
        q, k, v = qkv.chunk(3, dim=-1)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        rd = cos.shape[-1]
        q_rot, q_pass = q[..., :rd], q[..., rd:]
        k_rot, k_pass = k[..., :rd], k[..., rd:]
        q = torch.cat([(q_rot * cos) + (rotate_half(q_rot) * sin), q_pass], dim=-1)
        k = torch.cat([(k_rot * cos) + (rotate_half(k_rot) * sin), k_pass], dim=-1)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling
        w = w + mask[:, :, :, : k.shape[-2]]
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).contiguous()
        return self.dense(out.reshape(b, s, -1).contiguous())


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense_h_to_4h = nn.Linear(c.hidden_size, c.intermediate_size)
        self.dense_4h_to_h = nn.Linear(c.intermediate_size, c.hidden_size)

    def forward(self, x):
        return self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(x)))  # ACT2FN["gelu"]


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.parallel = c.use_parallel_residual
        self.input_layernorm = nn.LayerNorm(c.hidden_size, eps=1e-5)
        self.post_attention_layernorm = nn.LayerNorm(c.hidden_size, eps=1e-5)
        self.attention = Attention(c)
        self.mlp = MLP(c)

    def forward(self, x, mask, cos, sin):
        attn = self.attention(self.input_layernorm(x), mask, cos, sin)
        if self.parallel:
            mlp = self.mlp(self.post_attention_layernorm(x))
            return mlp + attn + x
        attn = attn + x
        return self.mlp(self.post_attention_layernorm(attn)) + attn


class GPTNeoXForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed_in = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([Layer(c) for _ in range(c.num_hidden_layers)])
        self.final_layer_norm = nn.LayerNorm(c.hidden_size, eps=1e-5)
        head = c.hidden_size // c.num_attention_heads
        self.rotary_emb = Rotary(int(head * c.rotary_pct), 10000)
        self.embed_out = nn.Linear(c.hidden_size, c.vocab_size, bias=False)

    def forward(self, ids, labels):
        x = self.embed_in(ids)  # emb_dropout: p = hidden_dropout = 0
        b, s = ids.shape
        pos = torch.arange(s).unsqueeze(0)
        # the 4-D additive causal mask of the eager path, [b, 1, s, s] (an expanded [s, s])
        mask = torch.full((s, s), torch.finfo(x.dtype).min, dtype=x.dtype).triu(1)
        mask = mask[None, None, :, :].expand(b, 1, -1, -1)
        cos, sin = self.rotary_emb(x, pos)
        for layer in self.layers:
            x = layer(x, mask, cos, sin)
        logits = self.embed_out(self.final_layer_norm(x)).float()
        labels = F.pad(labels, (0, 1), value=-100)[..., 1:].contiguous()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1),
                               ignore_index=-100)


def build(hidden=256, layers=4, heads=4, intermediate=1024, vocab=4096, rotary_pct=0.25,
          parallel=True, batch=4, seq=256, seed=0):
    torch.manual_seed(seed)
    c = Config(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
               intermediate_size=intermediate, vocab_size=vocab, rotary_pct=rotary_pct,
               use_parallel_residual=bool(parallel))
    model = GPTNeoXForCausalLM(c)
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, vocab, (batch, seq), generator=g)
    y = torch.randint(0, vocab, (batch, seq), generator=g)

    def loss_fn(m, inputs):
        return m(inputs[0], inputs[1])
    # the Trainer's AdamW groups (get_decay_parameter_names): no decay on biases and LayerNorms
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    rest = [p for n, p in model.named_parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.0}, {"params": rest, "weight_decay": 0.0}]
    return {"model": model, "blocks": list(model.layers), "loss_fn": loss_fn,
            "inputs": (x, y), "optimizer_params": groups}
