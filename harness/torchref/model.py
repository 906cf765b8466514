"""The model op for op (docs/memory-model.md section 3; harness/census.py has the same regions),
the strategies' checkpoint regions, and the profiler's op regions."""

import contextlib
import functools
import math

import torch
import torch.nn.functional as F
import torch.utils.checkpoint as tuc

from torchref.config import UsageError, resolve_strategy

def sac_context_fn(log=None):
    """torchtitan's selective-AC policy: save the outputs of matmuls (aten.mm; addmm too, which
    F.linear with a bias dispatches to) and of SDPA; recompute everything else (the memory
    model's sac:mm: linears and SDPA are sac_save, the standard-attention bmm's recompute)."""
    create = getattr(tuc, "create_selective_checkpoint_contexts", None)
    if create is None:
        raise UsageError("--strategy sac:mm: this torch (%s) has no selective activation "
                         "checkpointing (torch.utils.checkpoint.create_selective_checkpoint_"
                         "contexts, torch >= 2.4)" % torch.__version__)
    aten = torch.ops.aten
    save = {aten.mm.default, aten.addmm.default}
    for name in ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                 "_scaled_dot_product_cudnn_attention"):
        if hasattr(aten, name):
            save.add(getattr(aten, name).default)

    def policy(ctx, op, *args, **kwargs):  # pylint: disable=unused-argument
        keep = op in save
        if log is not None and not ctx.is_recompute:  # the census: what the policy saw
            log.append((str(op), "save" if keep else "recompute"))
        return tuc.CheckpointPolicy.MUST_SAVE if keep else tuc.CheckpointPolicy.PREFER_RECOMPUTE

    return functools.partial(create, policy)


# ---------------------------------------------------------------------------------------------
# Op regions: a no-op unless profiling, when each memory-model op becomes a profiler range whose
# FLOPs (matmuls, sim's OpCost convention) and bytes (inputs + outputs) are recorded.

def nbytes(ts):
    return sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))


class Regions:
    def __init__(self):
        self.enabled = False
        self.block = -1
        self.phase = "forward"
        self.amp = False
        self.ops = []  # (block, phase, name, kind, math16, flops, bytes)

    @contextlib.contextmanager
    def op(self, name, kind, *inputs, flops=0):
        if not self.enabled:
            yield _NoOut()
            return
        # math16: matmuls on 16-bit tensor cores (bf16 operands, or autocast), as sim's Op::math16
        half = flops > 0 and (self.amp or inputs[0].dtype in (torch.bfloat16, torch.float16))
        rec = {"block": self.block, "phase": self.phase, "name": name, "kind": kind,
               "flops": flops, "in": nbytes(inputs), "out": 0, "math16": int(half)}
        out = _Out(rec)
        with torch.profiler.record_function("actsim#%d" % len(self.ops)):
            self.ops.append(rec)
            yield out


class _NoOut:
    def __call__(self, *ts):
        return ts[0] if len(ts) == 1 else ts


class _Out:
    def __init__(self, rec):
        self.rec = rec

    def __call__(self, *ts):
        self.rec["out"] += nbytes(ts)
        return ts[0] if len(ts) == 1 else ts


# ---------------------------------------------------------------------------------------------
# The model, op for op (docs/memory-model.md section 3; harness/census.py has the same regions)

def dropout(R, name, x, p):
    # p > 0: native_dropout, what F.dropout runs on CUDA (a 1-byte mask, saved); the CPU's
    # F.dropout takes another path, so it is called directly. p = 0: the identity, no op.
    if p <= 0:
        return x
    with R.op(name, "dropout", x) as out:
        return out(torch.native_dropout(x, p, True)[0])


def linear(R, name, x, w, b=None):
    rows = x.numel() // x.shape[-1]
    with R.op(name, "linear", x, w, b, flops=2 * rows * w.shape[0] * w.shape[1]) as out:
        return out(F.linear(x, w, b))


def layer_norm(R, name, x, w, b, eps):
    with R.op(name, "layer_norm", x) as out:
        return out(F.layer_norm(x, (x.shape[-1],), w, b, eps))


