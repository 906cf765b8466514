#!/usr/bin/python3
"""Saved-tensor census (DESIGN.md section 6, validation step 2).

Builds one GPT block, one Llama block and the HuggingFace loss op for op as
docs/memory-model.md writes them, runs them forward on the CPU under each precision regime
this torch can express, and records through torch.autograd.graph.saved_tensors_hooks which
storages each op saves for backward. tests/test_census.cpp checks the simulator's declared
saves (sim::Op::saves) against the result; tests/census.cmake regenerates it in CI and diffs
it against the committed harness/census/census.json.

Usage: /usr/bin/python3 harness/census.py [-o FILE]   (default: harness/census/census.json)
Only torch and the standard library; CPU only; the output is deterministic (no pointers, no
random values, sorted keys).
"""

import argparse
import contextlib
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

# Small, pairwise different sizes so that a wrong factor cannot cancel out: tokens n = b*s = 24,
# scores per head s*s = 144, a*s = 48 != h.
DIMS = dict(b=2, s=12, h=32, a=4, d=8, v=50)
GPT = dict(DIMS, family="gpt2", g=4, f=128)    # 4h GeLU MLP, fused Q/K/V, LayerNorm
LLAMA = dict(DIMS, family="llama", g=2, f=88)  # GQA, SwiGLU, RMSNorm, rotary
LLAMA_MHA = dict(LLAMA, g=4)                   # as Llama 2 7B: no repeat_kv
# famdec (issue 12): Gemma 2 (GeGLU, (1 + w) RMSNorm in fp32, four norms, soft-capping), with
# head_dim 12 != h / a as Gemma's 256 is.
GEMMA2 = dict(DIMS, family="gemma2", g=2, f=88, d=12)
# fam12 (issue 12): Gemma 1 (gemma-7b's MHA, two norms) and Gemma 3 (GQA, per-head q/k norms, a
# sliding window of 4 < s: the layer's mask as a bool buffer), with Gemma's scaled embeddings.
GEMMA = dict(DIMS, family="gemma", g=4, f=88, d=12)
GEMMA3 = dict(DIMS, family="gemma3", g=2, f=88, d=12, window=4)
# census12 (issue 12): GPT-NeoX (fused query_key_value, rotary on 2 of 8 channels as Pythia's
# rotary_pct 0.25, parallel residual, exact GeLU), Phi-3 (fused qkv_proj and gate_up_proj, GQA),
# OLMo 2 (q/k norms over whole projections, post-norms).
NEOX = dict(DIMS, family="gpt_neox", g=4, f=128, rot=2)
PHI3 = dict(DIMS, family="phi3", g=2, f=88)
OLMO2 = dict(DIMS, family="olmo2", g=4, f=88)
FALCON = dict(DIMS, family="falcon", g=1, f=128)  # falcon-7b's MQA, one shared LayerNorm
# moe2 (issue 13): Mixtral (Llama's GQA attention, E = 4 SwiGLU experts of fe = 40, top-2,
# renormalized) and Qwen2-MoE (q/k/v biases, top-2 not renormalized, a shared expert of 56 with
# its sigmoid gate). N = 24 tokens: kN/E = 12 tokens per expert.
MIXTRAL = dict(LLAMA, family="mixtral", e=4, k=2, fe=40, f=40, norm_topk=True)
# moe2: PEFT LoRA of rank 3 on Llama's q_proj and v_proj (PEFT's default targets for llama),
# the base frozen (lora_peft.py in harness/realcode runs the same on a whole model).
LLAMA_LORA = dict(LLAMA, lora=3)
QWEN2MOE = dict(LLAMA, family="qwen2_moe", e=4, k=2, fe=40, f=40, norm_topk=False, shared=56)
# lora6 (issue 13): PEFT LoRA of rank 3 on q_proj, v_proj and every expert's w1, w3, w2
# (Mixtral's nn.Linear experts: one adapter per expert) and Qwen2-MoE's shared expert's.
MIXTRAL_LORA = dict(MIXTRAL, lora=3, lora_targets="q,v,gate,up,down")
QWEN2MOE_LORA = dict(QWEN2MOE, lora=3, lora_targets="q,v,gate,up,down")
# feat13 (issue 13): PEFT's lora_dropout = 0.1, an nn.Dropout on each adapter's input
LLAMA_LORA_DROPOUT = dict(LLAMA_LORA, lora_dropout=0.1)

DTYPE_NAMES = {torch.float64: "fp64", torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16",
               torch.bool: "bool", torch.int64: "int64",
               torch.complex64: "c64"}  # moe2: DeepSeek-V2's freqs_cis

CPU_AUTOCAST_LABEL = "cpu-autocast (differs from CUDA autocast; informational)"


def storage_of(t):
    # torch >= 2.0 has untyped_storage(); 1.13 has storage() (a TypedStorage, nbytes in bytes).
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()


class Census:
    """Attributes every saved-tensor pack to the memory-model op whose region performed it.

    Storage identity: storages get small integer ids in order of first appearance (the data
    pointer is only the key). Every tensor seen is kept alive until the case ends, so a pointer
    is never reused by a later allocation and two saves of one storage always share an id.
    """

    def __init__(self):
        self.ops = []
        self.ids = {}          # storage data_ptr -> id
        self.persistent = {}   # storage data_ptr -> "parameter" | "buffer"
        self.keep = []         # tensors and autograd nodes kept alive (pointer/identity reuse)
        self.claimed = set()   # ids of autograd nodes created by earlier regions
        self.region = None

    def sid(self, t):
        ptr = storage_of(t).data_ptr()
        if ptr not in self.ids:
            self.ids[ptr] = len(self.ids)
        self.keep.append(t)
        return self.ids[ptr]

    def param(self, t):
        self.persistent[storage_of(t).data_ptr()] = "parameter"
        self.sid(t)
        return t

    def buffer(self, t):
        self.persistent[storage_of(t).data_ptr()] = "buffer"
        self.sid(t)
        return t

    def pack(self, t):
        if self.region is None:
            raise RuntimeError("a tensor was saved outside any census region: %s %s"
                               % (tuple(t.shape), t.dtype))
        self.region["packs"].append(t)
        return t

    def describe(self, t):
        return {"shape": list(t.shape), "dtype": DTYPE_NAMES[t.dtype], "storage": self.sid(t),
                "storage_bytes": storage_of(t).nbytes(),
                "view_bytes": t.numel() * t.element_size()}

    @contextlib.contextmanager
    def op(self, name, *inputs):
        """`with census.op("qk", q, k) as r: ...; r.out(scores)`: one op of the memory model."""
        region = {"name": name, "inputs": list(inputs), "outputs": [], "packs": []}

        class Region:
            def out(self, *ts):
                region["outputs"].extend(ts)
                return ts[0] if len(ts) == 1 else ts

        self.region = region
        try:
            yield Region()
        finally:
            self.region = None
        self.ops.append(self.finish(region))

    def new_nodes(self, region):
        """Autograd nodes this region created: reachable from its outputs, not beyond its
        inputs' nodes or any node an earlier region created."""
        stop = set(self.claimed)
        for t in region["inputs"]:
            if isinstance(t, torch.Tensor) and t.grad_fn is not None:
                stop.add(id(t.grad_fn))
                self.keep.append(t.grad_fn)
        found, todo = [], [t.grad_fn for t in region["outputs"] if t.grad_fn is not None]
        while todo:
            node = todo.pop()
            if node is None or id(node) in stop:
                continue
            stop.add(id(node))
            self.keep.append(node)
            found.append(node)
            todo.extend(n for n, _ in node.next_functions)
        self.claimed.update(id(n) for n in found)
        return found

    def finish(self, region):
        in_ptrs = {storage_of(t).data_ptr() for t in region["inputs"]
                   if isinstance(t, torch.Tensor)}
        out_ptrs = {storage_of(t).data_ptr() for t in region["outputs"]}
        # Which node saved what: match each pack to a node's _saved_* attribute.
        saved_by = [None] * len(region["packs"])
        for node in self.new_nodes(region):
            for attr in sorted(a for a in dir(node) if a.startswith("_saved_")):
                try:
                    val = getattr(node, attr)
                except Exception:  # pylint: disable=broad-except
                    continue
                vals = val if isinstance(val, (tuple, list)) else [val]
                for v in vals:
                    if not isinstance(v, torch.Tensor):
                        continue
                    for i, p in enumerate(region["packs"]):
                        if saved_by[i] is None and same_view(p, v):
                            saved_by[i] = "%s.%s" % (node.name(), attr[len("_saved_"):])
                            break
        saves = []
        for i, t in enumerate(region["packs"]):
            ptr = storage_of(t).data_ptr()
            if ptr in self.persistent:
                role = self.persistent[ptr]
            elif ptr in in_ptrs:
                role = "input"
            elif ptr in out_ptrs:
                role = "output"
            else:
                role = "new"
            rec = self.describe(t)
            rec["role"] = role
            rec["saved_by"] = saved_by[i]
            note = platform_note(rec)
            if note:
                rec["platform_note"] = note
            saves.append(rec)
        inputs = [t for t in region["inputs"] if isinstance(t, torch.Tensor)]
        outputs = region["outputs"]
        # An op that hands back its input unchanged (x.float() of an fp32 x, dropout with p = 0)
        # is no op at all: the simulator leaves it out.
        identity = (len(outputs) == 1 and len(inputs) >= 1 and outputs[0] is inputs[0])
        return {"name": region["name"], "identity": identity,
                "inputs": [self.describe(t) for t in inputs],
                "outputs": [self.describe(t) for t in outputs],
                "saves": saves}


def same_view(x, y):
    # An unpacked saved tensor is a new Python object over the same view.
    return (storage_of(x).data_ptr() == storage_of(y).data_ptr()
            and x.storage_offset() == y.storage_offset() and x.shape == y.shape
            and x.stride() == y.stride() and x.dtype == y.dtype)


def platform_note(rec):
    """Saves where torch 1.13 on the CPU differs from what CUDA torch 2.x saves (what the
    simulator models). The census keeps what this torch recorded; `cuda_equivalent` says what
    the CUDA build keeps instead (null: nothing). Unverified until a GPU run covers them."""
    by = rec["saved_by"] or ""
    # native_layer_norm's outputs 1 and 2 are mean and rstd
    if by.startswith("NativeLayerNormBackward") and by.endswith((".result1", ".result2")) \
            and rec["dtype"] != "fp32":
        numel = rec["storage_bytes"] // 2
        return {"reason": "CPU layer_norm keeps mean/rstd in the input dtype; layer_norm_cuda "
                          "allocates them in the accumulate type (fp32) "
                          "(aten/src/ATen/native/cuda/layer_norm_kernel.cu)",
                "cuda_equivalent": {"dtype": "fp32", "storage_bytes": numel * 4}}
    if by == "MulBackward0.other" and rec["shape"] == [] and rec["dtype"] == "fp64" \
            and rec["storage_bytes"] == 8:
        return {"reason": "a Python float multiplied into a tensor is wrapped as a 0-dim CPU "
                          "double that MulBackward0 keeps: host memory on CUDA (HF eager "
                          "attention's `* scaling`, implhf)",
                "cuda_equivalent": None}
    if by == "MeanBackward1.self":
        return {"reason": "torch 1.13's MeanBackward1 keeps mean's input (here the pow output "
                          "of RMSNorm); torch 2.x's derivatives.yaml formula for mean.dim, "
                          "mean_backward(grad, self.sym_sizes(), dim, self.sym_numel(), keepdim), "
                          "keeps only sizes, so the pow output is a transient",
                "cuda_equivalent": None}
    if by == "MulBackward0.other" and rec["shape"] == [] and rec["role"] == "new":
        # fam12: Gemma's embedding normalizer, torch.tensor(h ** 0.5, dtype=...) made without a
        # device (modeling_gemma.py GemmaModel.forward): a CPU scalar tensor under CUDA too
        return {"reason": "a 0-dim tensor made on the CPU (torch.tensor without a device, "
                          "Gemma's embedding normalizer) that MulBackward0 keeps: host memory "
                          "under CUDA",
                "cuda_equivalent": None}
    if rec["dtype"] == "fp64" and rec["shape"] == []:
        # famdec: `t / cap`, `t * cap` with a Python float (Gemma 2's soft-capping)
        return {"reason": "a Python scalar operand, wrapped as a 0-dim double tensor that "
                          "Div/MulBackward0 saves: a CPU scalar, host memory under CUDA",
                "cuda_equivalent": None}
    return None


# ---------------------------------------------------------------------------------------------
# Op lists (docs/memory-model.md section 3). Region names are the simulator's Op::name.

def dropout(C, name, x, p):
    # p > 0: native_dropout (what ATen's dropout runs on CUDA: a 1-byte mask, saved). The CPU's
    # F.dropout takes another path (input * float noise, saving the noise in x's dtype), so the
    # CUDA op is called directly. p = 0: ATen's dropout returns its input (no op).
    with C.op(name, x) as r:
        if p > 0:
            y, _mask = torch.native_dropout(x, p, True)
        else:
            y = F.dropout(x, p, training=True)
        return r.out(y)


