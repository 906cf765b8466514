"""T5ForConditionalGeneration and ViTForImageClassification as transformers' modeling code runs
them, written for the CPU check of `--impl hf` (validation/real-code/README.md, "T5 and ViT").

transformers does not install on this machine's Python, so these modules are written from the
upstream source, op for op in the order it runs them (fp32, dropout 0: the ops and tensors of the
training step, not a copy of the code):
  models/t5/modeling_t5.py @ 6b8b757dfcb582379a64f013cdce46c43629f2b0: T5LayerNorm, T5Attention
    (compute_bias, _relative_position_bucket, `scores += position_bias`, softmax(scores.float())
    .type_as(scores)), T5LayerSelfAttention / T5LayerCrossAttention / T5LayerFF, T5DenseActDense,
    T5DenseGatedActDense, T5Stack.forward (the encoder's (1 - mask) * min, the decoder's
    _prepare_4d_causal_attention_mask_with_cache_position, invert_attention_mask),
    T5ForConditionalGeneration.forward (_shift_right, the d_model**-0.5 rescale, CrossEntropyLoss).
  models/vit/modeling_vit.py (ViTEmbeddings, ViTPatchEmbeddings, ViTSelfAttention's eager path
    -- torch 1.13 has no SDPA --, ViTLayer, ViTModel's layernorm, ViTForImageClassification).
One deliberate difference: HF's T5Attention sets requires_grad on the cross-attention's zero bias
under gradient checkpointing; here it never requires grad, as actsim models it (the difference is
listed in docs/memory-model.md "T5").
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# ----------------------------------------------------------------------------------------- T5


class T5LayerNorm(nn.Module):
    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x


def relative_position_bucket(rel, bidirectional, num_buckets, max_distance=128):
    buckets = 0
    if bidirectional:
        num_buckets //= 2
        buckets += (rel > 0).to(torch.long) * num_buckets
        rel = torch.abs(rel)
    else:
        rel = -torch.min(rel, torch.zeros_like(rel))
    max_exact = num_buckets // 2
    is_small = rel < max_exact
    large = max_exact + (torch.log(rel.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(is_small, rel, large)


class T5Attention(nn.Module):
    def __init__(self, c, decoder, has_bias):
        super().__init__()
        self.nh, self.d, self.decoder, self.has_bias = c["heads"], c["d_kv"], decoder, has_bias
        inner = self.nh * self.d
        self.q = nn.Linear(c["d_model"], inner, bias=False)
        self.k = nn.Linear(c["d_model"], inner, bias=False)
        self.v = nn.Linear(c["d_model"], inner, bias=False)
        self.o = nn.Linear(inner, c["d_model"], bias=False)
        self.buckets = c["buckets"]
        if has_bias:
            self.relative_attention_bias = nn.Embedding(self.buckets, self.nh)

    def compute_bias(self, q_len, k_len):
        context = torch.arange(q_len, dtype=torch.long)[:, None]
        memory = torch.arange(k_len, dtype=torch.long)[None, :]
        bucket = relative_position_bucket(memory - context, not self.decoder, self.buckets)
        values = self.relative_attention_bias(bucket)
        return values.permute([2, 0, 1]).unsqueeze(0)

    def forward(self, x, mask, kv=None, position_bias=None):
        b, s = x.shape[:2]
        q = self.q(x).view(b, -1, self.nh, self.d).transpose(1, 2)
        cur = x if kv is None else kv
        k = self.k(cur).view(b, -1, self.nh, self.d).transpose(1, 2)
        v = self.v(cur).view(b, -1, self.nh, self.d).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(3, 2))
        if position_bias is None:
            k_len = k.shape[-2]
            if not self.has_bias:
                position_bias = torch.zeros((1, self.nh, s, k_len), dtype=scores.dtype)
            else:
                position_bias = self.compute_bias(s, k_len)[:, :, -s:, :]
            if mask is not None:
                position_bias = position_bias + mask[:, :, :, :k_len]
        scores += position_bias
        attn = F.softmax(scores.float(), dim=-1).type_as(scores)
        attn = F.dropout(attn, p=0.0, training=self.training)
        out = torch.matmul(attn, v).transpose(1, 2).contiguous().view(b, -1, self.nh * self.d)
        return self.o(out), position_bias


class T5Block(nn.Module):
    def __init__(self, c, decoder, has_bias):
        super().__init__()
        self.decoder = decoder
        self.sa_norm, self.sa = T5LayerNorm(c["d_model"]), T5Attention(c, decoder, has_bias)
        if decoder:
            self.ca_norm, self.ca = T5LayerNorm(c["d_model"]), T5Attention(c, decoder, False)
        self.ff_norm = T5LayerNorm(c["d_model"])
        self.gated = c["gated"]
        f, h = c["d_ff"], c["d_model"]
        if self.gated:
            self.wi_0, self.wi_1 = nn.Linear(h, f, bias=False), nn.Linear(h, f, bias=False)
        else:
            self.wi = nn.Linear(h, f, bias=False)
        self.wo = nn.Linear(f, h, bias=False)

    def forward(self, x, mask, bias, enc, enc_mask, enc_bias):
        a, bias = self.sa(self.sa_norm(x), mask, position_bias=bias)
        x = x + F.dropout(a, 0.0, self.training)
        if self.decoder:
            a, enc_bias = self.ca(self.ca_norm(x), enc_mask, kv=enc, position_bias=enc_bias)
            x = x + F.dropout(a, 0.0, self.training)
        y = self.ff_norm(x)
        if self.gated:  # gelu_new (activations.py NewGELUActivation) on wi_0, times wi_1
            g = self.wi_0(y)
            g = 0.5 * g * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * torch.pow(g, 3.0))))
            y = g * self.wi_1(y)
        else:
            y = F.relu(self.wi(y))
        y = F.dropout(y, 0.0, self.training)
        if y.dtype != self.wo.weight.dtype:
            y = y.to(self.wo.weight.dtype)
        x = x + F.dropout(self.wo(y), 0.0, self.training)
        return x, bias, enc_bias


class T5Stack(nn.Module):
    def __init__(self, c, decoder, n):
        super().__init__()
        self.decoder = decoder
        self.block = nn.ModuleList([T5Block(c, decoder, i == 0) for i in range(n)])
        self.final_layer_norm = T5LayerNorm(c["d_model"])

    def forward(self, embed, ids, enc=None):
        x = embed(ids)
        b, s = ids.shape
        dtype = x.dtype
        attention_mask = torch.ones(b, s)
        enc_mask = None
        if self.decoder:
            min_dtype = torch.finfo(dtype).min
            mask = torch.full((s, s), fill_value=min_dtype, dtype=dtype)
            mask = torch.triu(mask, diagonal=1)
            mask *= torch.arange(s) > torch.arange(s).reshape(-1, 1)
            mask = mask[None, None, :, :].expand(b, 1, -1, -1)
            mask = mask.clone()
            padding = (mask[:, :, :, :s] + attention_mask[:, None, None, :]) == 0
            mask[:, :, :, :s] = mask[:, :, :, :s].masked_fill(padding, min_dtype)
            enc_ones = torch.ones(enc.shape[:2], dtype=torch.long)
            enc_mask = (1.0 - enc_ones[:, None, None, :].to(dtype)) * torch.finfo(dtype).min
        else:
            mask = attention_mask[:, None, None, :].to(dtype=dtype)
            mask = (1.0 - mask) * torch.finfo(dtype).min
        x = F.dropout(x, 0.0, self.training)
        bias = enc_bias = None
        for blk in self.block:
            x, bias, enc_bias = blk(x, mask, bias, enc, enc_mask, enc_bias)
        return F.dropout(self.final_layer_norm(x), 0.0, self.training)


class T5(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.shared = nn.Embedding(c["vocab"], c["d_model"])
        self.encoder = T5Stack(c, False, c["layers"])
        self.decoder = T5Stack(c, True, c["decoder_layers"])
        self.tied = c["tied"]
        if not self.tied:
            self.lm_head = nn.Linear(c["d_model"], c["vocab"], bias=False)

    def forward(self, input_ids, labels):
        enc = self.encoder(self.shared, input_ids)
        dec_ids = labels.new_zeros(labels.shape)
        dec_ids[..., 1:] = labels[..., :-1].clone()
        dec_ids[..., 0] = 0
        dec_ids.masked_fill_(dec_ids == -100, 0)
        y = self.decoder(self.shared, dec_ids, enc)
        if self.tied:
            y = y * (self.c["d_model"] ** -0.5)
            logits = F.linear(y, self.shared.weight)
        else:
            logits = self.lm_head(y)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=-100)


def t5(d_model=128, d_kv=32, heads=4, d_ff=512, layers=2, decoder_layers=2, vocab=1000,
       buckets=32, gated=False, tied=True, batch=4, seq=128, target_seq=64):
    torch.manual_seed(0)
    c = dict(d_model=d_model, d_kv=d_kv, heads=heads, d_ff=d_ff, layers=layers,
             decoder_layers=decoder_layers, vocab=vocab, buckets=buckets, gated=gated, tied=tied)
    model = T5(c).train()
    blocks = list(model.encoder.block) + list(model.decoder.block)
    ids = torch.randint(0, vocab, (batch, seq))
    labels = torch.randint(0, vocab, (batch, target_seq))
    return {"model": model, "blocks": blocks, "loss_fn": lambda m, x: m(*x),
            "inputs": (ids, labels)}


# ---------------------------------------------------------------------------------------- ViT


class ViTLayer(nn.Module):
    def __init__(self, h, heads, f):
        super().__init__()
        self.nh, self.d = heads, h // heads
        self.layernorm_before, self.layernorm_after = nn.LayerNorm(h, eps=1e-12), nn.LayerNorm(h, eps=1e-12)
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.dense = nn.Linear(h, h)
        self.intermediate, self.output = nn.Linear(h, f), nn.Linear(f, h)

    def split(self, x):
        return x.view(x.size()[:-1] + (self.nh, self.d)).permute(0, 2, 1, 3)

    def forward(self, x):
        y = self.layernorm_before(x)
        k, v, q = self.split(self.key(y)), self.split(self.value(y)), self.split(self.query(y))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d)
        probs = F.dropout(F.softmax(scores, dim=-1), 0.0, self.training)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        ctx = ctx.view(ctx.size()[:-2] + (self.nh * self.d,))
        x = F.dropout(self.dense(ctx), 0.0, self.training) + x
        y = F.gelu(self.intermediate(self.layernorm_after(x)))
        return F.dropout(self.output(y), 0.0, self.training) + x


class ViT(nn.Module):
    def __init__(self, h, heads, f, layers, image, patch, channels, labels):
        super().__init__()
        n = (image // patch) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, h))
        self.projection = nn.Conv2d(channels, h, kernel_size=patch, stride=patch)
        self.position_embeddings = nn.Parameter(torch.zeros(1, n + 1, h))
        self.layer = nn.ModuleList([ViTLayer(h, heads, f) for _ in range(layers)])
        self.layernorm = nn.LayerNorm(h, eps=1e-12)
        self.classifier = nn.Linear(h, labels)
        self.labels = labels

    def forward(self, pixels, labels):
        x = self.projection(pixels).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls_token.expand(pixels.shape[0], -1, -1), x), dim=1)
        x = F.dropout(x + self.position_embeddings, 0.0, self.training)
        for layer in self.layer:
            x = layer(x)
        logits = self.classifier(self.layernorm(x)[:, 0, :])
        return F.cross_entropy(logits.view(-1, self.labels), labels.view(-1))


def vit(h=128, heads=4, f=512, layers=4, image=64, patch=8, channels=3, labels=10, batch=8):
    torch.manual_seed(0)
    model = ViT(h, heads, f, layers, image, patch, channels, labels).train()
    pixels = torch.randn(batch, channels, image, image)
    y = torch.randint(0, labels, (batch,))
    return {"model": model, "blocks": list(model.layer), "loss_fn": lambda m, x: m(*x),
            "inputs": (pixels, y)}