def rms_norm(R, name, x, w, eps):
    """HF LlamaRMSNorm.forward, eager: one region, the simulator's six ops inside."""
    with R.op(name, "rms_norm", x) as out:
        hs = x.to(torch.float32)
        var = hs.pow(2).mean(-1, keepdim=True)
        hn = hs * torch.rsqrt(var + eps)
        return out(w * hn.to(x.dtype))


class Model:
    """Parameters as plain tensors in a dict (the optimizer takes their list)."""

    def __init__(self, m, dtype, device, seed):
        self.m = m
        # drawn on the device itself: a billion CPU draws per configuration would dominate
        gen = torch.Generator(device=device).manual_seed(seed)
        h, a, g, d, f, v = (m["hidden"], m["heads"], m["kv_heads"], m["head_dim"], m["ffn"],
                            m["vocab"])
        self.params = {}

        def p(name, *shape, scale=0.02, ones=False):
            if ones:
                t = torch.ones(*shape, device=device, dtype=dtype)
            else:
                t = (torch.randn(*shape, generator=gen, device=device) * scale).to(dtype)
            self.params[name] = t.requires_grad_()
            return self.params[name]

        p("wte", v, h)
        if m["positions"] == "learned":
            p("wpe", m["max_positions"], h)
        for i in range(m["layers"]):
            if m["family"] == "gpt2":
                p("%d.ln1_w" % i, h, ones=True)
                p("%d.ln1_b" % i, h)
                p("%d.qkv_w" % i, (a + 2 * g) * d, h)
                p("%d.qkv_b" % i, (a + 2 * g) * d)
                p("%d.proj_w" % i, h, a * d)
                p("%d.proj_b" % i, h)
                p("%d.ln2_w" % i, h, ones=True)
                p("%d.ln2_b" % i, h)
                p("%d.fc1_w" % i, f, h)
                p("%d.fc1_b" % i, f)
                p("%d.fc2_w" % i, h, f)
                p("%d.fc2_b" % i, h)
            else:
                p("%d.ln1_w" % i, h, ones=True)
                for nm, rows in (("q", a * d), ("k", g * d), ("v", g * d)):
                    p("%d.%s_w" % (i, nm), rows, h)
                    if m["qkv_bias"]:
                        p("%d.%s_b" % (i, nm), rows)
                p("%d.o_w" % i, h, a * d)
                p("%d.ln2_w" % i, h, ones=True)
                p("%d.gate_w" % i, f, h)
                p("%d.up_w" % i, f, h)
                p("%d.down_w" % i, h, f)
        p("lnf_w", h, ones=True)
        if m["norm"] == "layernorm":
            p("lnf_b", h)
        if not m["tied"]:
            p("lm_w", v, h)

    def param_count(self):
        return sum(t.numel() for t in self.params.values())