def softcap(C, t, cap):
    """famdec: Gemma 2's cap * tanh(t / cap) (eager_attention_forward, Gemma2ForCausalLM)."""
    with C.op("softcap / cap", t) as r:
        t = r.out(t / cap)
    with C.op("softcap tanh", t) as r:
        t = r.out(torch.tanh(t))
    with C.op("softcap * cap", t) as r:
        return r.out(t * cap)


def attention(C, q, k, v, to3, mask, p, d, megatron_mask=None, cap=None, scale_op=False,
              hf_softmax=False):
    """Standard attention as explicit ops. `to3` folds a layout's q, k or v into the [b*a, s, d]
    operand of the batched matmuls (a view or a copy, whichever the layout gives; inside the
    qk and av regions, so a copy counts as theirs). `megatron_mask` (True = masked): Megatron's
    FusedScaleMaskSoftmax as its torch fallback runs it (megatron/core/fusions/fused_softmax.py
    forward_torch_softmax, transformer/utils.py attention_mask_func @ d98e8a6): the scores
    masked in place, then softmax, in one region (the fused CUDA kernel makes and saves the
    same: no masked copy, the probabilities in the scores' dtype)."""
    with C.op("qk", q, k) as r:
        q3, k3 = to3(q), to3(k)
        buf = torch.empty(q3.shape[0], q3.shape[1], k3.shape[1], dtype=q3.dtype)  # beta = 0: unread
        scores = r.out(torch.baddbmm(buf, q3, k3.transpose(1, 2), beta=0.0,
                                     alpha=1.0 if scale_op else 1.0 / math.sqrt(d)))
    if scale_op:
        # HF eager (modeling_llama.py @ 5dd4a635 eager_attention_forward): `* scaling`, a
        # separate op on the scores (implhf)
        with C.op("attention scale", scores) as r:
            scores = r.out(scores * (1.0 / math.sqrt(d)))
    if cap:
        scores = softcap(C, scores, cap)
    if megatron_mask is not None:
        with C.op("softmax", scores) as r:
            probs = r.out(torch.softmax(scores.masked_fill_(megatron_mask, -10000.0), dim=-1))
    else:
        with C.op("causal mask", scores) as r:
            masked = r.out(torch.where(mask, scores, float("-inf")))
        with C.op("softmax", masked) as r:
            if hf_softmax:
                # fam12: HF eager_attention_forward (modeling_llama.py @ 5dd4a635, and the Gemma,
                # Phi-3, OLMo 2, Mixtral and Qwen2-MoE copies): softmax(w, dim=-1,
                # dtype=torch.float32).to(query.dtype): fp32 probabilities saved, a 16-bit copy
                probs = r.out(torch.softmax(masked, dim=-1, dtype=torch.float32))
            else:
                probs = r.out(torch.softmax(masked, dim=-1))
        if hf_softmax:
            with C.op("softmax to input dtype", probs) as r:
                probs = r.out(probs.to(q.dtype))  # x itself when fp32 (no op)
    dprobs = dropout(C, "attention dropout", probs, p)
    with C.op("av", dprobs, v) as r:
        return r.out(torch.bmm(dprobs, to3(v)))


def gpt_block(C, P, x, mask, p, hf_layout=False, megatron_mask=None):
    """GPT block, pre-norm. Megatron's [s, b, h] layout: the fused QKV output viewed as
    [s, b, a, 3d] and split on the last dim, so q, k, v and their [s, b*a, d] folds are views of
    the QKV storage (Megatron-LM ParallelAttention / core_attention), as the memory model has it.
    hf_layout: HF GPT2Attention eager instead, [b, s, h]: split into [b, s, h] thirds viewed as
    [b, a, s, d] (permuted), which the batched matmuls can only fold to [b*a, s, d] by copying."""
    h = x.shape[-1]
    a, d = P["a"], P["d"]
    with C.op("norm1", x) as r:
        ln1 = r.out(F.layer_norm(x, (h,), P["ln1_w"], P["ln1_b"]))
    with C.op("qkv", ln1) as r:
        qkv = r.out(F.linear(ln1, P["qkv_w"], P["qkv_b"]))
    with C.op("qkv split", qkv) as r:
        if hf_layout:
            b, s, _ = x.shape
            heads = lambda t: t.view(b, s, a, d).permute(0, 2, 1, 3)
            q, k, v = r.out(*(heads(t) for t in qkv.split(h, dim=2)))
            to3 = lambda t: t.reshape(b * a, s, d)  # as HF's matmul folds them: copies
        else:
            s, b, _ = x.shape
            q, k, v = r.out(*qkv.view(s, b, a, 3 * d).split(d, dim=-1))
            to3 = lambda t: t.reshape(s, b * a, d).transpose(0, 1)  # views: b and a merge
    # Megatron's layout runs Megatron's softmax, except under autocast (which Megatron never
    # uses, and where the simulator keeps the out-of-place mask).
    ctx = attention(C, q, k, v, to3, mask, p, d,
                    None if hf_layout or torch.is_autocast_cpu_enabled() else megatron_mask)
    with C.op("attention out copy", ctx) as r:
        order = (0, 2, 1, 3) if hf_layout else (2, 0, 1, 3)
        c = r.out(ctx.view(b, a, s, d).permute(*order).contiguous().view(*x.shape))
    with C.op("proj", c) as r:
        o = r.out(F.linear(c, P["proj_w"], P["proj_b"]))
    o = dropout(C, "proj dropout", o, p)
    with C.op("residual 1", x, o) as r:
        x2 = r.out(x + o)
    with C.op("norm2", x2) as r:
        ln2 = r.out(F.layer_norm(x2, (h,), P["ln2_w"], P["ln2_b"]))
    with C.op("fc1", ln2) as r:
        u = r.out(F.linear(ln2, P["fc1_w"], P["fc1_b"]))
    with C.op("gelu", u) as r:
        gu = r.out(F.gelu(u, approximate="tanh"))
    with C.op("fc2", gu) as r:
        m = r.out(F.linear(gu, P["fc2_w"], P["fc2_b"]))
    m = dropout(C, "mlp dropout", m, p)
    with C.op("residual 2", x2, m) as r:
        return r.out(x2 + m)


def conv1d(x, w, bias):
    """HF's Conv1D (pytorch_utils.py): torch.addmm(bias, x.view(-1, nx), weight) with the weight
    stored [nx, nf] (here the [nf, nx] parameter's transpose: a view), then viewed back."""
    return torch.addmm(bias, x.view(-1, x.shape[-1]), w.t()).view(*x.shape[:-1], w.shape[0])


def new_gelu(C, u):
    """exec10: activations.py NewGELUActivation as written, pointwise ops evaluated left to right:
    0.5 * input * (1.0 + tanh(sqrt(2.0 / pi) * (input + 0.044715 * pow(input, 3.0))))."""
    with C.op("gelu_new 0.5*x", u) as r:
        t1 = r.out(0.5 * u)
    with C.op("gelu_new pow", u) as r:
        pw = r.out(torch.pow(u, 3.0))
    with C.op("gelu_new 0.044715*pow", pw) as r:
        c = r.out(0.044715 * pw)
    with C.op("gelu_new x+", u, c) as r:
        inner = r.out(u + c)
    with C.op("gelu_new sqrt(2/pi)*", inner) as r:
        sc = r.out(math.sqrt(2.0 / math.pi) * inner)
    with C.op("gelu_new tanh", sc) as r:
        th = r.out(torch.tanh(sc))
    with C.op("gelu_new 1+tanh", th) as r:
        one = r.out(1.0 + th)
    with C.op("gelu_new product", t1, one) as r:
        return r.out(t1 * one)


def hf_gpt2_block(C, P, x, bias, p):
    """exec10 (issue 10): HF GPT2Block as written (modeling_gpt2.py @ c44b2d9976e8, eager
    GPT2Attention: Conv1D c_attn, split, _split_heads views, _attn with torch.matmul on the
    permuted heads, `/ torch.full([], d ** 0.5)`, `torch.where(bias, w, full([], finfo.min))`,
    softmax, `.type(value.dtype)`, attn_dropout, matmul, _merge_heads; GPT2MLP with gelu_new,
    NewGELUActivation), [b, s, h], held against --impl hf."""
    b, s, h = x.shape
    a, d = P["a"], P["d"]
    with C.op("norm1", x) as r:
        ln1 = r.out(F.layer_norm(x, (h,), P["ln1_w"], P["ln1_b"]))
    with C.op("qkv", ln1) as r:
        qkv = r.out(conv1d(ln1, P["qkv_w"], P["qkv_b"]))
    with C.op("qkv split", qkv) as r:
        heads = lambda t: t.view(b, s, a, d).permute(0, 2, 1, 3)
        q, k, v = r.out(*(heads(t) for t in qkv.split(h, dim=2)))
    with C.op("qk", q, k) as r:
        w = r.out(torch.matmul(q, k.transpose(-1, -2)))
    with C.op("attention scale", w) as r:
        w = r.out(w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype, device=w.device))
    with C.op("causal mask", w) as r:
        mask_value = torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype, device=w.device)
        w = r.out(torch.where(bias[:, :, :s, :s], w.to(w.dtype), mask_value))
    with C.op("softmax", w) as r:
        w = r.out(torch.softmax(w, dim=-1))
    w = w.type(v.dtype)  # the same dtype here (no autocast): no op
    w = dropout(C, "attention dropout", w, p)
    with C.op("av", w, v) as r:
        o = r.out(torch.matmul(w, v))
    with C.op("attention out copy", o) as r:
        c = r.out(o.permute(0, 2, 1, 3).contiguous().view(b, s, a * d))
    with C.op("proj", c) as r:
        o = r.out(conv1d(c, P["proj_w"], P["proj_b"]))
    o = dropout(C, "proj dropout", o, p)
    with C.op("residual 1", x, o) as r:
        x2 = r.out(x + o)
    with C.op("norm2", x2) as r:
        ln2 = r.out(F.layer_norm(x2, (h,), P["ln2_w"], P["ln2_b"]))
    with C.op("fc1", ln2) as r:
        u = r.out(conv1d(ln2, P["fc1_w"], P["fc1_b"]))
    gu = new_gelu(C, u)
    with C.op("fc2", gu) as r:
        m = r.out(conv1d(gu, P["fc2_w"], P["fc2_b"]))
    m = dropout(C, "mlp dropout", m, p)
    with C.op("residual 2", x2, m) as r:
        return r.out(x2 + m)


def hf_gpt2_loss(C, P, y, labels, b, s):
    """exec10: GPT2LMHeadModel.forward's loss (modeling_gpt2.py @ c44b2d9976e8): lm_head, then
    shift_logits = lm_logits[..., :-1, :].contiguous(), shift_labels = labels[..., 1:]
    .contiguous(), CrossEntropyLoss (log_softmax + nll_loss; no .float())."""
    with C.op("lm head", y) as r:
        logits = r.out(F.linear(y, P["lm_w"]))
    with C.op("shift logits copy", logits) as r:
        sl = r.out(logits[..., :-1, :].contiguous())
    with C.op("shift labels copy", labels) as r:
        lab = r.out(labels.view(b, s)[..., 1:].contiguous())
    with C.op("log softmax", sl) as r:
        logp = r.out(F.log_softmax(sl.view(-1, sl.shape[-1]), dim=-1))
    with C.op("nll loss", logp, lab) as r:
        return r.out(F.nll_loss(logp, lab.view(-1)))