class Runner:
    """One forward (and the loss) of a model under a strategy, with the knobs of a row."""

    def __init__(self, model, cfg, strategy, R, preserve_rng=True, sac_log=None):
        self.P = model.params
        self.m = model.m
        self.cfg = cfg
        self.R = R
        self.canon, self.modes, self.segs = resolve_strategy(strategy, self.m["layers"])
        self.preserve_rng = preserve_rng
        self.sac = sac_context_fn(sac_log) if "sac" in self.modes else None
        m = self.m
        p = cfg["dropout"]
        self.p_attn = m["attn_dropout"] if p is None else p
        self.p_hidden = m["hidden_dropout"] if p is None else p
        self.p_embd = m["embd_dropout"] if p is None else p
        self.flash = cfg["attention"] == "flash"
        # Megatron's [s, b, h] layout for GPT with standard attention (the fused QKV's per-head
        # [3d] columns fold to [b*a, s, d] views, no copies: docs/memory-model.md section 7);
        # [b, s, h] otherwise (HF Llama; flash's output is [b, s, a, d] and feeds proj as is).
        self.sbh = m["family"] == "gpt2" and not self.flash
        if self.flash:
            self.sdpa_kernel = flash_context()

    def ckpt(self, fn, *args, context_fn=None):
        kw = {"use_reentrant": False, "preserve_rng_state": self.preserve_rng}
        if context_fn is not None:
            kw["context_fn"] = context_fn
        return tuc.checkpoint(fn, *args, **kw)

    # -- attention ---------------------------------------------------------------------------

    def core_standard(self, q, k, v, fold, shape):
        """qk, causal mask, softmax, attention dropout, av: Megatron's core attention."""
        R, (b, a, s, d) = self.R, shape
        with R.op("qk", "bmm", q, k, flops=2 * b * a * s * s * d) as out:
            q3, k3 = fold(q), fold(k)
            # baddbmm(., q, k^T, beta=0, alpha=1/sqrt(d)): the scaling inside the matmul (as
            # Megatron). On CUDA the 1-element `self` is broadcast and never read (cuBLAS with
            # beta = 0). torch 1.13's CPU baddbmm reads its uninitialized output even with
            # beta = 0 (0 * NaN = NaN), so the CPU dry run adds a zero `self` of full size
            # (beta = 1; 0 + x is exact).
            if q3.is_cuda:
                buf, beta = torch.zeros(1, 1, 1, dtype=q3.dtype, device=q3.device), 0.0
            else:
                buf, beta = q3.new_zeros(q3.shape[0], q3.shape[1], k3.shape[1]), 1.0
            scores = out(torch.baddbmm(buf, q3, k3.transpose(1, 2), beta=beta,
                                       alpha=1.0 / math.sqrt(d)))
        with R.op("causal mask", "mask", scores) as out:
            scores = out(torch.where(self.mask, scores, float("-inf")))
        with R.op("softmax", "softmax", scores) as out:
            probs = out(torch.softmax(scores, dim=-1))
        probs = dropout(R, "attention dropout", probs, self.p_attn)
        with R.op("av", "bmm", probs, v, flops=2 * b * a * s * s * d) as out:
            return out(torch.bmm(probs, fold(v)))

    def core_flash(self, q, k, v):
        """SDPA with the flash backend forced (aten::_scaled_dot_product_flash_attention)."""
        b, a, s, d = q.shape
        with self.R.op("flash attention", "flash_attention", q, k, v,
                       flops=4 * b * a * s * s * d) as out, self.sdpa_kernel():
            kw = {"enable_gqa": True} if k.shape[1] != a else {}
            try:
                return out(F.scaled_dot_product_attention(
                    q, k, v, dropout_p=self.p_attn, is_causal=True, **kw))
            except RuntimeError as e:  # the flash backend refused (no fallback: forced)
                raise UsageError("--attention flash: SDPA's flash backend cannot run here (%s)"
                                 % str(e).splitlines()[0])

    def attention(self, i, x, q, k, v):
        """q [b, a, s, d], k and v [b, g, s, d] (views); returns [tokens, a*d] in x's layout."""
        b, a, s, d = q.shape
        sel = self.modes[i] == "sel"
        if self.flash:
            if self.cfg["amp"]:
                # SDPA is on autocast's lower-precision list: the fp32 rotated q and k of rotary
                # models are cast to 16 bits, and the casts are what flash saves. Cast here, so
                # that the casts stay outside the selective region as the simulator's "q cast",
                # "k cast" ops do (only the logsumexp is freed and recomputed).
                q, k, v = (t.to(self.cfg["half"]) for t in (q, k, v))
            o = self.ckpt(self.core_flash, q, k, v) if sel else self.core_flash(q, k, v)
            # [b, a, s, d] over [b, s, a, d] memory: transpose(1, 2).contiguous() copies nothing
            return o.transpose(1, 2).contiguous().view(b, s, a * d)
        repeat_kv = None
        if self.sbh:
            # q, k, v are [b, a, s, d] permutations of [s, b, a, d] views of the QKV storage:
            # back to [s, b, a, d], fold b and a (stride of b = a x stride of a), [b*a, s, d]
            def fold(t):
                return t.permute(2, 0, 1, 3).reshape(s, b * a, d).transpose(0, 1)
        else:
            cast = self.cfg["amp"]  # the forward runs under autocast exactly when amp

            def fold(t):
                # HF: torch.matmul folds [b, a, s, d] to [b*a, s, d], a copy unless contiguous;
                # under autocast an fp32 operand (rotated q, k) is cast to 16 bits first.
                if cast and t.dtype == torch.float32:
                    t = t.to(self.cfg["half"])
                return t.reshape(b * a, s, d)

            g = k.shape[1]
            if g != a:
                def repeat_kv(name, t):  # expand + reshape materializes a heads (HF repeat_kv)
                    with self.R.op(name, "copy", t) as out:
                        return out(t[:, :, None].expand(b, g, a // g, s, d).reshape(b, a, s, d))

        def core(q, k, v):
            if repeat_kv is not None:
                k, v = repeat_kv("repeat k", k), repeat_kv("repeat v", v)
            return self.core_standard(q, k, v, fold, (b, a, s, d))

        ctx = self.ckpt(core, q, k, v) if sel else core(q, k, v)
        with self.R.op("attention out copy", "copy", ctx) as out:
            if self.sbh:
                return out(ctx.view(b, a, s, d).permute(2, 0, 1, 3).contiguous().view(s, b, a * d))
            return out(ctx.view(b, a, s, d).transpose(1, 2).contiguous().view(b, s, a * d))

    # -- blocks ------------------------------------------------------------------------------

    def gpt_block(self, i, x):
        P, R, m = self.P, self.R, self.m
        a, g, d = m["heads"], m["kv_heads"], m["head_dim"]
        ln1 = layer_norm(R, "norm1", x, P["%d.ln1_w" % i], P["%d.ln1_b" % i], m["eps"])
        qkv = linear(R, "qkv", ln1, P["%d.qkv_w" % i], P["%d.qkv_b" % i])
        if g != a:
            raise UsageError("--model %s: GQA in a GPT block is not built" % m["name"])
        if self.sbh:  # Megatron: [s, b, a, 3d] split on the last dim
            s, b, _ = x.shape
            q, k, v = qkv.view(s, b, a, 3 * d).split(d, dim=-1)
            ctx = self.attention(i, x, *(t.permute(1, 2, 0, 3) for t in (q, k, v)))
        else:
            b, s, _ = x.shape
            q, k, v = qkv.view(b, s, a, 3 * d).split(d, dim=-1)
            ctx = self.attention(i, x, *(t.transpose(1, 2) for t in (q, k, v)))
        o = linear(R, "proj", ctx, P["%d.proj_w" % i], P["%d.proj_b" % i])
        o = dropout(R, "proj dropout", o, self.p_hidden)
        with R.op("residual 1", "add", x, o) as out:
            x2 = out(x + o)
        ln2 = layer_norm(R, "norm2", x2, P["%d.ln2_w" % i], P["%d.ln2_b" % i], m["eps"])
        u = linear(R, "fc1", ln2, P["%d.fc1_w" % i], P["%d.fc1_b" % i])
        with R.op("gelu", "gelu", u) as out:
            u = out(F.gelu(u, approximate="tanh"))
        y = linear(R, "fc2", u, P["%d.fc2_w" % i], P["%d.fc2_b" % i])
        y = dropout(R, "mlp dropout", y, self.p_hidden)
        with R.op("residual 2", "add", x2, y) as out:
            return out(x2 + y)

    def llama_block(self, i, x):
        P, R, m = self.P, self.R, self.m
        b, s, _ = x.shape
        a, g, d = m["heads"], m["kv_heads"], m["head_dim"]
        y = rms_norm(R, "norm1", x, P["%d.ln1_w" % i], m["eps"])
        q = linear(R, "q proj", y, P["%d.q_w" % i], P.get("%d.q_b" % i))
        k = linear(R, "k proj", y, P["%d.k_w" % i], P.get("%d.k_b" % i))
        v = linear(R, "v proj", y, P["%d.v_w" % i], P.get("%d.v_b" % i))
        cos, sin = self.rope_tables

        def rope(name, t, heads):  # HF apply_rotary_pos_emb: saves only cos and sin
            with R.op(name, "rope", t) as out:
                tv = t.view(b, s, heads, d).transpose(1, 2)
                c, sn = cos.unsqueeze(1), sin.unsqueeze(1)
                half = d // 2
                rot = torch.cat((-tv[..., half:], tv[..., :half]), dim=-1)
                return out(tv * c + rot * sn)

        qr, kr = rope("rope q", q, a), rope("rope k", k, g)
        ctx = self.attention(i, x, qr, kr, v.view(b, s, g, d).transpose(1, 2))
        o = linear(R, "proj", ctx, P["%d.o_w" % i])
        o = dropout(R, "proj dropout", o, self.p_hidden)
        with R.op("residual 1", "add", x, o) as out:
            x2 = out(x + o)
        y2 = rms_norm(R, "norm2", x2, P["%d.ln2_w" % i], m["eps"])
        gt = linear(R, "gate proj", y2, P["%d.gate_w" % i])
        up = linear(R, "up proj", y2, P["%d.up_w" % i])
        with R.op("silu", "silu", gt) as out:
            act = out(F.silu(gt))
        with R.op("swiglu mul", "mul", act, up) as out:
            prod = out(act * up)
        dn = linear(R, "down proj", prod, P["%d.down_w" % i])
        dn = dropout(R, "mlp dropout", dn, self.p_hidden)
        with R.op("residual 2", "add", x2, dn) as out:
            return out(x2 + dn)

    def block(self, i, x):
        self.R.block = i
        return self.gpt_block(i, x) if self.m["family"] == "gpt2" else self.llama_block(i, x)

    def blocks(self, first, last):
        def run(x):
            for i in range(first, last + 1):
                x = self.block(i, x)
            return x
        return run

    # -- the step's forward ------------------------------------------------------------------

    def forward(self, ids, labels):
        P, R, m = self.P, self.R, self.m
        R.block = -1
        s = ids.shape[0] if self.sbh else ids.shape[1]
        if m["positions"] == "rope":
            # HF LlamaRotaryEmbedding: cos, sin [b, s, d] once per forward, computed in fp32
            # with autocast off, then in the residual stream's dtype (fp32 under autocast).
            with R.op("rotary tables", "rope"), torch.autocast(self.cfg["autocast_device"],
                                                                enabled=False):
                d = m["head_dim"]
                inv = 1.0 / (m.get("rope_theta", 10000.0)
                             ** (torch.arange(0, d, 2, dtype=torch.float32, device=ids.device) / d))
                fr = torch.outer(torch.arange(s, dtype=torch.float32, device=ids.device), inv)
                emb = torch.cat((fr, fr), dim=-1)[None].expand(ids.shape[0], s, d)
                dt = self.cfg["param_dtype"]
                self.rope_tables = (emb.cos().to(dt), emb.sin().to(dt))
        with R.op("embedding", "embedding", ids) as out:
            x = F.embedding(ids, P["wte"])
            if "wpe" in P:
                pos = torch.arange(s, device=ids.device)
                x = x + F.embedding(pos, P["wpe"]).unsqueeze(1 if self.sbh else 0)
            x = out(x)
        x = dropout(R, "embedding dropout", x, self.p_embd)
        seg_of = {f: l for f, l in self.segs}
        i, n = 0, m["layers"]
        while i < n:
            if i in seg_of:
                last = seg_of[i]
                x = self.ckpt(self.blocks(i, last), x)
                i = last + 1
            elif self.modes[i] == "sac":
                x = self.ckpt(functools.partial(self.block, i), x, context_fn=self.sac)
                i += 1
            else:
                x = self.block(i, x)
                i += 1
        R.block = -1
        if m["norm"] == "layernorm":
            y = layer_norm(R, "final norm", x, P["lnf_w"], P["lnf_b"], m["eps"])
        else:
            y = rms_norm(R, "final norm", x, P["lnf_w"], m["eps"])
        logits = linear(R, "lm head", y, P["wte"] if m["tied"] else P["lm_w"])
        # HF loss: logits.float(), cross_entropy = log_softmax + nll_loss
        with R.op("logits to fp32", "cast", logits) as out:
            l32 = out(logits.float())
        with R.op("log softmax", "log_softmax", l32) as out:
            logp = out(F.log_softmax(l32.view(-1, l32.shape[-1]), dim=-1))
        with R.op("nll loss", "nll_loss", logp) as out:
            return out(F.nll_loss(logp, labels.reshape(-1)))


def flash_context():
    """A context forcing SDPA's flash backend; refuses when the backend is unavailable."""
    if not hasattr(F, "scaled_dot_product_attention"):
        raise UsageError("--attention flash: this torch (%s) has no scaled_dot_product_attention"
                         % torch.__version__)
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # torch >= 2.3
        return lambda: sdpa_kernel([SDPBackend.FLASH_ATTENTION])
    except ImportError:
        return lambda: torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False,
                                                      enable_mem_efficient=False)