def nanogpt_block(C, P, x, bias, p):
    """implver (issue 10): karpathy/nanoGPT model.py @ 3adf61e1 Block as written, its slow
    attention path (model.py:45-50, 56-71: torch < 2.0, no SDPA): [b, s, h] layout, c_attn split
    into q, k, v viewed [b, a, s, d] by transpose, `(q @ k.transpose(-2, -1)) * (1 / sqrt(d))`,
    `masked_fill(self.bias[:, :, :T, :T] == 0, -inf)` on the block's persistent fp32 buffer
    [1, 1, block_size, block_size] (here block_size = s), softmax, attn_dropout, `att @ v`,
    transpose + contiguous, c_proj, resid_dropout; nn.GELU() (exact) in the MLP (model.py:83)."""
    h = x.shape[-1]
    a, d = P["a"], P["d"]
    b, s, _ = x.shape
    with C.op("norm1", x) as r:
        ln1 = r.out(F.layer_norm(x, (h,), P["ln1_w"], P["ln1_b"], 1e-5))
    with C.op("qkv", ln1) as r:
        qkv = r.out(F.linear(ln1, P["qkv_w"], P["qkv_b"]))
    with C.op("qkv split", qkv) as r:
        q, k, v = qkv.split(h, dim=2)
        q, k, v = r.out(*(t.view(b, s, a, h // a).transpose(1, 2) for t in (q, k, v)))
    with C.op("qk", q, k) as r:
        att = r.out(q @ k.transpose(-2, -1))
    with C.op("attention scale", att) as r:
        att = r.out(att * (1.0 / math.sqrt(k.size(-1))))
    with C.op("mask == 0", bias) as r:
        m = r.out(bias[:, :, :s, :s] == 0)
    with C.op("masked fill", att, m) as r:
        att = r.out(att.masked_fill(m, float("-inf")))
    with C.op("softmax", att) as r:
        att = r.out(F.softmax(att, dim=-1))
    att = dropout(C, "attention dropout", att, p)
    with C.op("av", att, v) as r:
        y = r.out(att @ v)
    with C.op("attention out copy", y) as r:
        y = r.out(y.transpose(1, 2).contiguous().view(b, s, h))
    with C.op("proj", y) as r:
        o = r.out(F.linear(y, P["proj_w"], P["proj_b"]))
    o = dropout(C, "proj dropout", o, p)
    with C.op("residual 1", x, o) as r:
        x2 = r.out(x + o)
    with C.op("norm2", x2) as r:
        ln2 = r.out(F.layer_norm(x2, (h,), P["ln2_w"], P["ln2_b"], 1e-5))
    with C.op("fc1", ln2) as r:
        u = r.out(F.linear(ln2, P["fc1_w"], P["fc1_b"]))
    with C.op("gelu", u) as r:
        gu = r.out(F.gelu(u))
    with C.op("fc2", gu) as r:
        m2 = r.out(F.linear(gu, P["fc2_w"], P["fc2_b"]))
    m2 = dropout(C, "mlp dropout", m2, p)
    with C.op("residual 2", x2, m2) as r:
        return r.out(x2 + m2)


def rms_norm(C, w, x, eps=1e-6, t5=False):
    """HF LlamaRMSNorm.forward, eager, one region per op of the simulator. t5 (fam12):
    T5LayerNorm.forward (modeling_t5.py @ 6b8b757d) instead: x * rsqrt(variance + eps)
    multiplies the input itself (fp32 result by promotion), and .to(weight.dtype) only when the
    weight is 16-bit; in fp32 the op list and every save equal LlamaRMSNorm's."""
    in_dtype = x.dtype
    with C.op("rmsnorm to fp32", x) as r:
        hs = r.out(x.to(torch.float32))
    with C.op("rmsnorm pow+mean", hs) as r:
        var = r.out(hs.pow(2).mean(-1, keepdim=True))
    with C.op("rmsnorm rsqrt", var) as r:
        rs = r.out(torch.rsqrt(var + eps))
    scaled = x if t5 else hs
    with C.op("rmsnorm scale", scaled, rs) as r:
        hn = r.out(scaled * rs)
    if t5:
        out_dtype = w.dtype if w.dtype in (torch.float16, torch.bfloat16) else hn.dtype
    else:
        out_dtype = in_dtype
    with C.op("rmsnorm to input dtype", hn) as r:
        hc = r.out(hn.to(out_dtype))
    with C.op("rmsnorm weight", hc) as r:
        return r.out(w * hc)


def lora_linear(C, P, name, key, x, wkey=None):
    """moe2: `F.linear(x, P[key_w], P[key_b])`, and with a LoRA adapter on it PEFT's
    Linear.forward (huggingface/peft src/peft/tuners/lora/layer.py @ 5d602fdb): result =
    base_layer(x) (frozen), x = _cast_input_dtype(x, lora_A.weight.dtype) (tuners_utils.py: a
    copy only when the dtypes differ), result = result + lora_B(lora_A(dropout(x))) * scaling
    (lora_dropout 0: nn.Identity), result.to(torch_result_dtype). lora6: `wkey` names the
    weight when it is not key + "_w" (an expert's e<i>_w1)."""
    with C.op(name, x) as r:
        y = r.out(F.linear(x, P[wkey or key + "_w"], P.get(key + "_b")))
    if ("lora_A_" + key) not in P:
        return y
    la, lb = P["lora_A_" + key], P["lora_B_" + key]
    with C.op("lora input cast", x) as r:
        xa = r.out(x.to(la.dtype))  # x itself when the dtypes agree (no op)
    # feat13: lora_dropout > 0 is nn.Dropout(p) on the cast input (update_layer @ 5d602fdb);
    # 0 is nn.Identity (no op)
    if P.get("lora_dropout", 0) > 0:
        xa = dropout(C, "lora dropout", xa, P["lora_dropout"])
    with C.op("lora_A", xa) as r:
        ya = r.out(F.linear(xa, la))
    with C.op("lora_B", ya) as r:
        yb = r.out(F.linear(ya, lb))
    with C.op("lora scaling", yb) as r:
        sc = r.out(yb * P["lora_scaling"])
    with C.op("lora add", y, sc) as r:
        z = r.out(y + sc)
    with C.op("lora result cast", z) as r:
        return r.out(z.to(y.dtype))  # identity unless autocast made the sum fp32


def rotate_half(t):
    half = t.shape[-1] // 2
    return torch.cat((-t[..., half:], t[..., :half]), dim=-1)


def swiglu_mlp(C, P, y):
    """The Llama-style MLP as the simulator's op list orders it: gate, up, silu, mul, down."""
    with C.op("gate proj", y) as r:
        gt = r.out(F.linear(y, P["gate_w"]))
    with C.op("up proj", y) as r:
        up = r.out(F.linear(y, P["up_w"]))
    with C.op("silu", gt) as r:
        act = r.out(F.silu(gt))
    with C.op("swiglu mul", act, up) as r:
        prod = r.out(act * up)
    with C.op("down proj", prod) as r:
        return r.out(F.linear(prod, P["down_w"]))


def llama_block(C, P, x, cos, sin, mask, p):
    """HF LlamaDecoderLayer, eager attention, [b, s, h] layout (modeling_llama.py)."""
    b, s, h = x.shape
    a, g, d = P["a"], P["g"], P["d"]
    y = rms_norm(C, P["ln1_w"], x)
    # q/k/v biases: Qwen2-MoE; LoRA adapters on q and v: PEFT (moe2)
    q = lora_linear(C, P, "q proj", "q", y)
    k = lora_linear(C, P, "k proj", "k", y)
    v = lora_linear(C, P, "v proj", "v", y)

    def rope(name, t, heads):
        with C.op(name, t, cos, sin) as r:
            tv = t.view(b, s, heads, d).transpose(1, 2)
            c, sn = cos.unsqueeze(1), sin.unsqueeze(1)
            return r.out(tv * c + rotate_half(tv) * sn)

    qr = rope("rope q", q, a)
    kr = rope("rope k", k, g)

    def repeat_kv(name, t):  # HF repeat_kv: expand + reshape materializes a heads
        with C.op(name, t) as r:
            if t.dim() == 3:  # v: [b, s, g*d] -> [b, g, s, d] view first
                t = t.view(b, s, g, d).transpose(1, 2)
            return r.out(t[:, :, None].expand(b, g, a // g, s, d).reshape(b, a, s, d))

    kk, vv = kr, v.view(b, s, g, d).transpose(1, 2)
    if g != a:
        kk = repeat_kv("repeat k", kr)
        vv = repeat_kv("repeat v", v)
    to3 = lambda t: t.reshape(b * a, s, d)  # as HF's matmul folds [b, a, s, d]
    ctx = attention(C, qr, kk, vv, to3, mask, p, d, scale_op=True, hf_softmax=True)
    with C.op("attention out copy", ctx) as r:
        c = r.out(ctx.view(b, a, s, d).transpose(1, 2).contiguous().reshape(b, s, a * d))
    with C.op("proj", c) as r:
        o = r.out(F.linear(c, P["o_w"]))
    with C.op("residual 1", x, o) as r:
        x2 = r.out(x + o)
    y2 = rms_norm(C, P["ln2_w"], x2)
    if "e" in P:  # moe2: the sparse MoE layer in place of the MLP (Mixtral, Qwen2-MoE)
        m = sparse_moe(C, P, y2)
    else:
        m = swiglu_mlp(C, P, y2)
    with C.op("residual 2", x2, m) as r:
        return r.out(x2 + m)


def hf_swiglu(C, P, pre, x, shared):
    """moe2: an HF expert / shared expert MLP, `w2(act_fn(w1(x)) * w3(x))` (MixtralBlockSparseTop2MLP;
    Qwen2MoeMLP's down_proj(act_fn(gate_proj(x)) * up_proj(x))), in Python's order of evaluation:
    w1, silu, w3, mul, w2."""
    n1, n3, n2 = (("shared gate proj", "shared up proj", "shared down proj") if shared
                  else ("expert w1", "expert w3", "expert w2"))
    # lora6: each linear through lora_linear: PEFT's adapter when the case put one on it (every
    # expert's own w1, w3, w2 and the shared expert's: lora_targets gate, up, down)
    g = lora_linear(C, P, n1, pre + "w1", x, wkey=pre + "w1")
    with C.op("expert silu", g) as r:
        act = r.out(F.silu(g))
    u = lora_linear(C, P, n3, pre + "w3", x, wkey=pre + "w3")
    with C.op("expert swiglu mul", act, u) as r:
        prod = r.out(act * u)
    return lora_linear(C, P, n2, pre + "w2", prod, wkey=pre + "w2")


def sparse_moe(C, P, y):
    """moe2 (issue 13): HF's sparse MoE block, eager, as transformers writes it
    (src/transformers/models/mixtral/modeling_mixtral.py @ 00d4b3d2142c MixtralSparseMoeBlock;
    models/qwen2_moe/modeling_qwen2_moe.py @ 00a3f9386614 Qwen2MoeSparseMoeBlock: norm_topk_prob,
    the routed loop, then the shared expert, its sigmoid gate and the sum). Region names are the simulator's (sim/src/blocks_moe.cpp)."""
    b, s, h = y.shape
    e, k = P["e"], P["k"]
    n = b * s
    with C.op("router", y) as r:
        hidden = y.view(-1, h)
        logits = r.out(F.linear(hidden, P["router_w"]))
    # F.softmax(router_logits, dim=1, dtype=torch.float): ATen's softmax with a dtype converts
    # first (aten/src/ATen/native/SoftMax.cpp softmax(): input_.toType(dtype)), then softmaxes
    with C.op("router logits to fp32", logits) as r:
        l32 = r.out(logits.to(torch.float32))
    with C.op("router softmax", l32) as r:
        probs = r.out(torch.softmax(l32, dim=1))
    with C.op("router topk", probs) as r:
        rw, sel = r.out(*torch.topk(probs, k, dim=-1))
    if P["norm_topk"]:
        with C.op("routing weight sum", rw) as r:
            tot = r.out(rw.sum(dim=-1, keepdim=True))
        with C.op("routing weights / sum", rw, tot) as r:
            rw /= tot  # in place: the region's output is the same storage (a view, not new)
            r.out(rw.view(rw.shape))
    with C.op("routing weights cast", rw) as r:
        rw = r.out(rw.to(hidden.dtype))
    with C.op("moe output (zeros)") as r:
        out = r.out(torch.zeros((n, h), dtype=hidden.dtype))
    with C.op("expert mask (one-hot)", sel) as r:
        mask = r.out(F.one_hot(sel, num_classes=e).permute(2, 1, 0))
    # expert_hit: tiny no-grad [E] tensors (not a simulator op; nothing saved)
    hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
    counts = [int(mask[i].sum()) for i in range(e)]
    if counts != [n * k // e] * e:
        raise RuntimeError("census routing is not balanced: %s" % counts)
    for ex in hit:
        ex = int(ex)
        with C.op("expert token ids", mask) as r:
            # torch.where(cond) is nonzero(cond).unbind(1): idx and top_x are views of one
            # int64 [n_e, 2] storage (aten/src/ATen/native/TensorCompare.cpp where,
            # nonzero_numpy)
            idx, top_x = r.out(*torch.where(mask[ex].squeeze(0)))
        with C.op("expert gather", hidden, top_x) as r:
            cur = r.out(hidden[None, top_x].reshape(-1, h))
        yx = hf_swiglu(C, P, "e%d_" % ex, cur, False)
        with C.op("expert routing weight", rw, top_x, idx) as r:
            we = r.out(rw[top_x, idx, None])
        with C.op("expert * weight", yx, we) as r:
            yw = r.out(yx * we)
        with C.op("expert out cast", yw) as r:
            yw = r.out(yw.to(hidden.dtype))
        with C.op("expert index_add_", out, yw, top_x) as r:
            out.index_add_(0, top_x, yw)  # in place: the output is the zeros' storage
            r.out(out.view(out.shape))
    if P.get("shared"):
        sh = hf_swiglu(C, P, "sh_", hidden, True)
        with C.op("shared expert gate", hidden) as r:
            gl = r.out(F.linear(hidden, P["sh_gate_w"]))
        with C.op("shared gate sigmoid", gl) as r:
            sg = r.out(torch.sigmoid(gl))  # HF: F.sigmoid, the same op
        with C.op("shared gate *", sg, sh) as r:
            sh = r.out(sg * sh)
        with C.op("routed + shared", out, sh) as r:
            out = r.out(out + sh)
    return out.view(b, s, h)


def gemma_norm(C, name, w, x, eps=1e-6):
    """famdec: Gemma2RMSNorm.forward (modeling_gemma2.py @ 006e8693), one region per op of the
    simulator: out = _norm(x.float()) * (1.0 + w.float()); out.type_as(x)."""
    with C.op("rmsnorm to fp32", x) as r:
        hs = r.out(x.float())
    with C.op(name, hs) as r:
        var = r.out(hs.pow(2).mean(-1, keepdim=True))
    with C.op("rmsnorm rsqrt", var) as r:
        rs = r.out(torch.rsqrt(var + eps))
    with C.op("rmsnorm scale", hs, rs) as r:
        hn = r.out(hs * rs)
    with C.op("rmsnorm weight term", w) as r:
        wt = r.out(1.0 + w.float())
    with C.op("rmsnorm weight", hn, wt) as r:
        y = r.out(hn * wt)
    with C.op("rmsnorm to input dtype", y) as r:
        return r.out(y.type_as(x))


def gemma2_block(C, P, x, cos, sin, mask, p):
    """famdec: HF Gemma2DecoderLayer, eager attention (modeling_gemma2.py @ 006e8693):
    pre and post norms around both sub-layers, attention soft-capping, GeGLU (tanh GeLU)."""
    return gemma_block(C, P, x, cos, sin, mask, p, 2)


def gemma_block(C, P, x, cos, sin, mask, p, version):
    """famdec, fam12: the Gemma decoder layers, eager attention.
    1: GemmaDecoderLayer (modeling_gemma.py @ 0125ac68): Llama's layout (two norms) with
       GemmaRMSNorm's (1 + w) in fp32 and GeGLU; eager_attention_forward `* scaling`, no cap.
    2: Gemma2DecoderLayer (modeling_gemma2.py @ 006e8693): four norms, soft-capping at 50.
    3: Gemma3DecoderLayer (modeling_gemma3.py, the indexed copy @ 0018aa64): Gemma 2's four norms,
       no soft-capping, q_norm and k_norm (Gemma3RMSNorm(head_dim)) on the [b, heads, s, d] views
       before the rotary. Every eager_attention_forward here runs softmax in fp32 and casts back."""
    b, s, h = x.shape
    a, g, d = P["a"], P["g"], P["d"]
    y = gemma_norm(C, "input norm" if version > 1 else "norm1", P["ln1_w"], x)
    with C.op("q proj", y) as r:
        q = r.out(F.linear(y, P["q_w"]))
    with C.op("k proj", y) as r:
        k = r.out(F.linear(y, P["k_w"]))
    with C.op("v proj", y) as r:
        v = r.out(F.linear(y, P["v_w"]))
    heads = lambda t, n: t.view(b, s, n, d).transpose(1, 2)
    qh, kh = heads(q, a), heads(k, g)
    if version == 3:
        qh = gemma_norm(C, "q norm", P["qn_w"], qh)
        kh = gemma_norm(C, "k norm", P["kn_w"], kh)

    def rope(name, tv):
        with C.op(name, tv, cos, sin) as r:
            c, sn = cos.unsqueeze(1), sin.unsqueeze(1)
            return r.out(tv * c + rotate_half(tv) * sn)

    qr = rope("rope q", qh)
    kr = rope("rope k", kh)

    def repeat_kv(name, t):
        with C.op(name, t) as r:
            return r.out(t[:, :, None].expand(b, g, a // g, s, d).reshape(b, a, s, d))

    kk, vv = kr, heads(v, g)
    if g != a:
        kk = repeat_kv("repeat k", kr)
        vv = repeat_kv("repeat v", heads(v, g))
    to3 = lambda t: t.reshape(b * a, s, d)
    ctx = attention(C, qr, kk, vv, to3, mask, p, d, cap=50.0 if version == 2 else None,
                    scale_op=True, hf_softmax=True)
    with C.op("attention out copy", ctx) as r:
        c = r.out(ctx.view(b, a, s, d).transpose(1, 2).contiguous().reshape(b, s, a * d))
    with C.op("proj", c) as r:
        o = r.out(F.linear(c, P["o_w"]))
    if version > 1:
        o = gemma_norm(C, "post-attention norm", P["post_attn_w"], o)
    with C.op("residual 1", x, o) as r:
        x2 = r.out(x + o)
    y2 = gemma_norm(C, "pre-feedforward norm" if version > 1 else "norm2", P["ln2_w"], x2)
    with C.op("gate proj", y2) as r:
        gt = r.out(F.linear(y2, P["gate_w"]))
    with C.op("gelu", gt) as r:
        act = r.out(F.gelu(gt, approximate="tanh"))
    with C.op("up proj", y2) as r:
        up = r.out(F.linear(y2, P["up_w"]))
    with C.op("geglu mul", act, up) as r:
        prod = r.out(act * up)
    with C.op("down proj", prod) as r:
        m = r.out(F.linear(prod, P["down_w"]))
    if version > 1:
        m = gemma_norm(C, "post-feedforward norm", P["post_ff_w"], m)
    with C.op("residual 2", x2, m) as r:
        return r.out(x2 + m)


def gemma_embedding(C, P, ids, h):
    """fam12: GemmaModel.forward (modeling_gemma.py @ 0125ac68; Gemma 2 and 3 the same):
    embed_tokens(input_ids), then `hidden_states * normalizer` with normalizer =
    torch.tensor(hidden_size**0.5, dtype=hidden_states.dtype): made on the CPU (no device), in
    the embeddings' dtype (bf16 rounds sqrt(3072) = 55.43 to 55.5)."""
    with C.op("embedding", ids) as r:
        e = r.out(F.embedding(ids, P["lm_w"]))  # the tied table
    with C.op("embedding * sqrt(h)", e) as r:
        return r.out(e * torch.tensor(h ** 0.5, dtype=e.dtype))


# census12 (issue 12): GPT-NeoX, Phi-3, OLMo 2 and Falcon blocks, written op for op from
# transformers' modeling files (commits in docs/memory-model.md "Decoder families"); region names
# are the simulator's (sim/src/blocks_famdec.cpp, graph_blocks.cpp build_attention).

def hf_rope(C, name, tv, cos, sin):
    """apply_rotary_pos_emb on a [b, heads, s, width] tensor: t * cos + rotate_half(t) * sin."""
    with C.op(name, tv, cos, sin) as r:
        c, sn = cos.unsqueeze(1), sin.unsqueeze(1)
        return r.out(tv * c + rotate_half(tv) * sn)


def partial_rope(C, name, t, cos, sin, rot):
    """GPTNeoXAttention / Phi3Attention with a partial rotary factor: rotate the first `rot`
    channels of each head, concatenate the rest (query_rot = query[..., :rot]; cat)."""
    with C.op("rotary slice", t) as r:
        t_rot = r.out(t[..., :rot])
    rotated = hf_rope(C, name, t_rot, cos, sin)
    with C.op("rotary cat", rotated, t) as r:
        return r.out(torch.cat((rotated, t[..., rot:]), dim=-1))


def hf_eager(C, qr, kk, vv, b, s, a, d, mask, p, hf_softmax=True):
    """The shared eager row (HF eager_attention_forward): qk, `* scaling`, mask, softmax,
    dropout, av, the [b, s, a*d] output copy. hf_softmax: softmax in fp32 cast back (fam12);
    GPT-NeoX's _attn (@ 006bd23d) runs softmax in the scores' dtype."""
    to3 = lambda t: t.reshape(b * a, s, d)
    ctx = attention(C, qr, kk, vv, to3, mask, p, d, scale_op=True, hf_softmax=hf_softmax)
    with C.op("attention out copy", ctx) as r:
        return r.out(ctx.view(b, a, s, d).transpose(1, 2).contiguous().reshape(b, s, a * d))


def repeat_kv_region(C, name, t, b, s, g, a, d):
    with C.op(name, t) as r:  # HF repeat_kv: expand + reshape materializes a heads
        return r.out(t[:, :, None].expand(b, g, a // g, s, d).reshape(b, a, s, d))


def neox_block(C, P, x, cos, sin, mask, p):
    """GPTNeoXLayer (modeling_gpt_neox.py @ 006bd23dd0ce), use_parallel_residual: fused
    query_key_value viewed as [b, s, a, 3d] and split per head (views), partial rotary on
    rotary_ndims channels, two LayerNorms of x, GeLU MLP, x + attn + mlp."""
    b, s, h = x.shape
    a, d, rot = P["a"], P["d"], P["rot"]
    with C.op("norm1", x) as r:
        ln1 = r.out(F.layer_norm(x, (h,), P["ln1_w"], P["ln1_b"]))
    with C.op("qkv", ln1) as r:
        qkv = r.out(F.linear(ln1, P["qkv_w"], P["qkv_b"]))
    with C.op("qkv split", qkv) as r:
        # qkv.view(b, s, a, 3d).transpose(1, 2).chunk(3, dim=-1): views of the fused output
        q, k, v = r.out(*qkv.view(b, s, a, 3 * d).transpose(1, 2).chunk(3, dim=-1))
    qr = partial_rope(C, "rope q", q, cos, sin, rot)
    kr = partial_rope(C, "rope k", k, cos, sin, rot)
    c = hf_eager(C, qr, kr, v, b, s, a, d, mask, p, hf_softmax=False)
    with C.op("proj", c) as r:
        o = r.out(F.linear(c, P["proj_w"], P["proj_b"]))
    o = dropout(C, "proj dropout", o, p)
    with C.op("norm2", x) as r:
        ln2 = r.out(F.layer_norm(x, (h,), P["ln2_w"], P["ln2_b"]))
    with C.op("fc1", ln2) as r:
        u = r.out(F.linear(ln2, P["fc1_w"], P["fc1_b"]))
    with C.op("gelu", u) as r:
        gu = r.out(F.gelu(u))  # hidden_act "gelu": the exact GeLU
    with C.op("fc2", gu) as r:
        m = r.out(F.linear(gu, P["fc2_w"], P["fc2_b"]))
    m = dropout(C, "mlp dropout", m, p)
    with C.op("mlp + attention", m, o) as r:
        mo = r.out(m + o)
    with C.op("residual", mo, x) as r:
        return r.out(mo + x)


def hf_rope_eager(C, q, k, v, b, s, a, g, d, cos, sin, mask, p):
    """HF's eager attention on [b, s, n*d] projections: per-head views, rotary on q and k,
    repeat_kv where K/V have fewer heads, then the eager core (Phi-3, OLMo 2)."""
    heads = lambda t, n: t.view(b, s, n, d).transpose(1, 2)
    qr = hf_rope(C, "rope q", heads(q, a), cos, sin)
    kr = hf_rope(C, "rope k", heads(k, g), cos, sin)
    kk, vv = kr, heads(v, g)
    if g != a:
        kk = repeat_kv_region(C, "repeat k", kr, b, s, g, a, d)
        vv = repeat_kv_region(C, "repeat v", heads(v, g), b, s, g, a, d)
    return hf_eager(C, qr, kk, vv, b, s, a, d, mask, p)


def phi3_block(C, P, x, cos, sin, mask, p):
    """Phi3DecoderLayer (modeling_phi3.py): fused qkv_proj sliced into q, k, v (views), rotary,
    repeat_kv, eager attention, resid_pdrop after both sub-layers, fused gate_up_proj chunked
    (views), up * silu(gate)."""
    b, s, h = x.shape
    a, g, d = P["a"], P["g"], P["d"]
    y = rms_norm(C, P["ln1_w"], x)
    with C.op("qkv", y) as r:
        qkv = r.out(F.linear(y, P["qkv_w"]))
    with C.op("qkv split", qkv) as r:
        q, k, v = r.out(qkv[..., :a * d], qkv[..., a * d:(a + g) * d], qkv[..., (a + g) * d:])
    c = hf_rope_eager(C, q, k, v, b, s, a, g, d, cos, sin, mask, p)
    with C.op("proj", c) as r:
        o = r.out(F.linear(c, P["o_w"]))
    o = dropout(C, "proj dropout", o, p)
    with C.op("residual 1", x, o) as r:
        x2 = r.out(x + o)
    y2 = rms_norm(C, P["ln2_w"], x2)
    with C.op("gate_up proj", y2) as r:
        gu = r.out(F.linear(y2, P["gate_up_w"]))
    with C.op("gate_up chunk", gu) as r:
        gate, up = r.out(*gu.chunk(2, dim=-1))
    with C.op("silu", gate) as r:
        act = r.out(F.silu(gate))
    with C.op("gated mul", up, act) as r:
        prod = r.out(up * act)
    with C.op("down proj", prod) as r:
        m = r.out(F.linear(prod, P["down_w"]))
    m = dropout(C, "mlp dropout", m, p)
    with C.op("residual 2", x2, m) as r:
        return r.out(x2 + m)


def olmo2_norm(C, name, w, x, eps=1e-6):
    """Olmo2RMSNorm.forward (modeling_olmo2.py @ 000c33fdfde1): x.to(fp32); x * rsqrt(mean(x^2)
    + eps); (self.weight * x).to(input_dtype): the weight multiplied in directly (no 1 + w)."""
    in_dtype = x.dtype
    with C.op("rmsnorm to fp32", x) as r:
        hs = r.out(x.to(torch.float32))
    with C.op(name, hs) as r:
        var = r.out(hs.pow(2).mean(-1, keepdim=True))
    with C.op("rmsnorm rsqrt", var) as r:
        rs = r.out(torch.rsqrt(var + eps))
    with C.op("rmsnorm scale", hs, rs) as r:
        hn = r.out(hs * rs)
    with C.op("rmsnorm weight", hn) as r:
        y = r.out(w * hn)
    with C.op("rmsnorm to input dtype", y) as r:
        return r.out(y.to(in_dtype))


def olmo2_block(C, P, x, cos, sin, mask, p):
    """Olmo2DecoderLayer (modeling_olmo2.py @ 000c33fdfde1): no pre-norms; q_norm and k_norm
    over the whole q and k projections; post_attention_layernorm and post_feedforward_layernorm
    on the sub-layer outputs before the residual adds."""
    b, s, h = x.shape
    a, g, d = P["a"], P["g"], P["d"]
    with C.op("q proj", x) as r:
        q = r.out(F.linear(x, P["q_w"]))
    with C.op("k proj", x) as r:
        k = r.out(F.linear(x, P["k_w"]))
    with C.op("v proj", x) as r:
        v = r.out(F.linear(x, P["v_w"]))
    q = olmo2_norm(C, "q norm", P["qn_w"], q)
    k = olmo2_norm(C, "k norm", P["kn_w"], k)
    c = hf_rope_eager(C, q, k, v, b, s, a, g, d, cos, sin, mask, p)
    with C.op("proj", c) as r:
        o = r.out(F.linear(c, P["o_w"]))
    o = olmo2_norm(C, "post-attention norm", P["post_attn_w"], o)
    with C.op("residual 1", x, o) as r:
        x2 = r.out(x + o)
    m = swiglu_mlp(C, P, x2)
    m = olmo2_norm(C, "post-feedforward norm", P["post_ff_w"], m)
    with C.op("residual 2", x2, m) as r:
        return r.out(x2 + m)


def falcon_block(C, P, x, cos, sin, mask, p):
    """FalconDecoderLayer, eager attention (modeling_falcon.py @ 00dcc6dda6f6), falcon-7b's
    layout: multi_query (one K/V head), parallel_attn with one input_layernorm, no biases.
    _split_heads: fused_qkv.view(b, s, a + 2, d); query [..., :-2, :] (a view), key [..., [-2], :]
    and value [..., [-1], :] (advanced indexing: copies); query.transpose(1, 2).reshape(b, a, s, d)
    (a copy), key and value's the same (views: one head). Eager: scores = q @ k^T (k broadcast
    over the heads), `/= sqrt(d)` in place, softmax(scores + mask), probs @ v (v broadcast),
    view/permute/reshape, dense. mlp_output += attention_output; dropout_add."""
    b, s, h = x.shape
    a, d = P["a"], P["d"]
    with C.op("norm1", x) as r:
        ln = r.out(F.layer_norm(x, (h,), P["ln1_w"], P["ln1_b"]))
    with C.op("qkv", ln) as r:
        qkv = r.out(F.linear(ln, P["qkv_w"]))
    with C.op("qkv split", qkv) as r:
        f = qkv.view(b, s, a + 2, d)
        q, k, v = f[..., :-2, :], f[..., [-2], :], f[..., [-1], :]
        q = q.transpose(1, 2).reshape(b, a, s, d)
        k = k.transpose(1, 2).reshape(b, 1, s, d)
        v = v.transpose(1, 2).reshape(b, 1, s, d)
        r.out(q, k, v)
    qr = hf_rope(C, "rope q", q, cos, sin)
    kr = hf_rope(C, "rope k", k, cos, sin)
    with C.op("qk", qr, kr) as r:
        scores = r.out(qr @ kr.transpose(-1, -2))
    with C.op("attention scale", scores) as r:
        scores /= math.sqrt(d)
        scores = r.out(scores.view(scores.shape))
    with C.op("causal mask", scores) as r:
        # HF's additive 4-D mask (0 / finfo.min), made outside the layer
        masked = r.out(scores + P["add_mask"])
    with C.op("softmax", masked) as r:
        probs = r.out(F.softmax(masked, dim=-1, dtype=x.dtype))
    with C.op("av", probs, v) as r:
        ctx = r.out(probs @ v)
    with C.op("attention out copy", ctx) as r:
        c = r.out(ctx.view(b, a, s, d).permute(0, 2, 1, 3).reshape(b, s, a * d))
    with C.op("proj", c) as r:
        o = r.out(F.linear(c, P["proj_w"]))
    with C.op("fc1", ln) as r:
        u = r.out(F.linear(ln, P["fc1_w"]))
    with C.op("gelu", u) as r:
        gu = r.out(F.gelu(u))
    with C.op("fc2", gu) as r:
        m = r.out(F.linear(gu, P["fc2_w"]))
    with C.op("attention + mlp", m, o) as r:
        m += o  # in place: mlp_output += attention_output
        m = r.out(m.view(m.shape))
    m = dropout(C, "dropout_add", m, p)
    with C.op("residual", x, m) as r:
        return r.out(x + m)


def hf_loss(C, P, y, labels, cap=None):
    """HF causal-LM loss: lm head, logits.float(), cross_entropy = log_softmax + nll_loss
    (the labels already shifted by the data pipeline). `cap`: Gemma 2's final soft-capping."""
    with C.op("lm head", y) as r:
        logits = r.out(F.linear(y, P["lm_w"]))
    if cap:
        logits = softcap(C, logits, cap)
    with C.op("logits to fp32", logits) as r:
        l32 = r.out(logits.float())
    with C.op("log softmax", l32) as r:
        logp = r.out(F.log_softmax(l32.view(-1, l32.shape[-1]), dim=-1))
    with C.op("nll loss", logp, labels) as r:
        return r.out(F.nll_loss(logp, labels))


def hf_cls_head(C, P, y, labels, head, p):
    """implhf: HF classification heads after the final norm (sim/src/blocks_heads.cpp).
    token-classification: dropout, classifier with bias on every token, cross entropy
    (modeling_bert.py @ 8ec58104 BertForTokenClassification, GPT2ForTokenClassification);
    sequence-classification (BertPooler): hidden_states[:, 0], dense, tanh, dropout, classifier,
    cross entropy over [b, num_labels]."""
    if head == "sequence-classification":
        with C.op("first token", y) as r:
            first = r.out(y.transpose(0, 1)[:, 0] if y.shape[0] != labels.shape[0] else y[:, 0])
        with C.op("pooler dense", first) as r:
            pd = r.out(F.linear(first, P["pool_w"], P["pool_b"]))
        with C.op("pooler tanh", pd) as r:
            y = r.out(torch.tanh(pd))
    y = dropout(C, "classifier dropout", y, p)
    with C.op("classifier", y) as r:
        logits = r.out(F.linear(y, P["cls_w"], P["cls_b"]))
    with C.op("log softmax", logits) as r:
        logp = r.out(F.log_softmax(logits.reshape(-1, logits.shape[-1]), dim=-1))
    with C.op("nll loss", logp, labels) as r:
        return r.out(F.nll_loss(logp, labels))


# famenc (issue 12): T5 (modeling_t5.py @ 6b8b757dfcb5), an encoder block and a decoder block of
# each kind (the first of a stack makes the position bias), fp32. Region names are the
# simulator's (sim/src/blocks_encdec.cpp).
T5 = dict(DIMS, family="t5", g=4, d=6, f=40, t=10, buckets=8)  # inner a*d = 24 != h


def t5_bucket(rel, bidirectional, num_buckets, max_distance=128):
    """T5Attention._relative_position_bucket."""
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


def t5_norm(C, w, x, eps=1e-6):
    """fam12: T5LayerNorm.forward (rms_norm's t5 path)."""
    return rms_norm(C, w, x, eps, t5=True)


def t5_position_bias(C, P, b, sq, decoder):
    """compute_bias and `position_bias + mask` in the stack's first block."""
    with C.op("relative position buckets") as r:
        rel = torch.arange(sq)[None, :] - torch.arange(sq)[:, None]
        bucket = r.out(t5_bucket(rel, not decoder, P["buckets"]))
    with C.op("relative bias lookup", bucket) as r:
        values = r.out(F.embedding(bucket, P["dec_rel" if decoder else "enc_rel"]).permute(2, 0, 1).unsqueeze(0))
    dtype = values.dtype
    if decoder:
        with C.op("causal mask (4d)") as r:
            m = torch.full((sq, sq), torch.finfo(dtype).min, dtype=dtype).triu(1)
            mask = r.out(m[None, None].expand(b, 1, -1, -1).clone())
    else:
        with C.op("extended attention mask") as r:
            mask = r.out((1.0 - torch.ones(b, sq)[:, None, None, :].to(dtype)) * torch.finfo(dtype).min)
    with C.op("position bias + mask", values, mask) as r:
        return r.out(values + mask)


def t5_attention(C, P, pre, xq, xkv, bias, p):
    """T5Attention.forward, eager: no scaling, `scores += position_bias`, softmax of
    scores.float() cast back, dropout, matmul with v, the output copy and o."""
    b, sq, _ = xq.shape
    a, d = P["a"], P["d"]
    with C.op("q", xq) as r:
        q = r.out(F.linear(xq, P[pre + "q"]))
    with C.op("k", xkv) as r:
        k = r.out(F.linear(xkv, P[pre + "k"]))
    with C.op("v", xkv) as r:
        v = r.out(F.linear(xkv, P[pre + "v"]))
    heads = lambda t: t.view(b, -1, a, d).transpose(1, 2)
    with C.op("qk", q, k) as r:
        scores = r.out(torch.matmul(heads(q), heads(k).transpose(3, 2)))
    with C.op("scores += position bias", scores, bias) as r:
        scores += bias
        scores = r.out(scores.view(scores.shape))  # in place: a view of the scores
    with C.op("scores.float()", scores) as r:
        s32 = r.out(scores.float())
    with C.op("softmax", s32) as r:
        probs = r.out(F.softmax(s32, dim=-1))
    with C.op("type_as(scores)", probs) as r:
        probs = r.out(probs.type_as(scores))
    probs = dropout(C, "attention dropout", probs, p)
    with C.op("av", probs, v) as r:
        out = r.out(torch.matmul(probs, heads(v)))
    with C.op("attention out copy", out) as r:
        c = r.out(out.transpose(1, 2).contiguous().view(b, -1, a * d))
    with C.op("o", c) as r:
        return r.out(F.linear(c, P[pre + "o"]))


def t5_block(C, P, x, bias, p, enc=None, cross_bias=None):
    """T5Block: self-attention, cross-attention (decoder), DenseReluDense; pre-norm residuals."""
    y = t5_norm(C, P["sa_ln"], x)
    a1 = dropout(C, "self-attention dropout", t5_attention(C, P, "sa_", y, y, bias, p), p)
    with C.op("residual 1", x, a1) as r:
        x = r.out(x + a1)
    if enc is not None:
        y = t5_norm(C, P["ca_ln"], x)
        a2 = dropout(C, "cross-attention dropout", t5_attention(C, P, "ca_", y, enc, cross_bias, p), p)
        with C.op("residual 2", x, a2) as r:
            x = r.out(x + a2)
    y = t5_norm(C, P["ff_ln"], x)
    with C.op("wi", y) as r:
        u = r.out(F.linear(y, P["wi"]))
    with C.op("relu", u) as r:
        act = r.out(F.relu(u))
    act = dropout(C, "ff dropout", act, p)
    with C.op("wo", act) as r:
        m = r.out(F.linear(act, P["wo"]))
    m = dropout(C, "ff dropout out", m, p)
    with C.op("residual ff", x, m) as r:
        return r.out(x + m)


def run_t5_case(dims, p, regime="fp32"):
    """Blocks 0 and 1 of each stack, and (fam12) the head: the decoder's final norm and
    dropout, `sequence_output * d_model**-0.5` (tied embeddings), lm_head, and
    CrossEntropyLoss on lm_logits as they are (T5ForConditionalGeneration.forward: no .float())."""
    dtype, _, sim_precision, label = REGIMES[regime]
    gen = torch.Generator().manual_seed(0)
    C = Census()
    b, s, t, h, a, d, f = (dims[k] for k in ("b", "s", "t", "h", "a", "d", "f"))

    def prm(*shape):
        return C.param((torch.randn(*shape, generator=gen) * 0.05).to(dtype).requires_grad_())

    P = dict(a=a, d=d, buckets=dims["buckets"], enc_rel=prm(dims["buckets"], a),
             dec_rel=prm(dims["buckets"], a), sa_ln=prm(h), ca_ln=prm(h), ff_ln=prm(h),
             sa_q=prm(a * d, h), sa_k=prm(a * d, h), sa_v=prm(a * d, h), sa_o=prm(h, a * d),
             ca_q=prm(a * d, h), ca_k=prm(a * d, h), ca_v=prm(a * d, h), ca_o=prm(h, a * d),
             wi=prm(f, h), wo=prm(h, f))
    x = torch.randn(b, s, h, generator=gen).to(dtype).requires_grad_()    # the encoder's embeddings
    enc = torch.randn(b, s, h, generator=gen).to(dtype).requires_grad_()  # the encoder's output
    y = torch.randn(b, t, h, generator=gen).to(dtype).requires_grad_()    # the decoder's embeddings
    # fam12: the head's parameters and inputs come from their own generator (the fp32 cases'
    # blocks keep their values)
    hgen = torch.Generator().manual_seed(4)
    P.update(fin_ln=C.param((torch.randn(h, generator=hgen) * 0.05).to(dtype).requires_grad_()),
             table=C.param((torch.randn(dims["v"], h, generator=hgen) * 0.05).to(dtype)
                           .requires_grad_()))
    yh = torch.randn(b, t, h, generator=hgen).to(dtype).requires_grad_()  # the last block's output
    labels = torch.randint(0, dims["v"], (b * t,), generator=hgen)
    sections, outs = {}, []
    with torch.autograd.graph.saved_tensors_hooks(C.pack, lambda t_: t_):
        n = 0
        bias = t5_position_bias(C, P, b, s, False)
        xe = t5_block(C, P, x, bias, p)
        sections["enc0"], n = C.ops[n:], len(C.ops)
        outs.append(t5_block(C, P, xe, bias, p))
        sections["enc1"], n = C.ops[n:], len(C.ops)
        dbias = t5_position_bias(C, P, b, t, True)
        with C.op("cross-attention zero bias") as r:
            zeros = r.out(torch.zeros((1, a, t, s), dtype=dtype))  # dtype=scores.dtype
        with C.op("inverted encoder mask") as r:  # invert_attention_mask: the model's dtype
            emask = r.out((1.0 - torch.ones(b, s, dtype=torch.long)[:, None, None, :].to(dtype))
                          * torch.finfo(dtype).min)
        with C.op("cross bias + mask", zeros, emask) as r:
            cbias = r.out(zeros + emask)
        yd = t5_block(C, P, y, dbias, p, enc, cbias)
        sections["dec0"], n = C.ops[n:], len(C.ops)
        outs.append(t5_block(C, P, yd, dbias, p, enc, cbias))
        sections["dec1"], n = C.ops[n:], len(C.ops)
        # fam12: T5Stack's final_layer_norm and dropout, the tied head's rescale, lm_head, loss
        yn = dropout(C, "decoder dropout", t5_norm(C, P["fin_ln"], yh), p)
        with C.op("rescale d_model**-0.5", yn) as r:
            yr = r.out(yn * (h ** -0.5))
        with C.op("lm head", yr) as r:
            logits = r.out(F.linear(yr, P["table"]))
        with C.op("log softmax", logits) as r:
            logp = r.out(F.log_softmax(logits.view(-1, logits.shape[-1]), dim=-1))
        with C.op("nll loss", logp, labels) as r:
            loss = r.out(F.nll_loss(logp, labels))
        sections["head"] = C.ops[n:]
    (sum(o.float().sum() for o in outs) + loss).backward()
    return dict({
        "family": "t5",
        "regime": regime,
        "regime_label": label,
        "informational": False,
        "sim_precision": sim_precision,
        "dropout": p,
        "dims": {k: dims[k] for k in ("b", "s", "t", "h", "a", "g", "d", "f", "v", "buckets")},
    }, **sections)


# moe2 (issue 13): MLA as HF's DeepseekV2Attention runs it
# (src/transformers/models/deepseek_v2/modeling_deepseek_v2.py @ 0233e509531a: forward,
# apply_rotary_emb, DeepseekV2RotaryEmbedding, DeepseekV2RMSNorm), from the block's input norm to
# the query and key concatenations. SDPA, HF's default after them, is not in torch 1.13; the
# eager cases (feat3: `eager=True`) go on through eager_attention_forward (qk head dim nope + rope
# != v head dim vd) to the [b, s, a * vd] copy that o_proj takes.
MLA = dict(DIMS, family="deepseek_v2", g=4, nope=6, rope=4, d=10, vd=8, r=12, ql=0, f=40)
MLA_Q = dict(MLA, ql=16)  # with the q latent (q_a_proj, q_a_layernorm, q_b_proj)


def run_mla_case(dims, regime, eager=False):
    dtype = REGIMES[regime][0]
    gen = torch.Generator().manual_seed(2)
    C = Census()
    b, s, h, a = (dims[k] for k in ("b", "s", "h", "a"))
    nope, rope, vd, r, ql = (dims[k] for k in ("nope", "rope", "vd", "r", "ql"))
    qd = nope + rope

    def prm(*shape):
        return C.param((torch.randn(*shape, generator=gen) * 0.05).to(dtype).requires_grad_())

    P = dict(ln1_w=prm(h), kv_a_w=prm(r + rope, h), kv_ln_w=prm(r), kv_b_w=prm(a * (nope + vd), r))
    if ql:
        P.update(q_a_w=prm(ql, h), q_ln_w=prm(ql), q_b_w=prm(a * qd, ql))
    else:
        P.update(q_w=prm(a * qd, h))
    x = torch.randn(b, s, h, generator=gen).to(dtype).requires_grad_()
    # DeepseekV2RotaryEmbedding.forward with position_ids = cache_position.unsqueeze(0) (batch
    # 1: DeepseekV2Model.forward when the Trainer passes none): torch.polar in fp32, complex64
    # [1, s, rope / 2], made once per forward (no gradient)
    inv = 1.0 / (10000 ** (torch.arange(0, rope, 2, dtype=torch.float32) / rope))
    freqs = torch.outer(torch.arange(s, dtype=torch.float32), inv)[None]
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    with torch.autograd.graph.saved_tensors_hooks(C.pack, lambda t_: t_):
        y = rms_norm(C, P["ln1_w"], x)
        if ql:
            with C.op("q_a proj", y) as rg:
                qa = rg.out(F.linear(y, P["q_a_w"]))
            qa = rms_norm(C, P["q_ln_w"], qa)
            with C.op("q_b proj", qa) as rg:
                q = rg.out(F.linear(qa, P["q_b_w"]))
        else:
            with C.op("q proj", y) as rg:
                q = rg.out(F.linear(y, P["q_w"]))
        with C.op("q_nope, q_pe split", q) as rg:
            q_nope, q_pe = rg.out(*torch.split(q.view(b, s, -1, qd).transpose(1, 2),
                                                [nope, rope], dim=-1))
        with C.op("kv_a proj", y) as rg:
            ckv = rg.out(F.linear(y, P["kv_a_w"]))
        with C.op("kv latent split", ckv) as rg:
            lat, k_pe = rg.out(*torch.split(ckv, [r, rope], dim=-1))
        latn = rms_norm(C, P["kv_ln_w"], lat)
        with C.op("kv_b proj", latn) as rg:
            kvb = rg.out(F.linear(latn, P["kv_b_w"]))
        with C.op("k_nope, value split", kvb) as rg:
            k_nope, v = rg.out(*torch.split(kvb.view(b, s, -1, nope + vd).transpose(1, 2),
                                             [nope, vd], dim=-1))
        fc = freqs_cis.unsqueeze(1)

        def complex_rope(name, t):  # apply_rotary_emb, one of its two tensors
            with C.op(name, t, freqs_cis) as rg:
                tc = torch.view_as_complex(t.float().reshape(*t.shape[:-1], -1, 2))
                return rg.out(torch.view_as_real(tc * fc).flatten(3).type_as(t))

        q_pe = complex_rope("rope q (complex)", q_pe)
        k_pe = complex_rope("rope k (complex)", k_pe.view(b, 1, s, rope))
        with C.op("query cat", q_nope, q_pe) as rg:
            qs = rg.out(torch.cat((q_nope, q_pe), dim=-1))
        with C.op("key cat", k_nope, k_pe) as rg:
            ks = rg.out(torch.cat((k_nope, k_pe.expand(*k_nope.shape[:-1], -1)), dim=-1))
        if eager:
            # feat3: eager_attention_forward @ 0233e509 with num_key_value_groups 1 (no
            # repeat_kv copy): matmul(q, k^T) * scaling (qk_head_dim ** -0.5), the causal mask,
            # softmax, dropout (0 here), matmul(probs, v), transpose(1, 2).contiguous(). The
            # concatenated q and k are contiguous [b, a, s, qd]; v is a strided view of kv_b's
            # output, which matmul folds to [b*a, s, vd] with a copy. (HF's softmax runs with
            # dtype=float32 and casts back: the same ops in this fp32 case.)
            mask = C.buffer(torch.ones(s, s, dtype=torch.bool).tril())
            to3 = lambda t_: t_.reshape(b * a, s, t_.shape[-1])
            c = attention(C, qs, ks, v, to3, mask, 0.0, qd, scale_op=True)
            with C.op("attention out copy", c) as rg:
                o = rg.out(c.view(b, a, s, vd).transpose(1, 2).contiguous().reshape(b, s, a * vd))
    if eager:
        o.float().sum().backward()
    else:
        (qs.float().sum() + ks.float().sum() + v.float().sum()).backward()
    return {
        "family": "deepseek_v2",
        "regime": regime,
        "regime_label": REGIMES[regime][3],
        "informational": False,
        "sim_precision": REGIMES[regime][2],
        "dropout": 0.0,
        "dims": {k: dims[k] for k in ("b", "s", "h", "a", "g", "d", "f", "v", "nope", "rope",
                                      "vd", "r", "ql")},
        "eager": eager,  # feat3
        "mla": C.ops,
    }


# moe2: DeepSeek-V2's MoE layer (modeling_deepseek_v2.py @ 0233e509531a DeepseekV2Moe,
# DeepseekV2Experts: the router in fp32, greedy top-k unsorted, routed_scaling_factor, the 3-D
# gate_up_proj sliced per expert and chunked, shared experts added after), from its input.
DSMOE = dict(DIMS, family="deepseek_v2", e=4, k=2, fe=40, shared=80, scaling=1.5)


def run_deepseek_moe_case(dims, regime):
    dtype = REGIMES[regime][0]
    gen = torch.Generator().manual_seed(3)
    C = Census()
    b, s, h, e, k, fe, sf = (dims[x] for x in ("b", "s", "h", "e", "k", "fe", "shared"))
    n = b * s

    def prm(*shape):
        return C.param((torch.randn(*shape, generator=gen) * 0.05).to(dtype).requires_grad_())

    gw = torch.zeros(e, h)
    for i in range(e):
        gw[i, i] = 1.0  # the router reads the spiked columns (route_spikes): kN/E tokens each
    P = dict(router_w=C.param(gw.to(dtype).requires_grad_()), gate_up=prm(e, 2 * fe, h),
             down=prm(e, h, fe), sh_w1=prm(sf, h), sh_w3=prm(sf, h), sh_w2=prm(h, sf))
    x = route_spikes(torch.randn(b, s, h, generator=gen), e).to(dtype).requires_grad_()
    with torch.autograd.graph.saved_tensors_hooks(C.pack, lambda t_: t_):
        with C.op("router input fp32", x) as r:
            x32 = r.out(x.type(torch.float32))
        with C.op("router weight fp32", P["router_w"]) as r:
            w32 = r.out(P["router_w"].type(torch.float32))
        with C.op("router", x32, w32) as r:
            logits = r.out(F.linear(x32, w32))
        with C.op("router softmax", logits) as r:
            probs = r.out(logits.view(-1, e).softmax(dim=-1, dtype=torch.float32))
        with C.op("router topk", probs) as r:
            tw, ti = r.out(*torch.topk(probs, k=k, dim=-1, sorted=False))
        with C.op("routed scaling", tw) as r:
            tw = r.out(tw * dims["scaling"])
        hidden = x.view(-1, h)
        with C.op("moe output (zeros)", hidden) as r:
            out = r.out(torch.zeros_like(hidden))
        with torch.no_grad():
            with C.op("expert mask (one-hot)", ti) as r:
                mask = r.out(F.one_hot(ti, num_classes=e).permute(2, 1, 0))
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
        if [int(mask[i].sum()) for i in range(e)] != [n * k // e] * e:
            raise RuntimeError("census routing is not balanced")
        for ex in hit:
            ex = int(ex[0])
            with C.op("expert token ids", mask) as r:
                pos, tok = r.out(*torch.where(mask[ex]))
            with C.op("expert gather", hidden, tok) as r:
                cur = r.out(hidden[tok])
            with C.op("expert gate_up", cur) as r:
                gu = r.out(F.linear(cur, P["gate_up"][ex]))
            with C.op("expert gate_up chunk", gu) as r:
                g, u = r.out(*gu.chunk(2, dim=-1))
            with C.op("expert silu", g) as r:
                act = r.out(F.silu(g))
            with C.op("expert swiglu mul", act, u) as r:
                prod = r.out(act * u)
            with C.op("expert w2", prod) as r:
                y = r.out(F.linear(prod, P["down"][ex]))
            with C.op("expert routing weight", tw, tok, pos) as r:
                we = r.out(tw[tok, pos, None])
            with C.op("expert * weight", y, we) as r:
                yw = r.out(y * we)
            with C.op("expert out cast", yw) as r:
                yw = r.out(yw.to(out.dtype))
            with C.op("expert index_add_", out, yw, tok) as r:
                out.index_add_(0, tok, yw)
                r.out(out.view(out.shape))
        sh = hf_swiglu(C, P, "sh_", x, True)
        with C.op("routed + shared", out, sh) as r:
            res = r.out(out.view(b, s, h) + sh)
    res.float().sum().backward()
    return {
        "family": "deepseek_v2", "regime": regime, "regime_label": REGIMES[regime][3],
        "informational": False, "sim_precision": REGIMES[regime][2], "dropout": 0.0,
        "dims": {x_: dims[x_] for x_ in ("b", "s", "h", "a", "e", "k", "fe", "shared", "scaling",
                                         "v")},
        "moe": C.ops,
    }


# ---------------------------------------------------------------------------------------------

REGIMES = {
    # name: (parameter and activation dtype, autocast, simulator precision, label)
    "fp32": (torch.float32, False, "fp32", "fp32"),
    "bf16-mixed": (torch.bfloat16, False, "bf16-mixed",
                   "bf16-mixed (bf16 parameters and activations, no autocast)"),
    "cpu-autocast": (torch.float32, True, "bf16-amp", CPU_AUTOCAST_LABEL),
}


# census12 (issue 12): ViT's embedding and head (modeling_vit.py; sim/src/blocks_encdec.cpp
# vit_embedding, vit_head), in each regime. Its encoder blocks are the shared pre-LN rows.
VIT = dict(b=2, image=8, patch=4, c=3, h=32, a=4, d=8, f=128, labels=3)  # 4 patches + class = 5


def run_vit_case(dims, regime, p):
    dtype, autocast, sim_precision, label = REGIMES[regime]
    gen = torch.Generator().manual_seed(2)
    C = Census()
    b, img, pt, ch, h, n_lab = (dims[k] for k in ("b", "image", "patch", "c", "h", "labels"))
    n = (img // pt) ** 2 + 1

    def prm(*shape):
        return C.param((torch.randn(*shape, generator=gen) * 0.05).to(dtype).requires_grad_())

    P = dict(patch_w=prm(h, ch, pt, pt), patch_b=prm(h), cls=prm(1, 1, h), pos=prm(1, n, h),
             ln_w=prm(h), ln_b=prm(h), cls_w=prm(n_lab, h), cls_b=prm(n_lab))
    pixels = torch.randn(b, ch, img, img, generator=gen)  # fp32 from the data loader, no grad
    y = torch.randn(b, n, h, generator=gen).to(dtype).requires_grad_()  # the encoder's output
    labels = torch.randint(0, n_lab, (b,), generator=gen)
    sections = {}
    with torch.autograd.graph.saved_tensors_hooks(C.pack, lambda t: t):
        # ViTModel.forward: pixel_values.to(projection.weight.dtype) when they differ
        with C.op("pixel cast", pixels) as r:
            px = r.out(pixels.to(P["patch_w"].dtype))
        # ViTPatchEmbeddings.forward: projection(pixel_values).flatten(2).transpose(1, 2)
        with C.op("patch conv", px) as r:
            pe = r.out(F.conv2d(px, P["patch_w"], P["patch_b"], stride=pt))
        # ViTEmbeddings.forward: torch.cat((cls_tokens.expand(b, -1, -1), embeddings), dim=1)
        with C.op("cat class token", pe) as r:
            x = r.out(torch.cat((P["cls"].expand(b, -1, -1), pe.flatten(2).transpose(1, 2)),
                                dim=1))
        with C.op("+ position embeddings", x) as r:
            x = r.out(x + P["pos"])
        x = dropout(C, "embedding dropout", x, p)
        sections["embedding"], k = C.ops[:], len(C.ops)
        # ViTModel.layernorm; ViTForImageClassification: classifier(sequence_output[:, 0, :]),
        # loss_fct = CrossEntropyLoss() on logits.view(-1, num_labels)
        with C.op("final norm", y) as r:
            yn = r.out(F.layer_norm(y, (h,), P["ln_w"], P["ln_b"]))
        with C.op("class token slice", yn) as r:
            c = r.out(yn[:, 0, :])
        with C.op("classifier", c) as r:
            logits = r.out(F.linear(c, P["cls_w"], P["cls_b"]))
        # CrossEntropyLoss on the logits as they are (no upcast: ForSequenceClassificationLoss)
        with C.op("log softmax", logits) as r:
            logp = r.out(F.log_softmax(logits.view(-1, n_lab), dim=-1))
        with C.op("nll loss", logp, labels) as r:
            loss = r.out(F.nll_loss(logp, labels))
        sections["head"] = C.ops[k:]
    (x.float().sum() + loss).backward()
    return dict({
        "family": "vit",
        "regime": regime,
        "regime_label": label,
        "informational": False,
        "sim_precision": sim_precision,
        "dropout": p,
        "dims": dict(dims, s=n, g=dims["a"], v=0),
    }, **sections)


def make_params(C, dims, dtype):
    gen = torch.Generator().manual_seed(0)
    h, a, g, d, f, v = (dims[k] for k in "hagdfv")

    def p(*shape):
        return C.param((torch.randn(*shape, generator=gen) * 0.05).to(dtype).requires_grad_())

    P = dict(a=a, g=g, d=d)
    if dims.get("head"):  # implhf: a classification head's parameters
        n = dims["num_labels"]
        P.update(cls_w=p(n, h), cls_b=p(n), pool_w=p(h, h), pool_b=p(h))
    if dims["family"] == "gpt2":
        P.update(ln1_w=p(h), ln1_b=p(h), qkv_w=p(3 * h, h), qkv_b=p(3 * h),
                 proj_w=p(h, a * d), proj_b=p(h), ln2_w=p(h), ln2_b=p(h),
                 fc1_w=p(f, h), fc1_b=p(f), fc2_w=p(h, f), fc2_b=p(h),
                 lm_w=p(v, h))  # tied: the word-embedding table
    elif dims["family"] in ("gemma", "gemma2", "gemma3"):  # fam12: Gemma 1 and 3 too
        P.update(ln1_w=p(h), q_w=p(a * d, h), k_w=p(g * d, h), v_w=p(g * d, h),
                 o_w=p(h, a * d), post_attn_w=p(h), ln2_w=p(h), post_ff_w=p(h),
                 gate_w=p(f, h), up_w=p(f, h), down_w=p(h, f),
                 lm_w=p(v, h))  # tied: the word-embedding table
        if dims["family"] == "gemma3":
            P.update(qn_w=p(d), kn_w=p(d))  # Gemma3RMSNorm(head_dim)
    elif dims["family"] == "gpt_neox":  # census12: biases everywhere, untied embed_out
        P.update(rot=dims["rot"], ln1_w=p(h), ln1_b=p(h), qkv_w=p(3 * h, h), qkv_b=p(3 * h),
                 proj_w=p(h, a * d), proj_b=p(h), ln2_w=p(h), ln2_b=p(h),
                 fc1_w=p(f, h), fc1_b=p(f), fc2_w=p(h, f), fc2_b=p(h), lm_w=p(v, h))
    elif dims["family"] == "falcon":  # census12: MQA fused qkv, no biases, tied head
        s = dims["s"]
        P.update(ln1_w=p(h), ln1_b=p(h), qkv_w=p((a + 2) * d, h), proj_w=p(h, a * d),
                 fc1_w=p(f, h), fc2_w=p(h, f), lm_w=p(v, h),
                 add_mask=C.buffer(torch.full((s, s), torch.finfo(dtype).min, dtype=dtype)
                                   .triu(1)))
    elif dims["family"] == "phi3":  # census12: fused qkv_proj and gate_up_proj, untied head
        P.update(ln1_w=p(h), qkv_w=p((a + 2 * g) * d, h), o_w=p(h, a * d), ln2_w=p(h),
                 gate_up_w=p(2 * f, h), down_w=p(h, f), lm_w=p(v, h))
    elif dims["family"] == "olmo2":  # census12: q/k norms over a*d and g*d, post norms
        P.update(q_w=p(a * d, h), k_w=p(g * d, h), v_w=p(g * d, h), qn_w=p(a * d),
                 kn_w=p(g * d), o_w=p(h, a * d), post_attn_w=p(h), gate_w=p(f, h),
                 up_w=p(f, h), down_w=p(h, f), post_ff_w=p(h), lm_w=p(v, h))
    else:
        P.update(ln1_w=p(h), q_w=p(a * d, h), k_w=p(g * d, h), v_w=p(g * d, h),
                 o_w=p(h, a * d), ln2_w=p(h), gate_w=p(f, h), up_w=p(f, h), down_w=p(h, f),
                 lm_w=p(v, h))  # untied lm head
    if dims.get("lora"):  # moe2: PEFT LoRA, every base parameter frozen, adapters on q and v
        for key in list(P):
            if isinstance(P[key], torch.Tensor):
                P[key].requires_grad_(False)
        r_ = dims["lora"]
        P["lora_scaling"] = 8 / r_  # LoraConfig lora_alpha 8, scaling = lora_alpha / r
        P["lora_dropout"] = dims.get("lora_dropout", 0)  # feat13: LoraConfig.lora_dropout
        # nn.Linear(in, r, bias=False) and (r, out), trainable, in fp32 whatever the base's
        # dtype: get_peft_model(autocast_adapter_dtype=True) upcasts bf16 adapters
        # (peft tuners_utils.py cast_adapter_dtype @ 5d602fdb)
        for key, out in (("q", a * d), ("v", g * d)):
            P["lora_A_" + key] = C.param((torch.randn(r_, h, generator=gen) * 0.05).requires_grad_())
            P["lora_B_" + key] = C.param((torch.randn(out, r_, generator=gen) * 0.05).requires_grad_())
    if dims.get("e"):  # moe2: routed experts (and Qwen2-MoE's shared expert, q/k/v biases)
        e, fe = dims["e"], dims["fe"]
        P.update(e=e, k=dims["k"], norm_topk=dims["norm_topk"], shared=dims.get("shared", 0))
        for i in range(e):
            P.update({"e%d_w1" % i: p(fe, h), "e%d_w3" % i: p(fe, h), "e%d_w2" % i: p(h, fe)})
        # The router reads columns 0..E-1 of the normalized input, undoing the norm's weight, so
        # that the spikes run_case puts into the block input route every token to experts
        # t mod E and t + 1 mod E: kN/E tokens each, the simulator's balanced routing.
        gw = torch.zeros(e, h)
        for i in range(e):
            gw[i, i] = 1.0 / P["ln2_w"].detach().float()[i]
        P["router_w"] = C.param(gw.to(dtype).requires_grad_())
        if P["shared"]:
            sf = P["shared"]
            P.update(sh_w1=p(sf, h), sh_w3=p(sf, h), sh_w2=p(h, sf), sh_gate_w=p(1, h),
                     q_b=p(a * d), k_b=p(g * d), v_b=p(g * d))
        if dims.get("lora"):  # lora6: the experts frozen too; adapters on w1, w3, w2 per expert
            for key in list(P):
                if isinstance(P[key], torch.Tensor) and not key.startswith("lora_"):
                    P[key].requires_grad_(False)
            r_ = dims["lora"]
            pres = ["e%d_" % i for i in range(e)] + (["sh_"] if P["shared"] else [])
            for pre in pres:
                fi = P[pre + "w1"].shape[0]
                for key, i, o in (("w1", h, fi), ("w3", h, fi), ("w2", fi, h)):
                    P["lora_A_" + pre + key] = C.param(
                        (torch.randn(r_, i, generator=gen) * 0.05).requires_grad_())
                    P["lora_B_" + pre + key] = C.param(
                        (torch.randn(o, r_, generator=gen) * 0.05).requires_grad_())
    return P


def route_spikes(x, e):
    """moe2: token t (of the flattened [b s] tokens) gets +8 in column t mod E and +6 in column
    t + 1 mod E: its top-2 experts, whatever the attention adds (weights of 0.05)."""
    t = x.view(-1, x.shape[-1])
    for i in range(t.shape[0]):
        t[i, i % e] += 8.0
        t[i, (i + 1) % e] += 6.0
    return x


def run_case(dims, regime, p, hf_layout=False):
    dtype, autocast, sim_precision, label = REGIMES[regime]
    if hf_layout:
        label += ", HF GPT2Attention layout (informational)"
    b, s, h, d = dims["b"], dims["s"], dims["h"], dims["d"]
    gen = torch.Generator().manual_seed(1)
    C = Census()
    P = make_params(C, dims, dtype)
    mask = C.buffer(torch.ones(s, s, dtype=torch.bool).tril())  # persistent causal-mask buffer
    gpt = dims["family"] == "gpt2"
    nano = dims.get("impl") == "nanogpt"  # implver: nanoGPT's own block, [b, s, h]
    hf_gpt2 = gpt and dims.get("impl") == "hf"  # exec10: HF's GPT2Block and its own loss
    shape = (s, b, h) if gpt and not hf_layout and not nano and not hf_gpt2 else (b, s, h)
    # The block input: the previous layer's output (the embedding's, here a leaf that needs grad).
    x = torch.randn(*shape, generator=gen)
    if dims.get("e"):
        x = route_spikes(x, dims["e"])  # moe2
    x = x.to(dtype).requires_grad_()
    y = torch.randn(*shape, generator=gen).to(dtype).requires_grad_()  # the final norm's output
    labels = torch.randint(0, dims["v"], (b * s,), generator=gen)
    head = dims.get("head")
    if head == "sequence-classification":
        labels = torch.randint(0, dims["num_labels"], (b,), generator=gen)
    elif head:
        labels = torch.randint(0, dims["num_labels"], (b * s,), generator=gen)
    ctx = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
    with torch.autograd.graph.saved_tensors_hooks(C.pack, lambda t: t), ctx:
        if hf_gpt2:
            # GPT2Attention.__init__: the bool `bias` buffer [1, 1, P, P] (P = s here)
            bias = C.buffer(torch.ones(s, s, dtype=torch.bool).tril().view(1, 1, s, s))
            out = hf_gpt2_block(C, P, x, bias, p)
        elif nano:
            # model.py:49-50: each block's persistent fp32 tril buffer [1, 1, block_size, block_size]
            bias = C.buffer(torch.tril(torch.ones(s, s)).view(1, 1, s, s))
            out = nanogpt_block(C, P, x, bias, p)
        elif gpt:
            # Megatron's get_default_causal_mask (transformer/utils.py: triu(diagonal=1), cached)
            mmask = C.buffer(torch.ones(s, s, dtype=torch.bool).triu(diagonal=1))
            out = gpt_block(C, P, x, mask, p, hf_layout, mmask)
        else:
            # HF LlamaRotaryEmbedding: cos, sin [b, s, d], made once per forward in x's dtype
            # census12: partial rotary (GPT-NeoX): tables rotary_ndims wide
            rd = dims.get("rot", d)
            inv = 1.0 / (10000 ** (torch.arange(0, rd, 2, dtype=torch.float32) / rd))
            fr = torch.outer(torch.arange(s, dtype=torch.float32), inv)
            emb = torch.cat((fr, fr), dim=-1)[None].expand(b, s, rd)
            cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
            block = {"gemma2": gemma2_block, "gpt_neox": neox_block, "phi3": phi3_block,
                     "olmo2": olmo2_block, "falcon": falcon_block,
                     "gemma": lambda *a_: gemma_block(*a_, 1),  # fam12
                     "gemma3": lambda *a_: gemma_block(*a_, 3)}.get(dims["family"], llama_block)
            if dims.get("window"):  # fam12: a sliding layer's mask (the window's bool buffer)
                w = dims["window"]
                mask = C.buffer(torch.ones(s, s, dtype=torch.bool).tril()
                                & ~torch.ones(s, s, dtype=torch.bool).tril(-w))
            out = block(C, P, x, cos, sin, mask, p)
        n_block = len(C.ops)
        if hf_gpt2:
            loss = hf_gpt2_loss(C, P, y, labels, b, s)
        else:
            loss = hf_cls_head(C, P, y, labels, head, p) if head else \
                hf_loss(C, P, y, labels, 30.0 if dims["family"] == "gemma2" else None)
        n_loss = len(C.ops)
        emb = None
        if dims["family"] in ("gemma", "gemma3"):  # fam12: the scaled embedding lookup
            ids = torch.randint(0, dims["v"], (b, s), generator=torch.Generator().manual_seed(3))
            emb = gemma_embedding(C, P, ids, h)
    total = out.float().sum() + loss + (emb.float().sum() if emb is not None else 0)
    total.backward()  # every save is usable: the graph is whole
    extra = {"head": head, "num_labels": dims["num_labels"]} if head else {}
    if emb is not None:
        extra["embedding"] = C.ops[n_loss:]
    if nano:
        extra["impl"] = "nanogpt"
    if hf_gpt2:
        extra["impl"] = "hf"  # exec10
    return {
        **extra,
        "family": dims["family"],
        "regime": regime,
        "regime_label": label,
        "informational": autocast or hf_layout,
        "sim_precision": sim_precision,
        "dropout": p,
        "dims": {k: dims[k] for k in ("b", "s", "h", "a", "g", "d", "f", "v", "e", "k", "fe",
                                      "shared", "norm_topk", "lora", "rot", "window",
                                      "lora_targets", "lora_dropout") if k in dims},
        "block": C.ops[:n_block],
        "loss": C.ops[n_block:n_loss],
    }


CASES = [  # name, dims, regime, dropout, HF GPT-2 layout
    ("gpt2-fp32", GPT, "fp32", 0.1, False),
    ("gpt2-bf16-mixed", GPT, "bf16-mixed", 0.1, False),
    ("gpt2-fp32-nodropout", GPT, "fp32", 0.0, False),
    ("gpt2-bf16-mixed-nodropout", GPT, "bf16-mixed", 0.0, False),
    ("llama-fp32", LLAMA, "fp32", 0.0, False),
    ("llama-bf16-mixed", LLAMA, "bf16-mixed", 0.0, False),
    ("llama-mha-fp32", LLAMA_MHA, "fp32", 0.0, False),
    ("llama-mha-bf16-mixed", LLAMA_MHA, "bf16-mixed", 0.0, False),
    ("gpt2-cpu-autocast", GPT, "cpu-autocast", 0.1, False),
    ("llama-cpu-autocast", LLAMA, "cpu-autocast", 0.0, False),
    ("gpt2-hf-layout-fp32", GPT, "fp32", 0.1, True),
    ("gemma2-fp32", GEMMA2, "fp32", 0.0, False),             # famdec
    ("gemma2-bf16-mixed", GEMMA2, "bf16-mixed", 0.0, False),  # famdec
    ("gemma-fp32", GEMMA, "fp32", 0.0, False),                # fam12
    ("gemma-bf16-mixed", GEMMA, "bf16-mixed", 0.0, False),    # fam12
    ("gemma3-fp32", GEMMA3, "fp32", 0.0, False),              # fam12
    ("gemma3-bf16-mixed", GEMMA3, "bf16-mixed", 0.0, False),  # fam12
    ("gpt-neox-fp32", NEOX, "fp32", 0.1, False),              # census12
    ("gpt-neox-bf16-mixed", NEOX, "bf16-mixed", 0.0, False),  # census12
    ("phi3-fp32", PHI3, "fp32", 0.1, False),                  # census12
    ("phi3-bf16-mixed", PHI3, "bf16-mixed", 0.0, False),      # census12
    ("olmo2-fp32", OLMO2, "fp32", 0.0, False),                # census12
    ("olmo2-bf16-mixed", OLMO2, "bf16-mixed", 0.0, False),    # census12
    ("falcon-fp32", FALCON, "fp32", 0.1, False),              # census12
    ("falcon-bf16-mixed", FALCON, "bf16-mixed", 0.0, False),  # census12
    ("mixtral-fp32", MIXTRAL, "fp32", 0.0, False),                # moe2
    ("mixtral-bf16-mixed", MIXTRAL, "bf16-mixed", 0.0, False),    # moe2
    ("mixtral-cpu-autocast", MIXTRAL, "cpu-autocast", 0.0, False),  # moe2
    ("qwen2moe-fp32", QWEN2MOE, "fp32", 0.0, False),              # moe2
    ("qwen2moe-bf16-mixed", QWEN2MOE, "bf16-mixed", 0.0, False),  # moe2
    ("llama-lora-fp32", LLAMA_LORA, "fp32", 0.0, False),          # moe2
    ("llama-lora-bf16-mixed", LLAMA_LORA, "bf16-mixed", 0.0, False),     # moe2
    ("llama-lora-cpu-autocast", LLAMA_LORA, "cpu-autocast", 0.0, False),  # moe2
    ("mixtral-lora-fp32", MIXTRAL_LORA, "fp32", 0.0, False),              # lora6
    ("mixtral-lora-bf16-mixed", MIXTRAL_LORA, "bf16-mixed", 0.0, False),  # lora6
    ("qwen2moe-lora-fp32", QWEN2MOE_LORA, "fp32", 0.0, False),            # lora6
    ("llama-lora-dropout-fp32", LLAMA_LORA_DROPOUT, "fp32", 0.0, False),          # feat13
    ("llama-lora-dropout-bf16-mixed", LLAMA_LORA_DROPOUT, "bf16-mixed", 0.0, False),  # feat13
    ("llama-lora-dropout-cpu-autocast", LLAMA_LORA_DROPOUT, "cpu-autocast", 0.0, False),  # feat13
    # implhf: the classification heads' ops (on the GPT-2 census block; the loss part is held
    # against --impl hf)
    ("gpt2-tokcls-fp32", dict(GPT, head="token-classification", num_labels=3), "fp32", 0.1,
     False),
    ("gpt2-seqcls-pooler-fp32", dict(GPT, head="sequence-classification", num_labels=3), "fp32",
     0.1, False),
    # implver (issue 10): nanoGPT's slow attention path (model.py @ 3adf61e1), held against
    # --impl nanogpt --attention standard; its loss part against --impl hf as the others
    ("nanogpt-slow-fp32", dict(GPT, impl="nanogpt"), "fp32", 0.1, False),
    ("nanogpt-slow-fp32-nodropout", dict(GPT, impl="nanogpt"), "fp32", 0.0, False),
    # exec10 (issue 10): HF's GPT-2 block as written (modeling_gpt2.py @ c44b2d99: Conv1D, eager
    # _attn, gelu_new as NewGELUActivation's pointwise ops) and GPT2LMHeadModel's loss (shifted
    # copies, no upcast), held against --impl hf
    ("gpt2-hf-fp32", dict(GPT, impl="hf"), "fp32", 0.1, False),
    ("gpt2-hf-bf16-mixed", dict(GPT, impl="hf"), "bf16-mixed", 0.1, False),
]


def dump(value, indent=""):
    """JSON with sorted keys, indented, but one line per tensor record (a dict with a
    "storage"): small diffs, one line per save."""
    if isinstance(value, dict) and "storage" not in value and value:
        inner = indent + " "
        items = ",\n".join("%s%s: %s" % (inner, json.dumps(k), dump(value[k], inner))
                           for k in sorted(value))
        return "{\n%s\n%s}" % (items, indent)
    if isinstance(value, list) and value and isinstance(value[0], dict):
        inner = indent + " "
        items = ",\n".join(inner + dump(v, inner) for v in value)
        return "[\n%s\n%s]" % (items, indent)
    return json.dumps(value, sort_keys=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", help="file to write, or - for stdout (default: "
                    "census/census.json beside this script)",
                    default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "census",
                                         "census.json"))
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    doc = {
        "schema": 1,
        "torch": torch.__version__,
        "device": "cpu",
        "note": "what torch saves for backward, per op of docs/memory-model.md; "
                "regenerate with harness/census.py (see harness/census/README.md)",
        "cases": dict({name: run_case(dims, regime, p, hf) for name, dims, regime, p, hf in CASES},
                      **{"t5-fp32": run_t5_case(T5, 0.1),  # famenc
                         "t5-fp32-nodropout": run_t5_case(T5, 0.0),
                         "t5-bf16-mixed": run_t5_case(T5, 0.0, "bf16-mixed"),  # fam12
                         "vit-fp32": run_vit_case(VIT, "fp32", 0.1),  # census12
                         "vit-bf16-mixed": run_vit_case(VIT, "bf16-mixed", 0.0),
                         # moe2: MLA up to the attention
                         "mla-fp32": run_mla_case(MLA, "fp32"),
                         "mla-bf16-mixed": run_mla_case(MLA, "bf16-mixed"),
                         "mla-qlatent-fp32": run_mla_case(MLA_Q, "fp32"),
                         "mla-qlatent-bf16-mixed": run_mla_case(MLA_Q, "bf16-mixed"),
                         # feat3: MLA's eager core attention (qk head dim != v head dim)
                         "mla-eager-fp32": run_mla_case(MLA, "fp32", eager=True),
                         "mla-qlatent-eager-fp32": run_mla_case(MLA_Q, "fp32", eager=True),
                         # moe2: DeepSeek-V2's MoE layer
                         "deepseek-moe-fp32": run_deepseek_moe_case(DSMOE, "fp32"),
                         "deepseek-moe-bf16-mixed": run_deepseek_moe_case(DSMOE, "bf16-mixed")}),
    }
    text = dump(doc) + "\n"
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
