#!/usr/bin/python3
"""PyTorch reference run (DESIGN.md section 6, validation step 5).

Builds GPT- and Llama-style models op for op as docs/memory-model.md writes them (the same
regions as harness/census.py), runs training steps under the actsim strategies through
torch.utils.checkpoint(use_reentrant=False), and writes measured rows in the CSV schema v1 with
source=torch, which `actsim validate` re-simulates.

  python3 harness/torch_reference.py --model gpt2-small --strategy none,full,sqrt \\
      --batch 4 --seq 1024 --precision bf16-amp -o measured.csv

On CUDA, per configuration: one warm-up step (it creates the optimizer state), then
empty_cache() and reset_peak_memory_stats(), one measured step whose absolute
requested_bytes.all.peak, allocated_bytes.all.peak and reserved_bytes.all.peak become the row's
peak_requested_bytes, peak_allocated_bytes and peak_reserved_bytes, then --timed-steps steps timed
with CUDA events (the median is step_time_ns). Each configuration gives one row per --allocator
(`exact` rows are compared on requested bytes, `caching` rows on allocated bytes: the same
measurement, read by `actsim validate` on the figure its allocator names). The environment (GPU,
driver, CUDA, torch), the baselines before each measured step and every timed step go to the
sidecar FILE.env.json beside -o FILE (`actsim validate` reads the CSV only).

--device cpu is a dry run: the same model and strategy code on the CPU (give tiny models, e.g.
tests/validation/exec-gpt.json), one forward and backward per strategy with identical parameters
and seeds, and a check that every strategy's gradients and loss are bitwise identical to the
first strategy's (exit 1 when not). Rows are written with `error` saying that nothing was measured.

--profile FILE writes a per-op timing table (the format `actsim calibrate` reads, documented in
harness/README.md) of one steady-state step, from torch.profiler: one row per forward op region
of the memory model with its FLOPs, bytes, kernel count and device time.

Only torch and the standard library.
"""

import argparse
import contextlib
import functools
import json
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F
import torch.utils.checkpoint as tuc

SCHEMA_VERSION = 1

# sim/io/src/csv.cpp make_columns(), in order (the contract: columns are only ever appended).
# tests/torch_reference.cmake holds this list equal to `actsim run --format csv`'s header.
CATEGORIES = ["weights", "grads", "optimizer", "activations", "recomputed", "activation_grads",
              "weight_casts", "transient", "workspace", "comm"]
COLUMNS = (["schema_version", "source", "row_index", "model", "device", "strategy", "profile",
            "precision", "attention", "dropout", "batch", "seq", "tp", "sp", "dp", "zero",
            "optimizer", "allocator", "layers", "params", "params_per_rank",
            "peak_allocated_bytes", "peak_time_ns", "peak_phase", "activation_bytes_per_layer",
            "activation_peak_bytes", "weights_bytes", "grads_bytes", "optimizer_bytes",
            "workspace_bytes"]
           + ["peak_%s_bytes" % c for c in CATEGORIES]
           + ["fwd_flops", "bwd_flops", "recompute_flops", "model_flops", "step_time_ns",
              "fwd_time_ns", "bwd_time_ns", "recompute_time_ns", "optimizer_time_ns",
              "comm_time_ns", "tokens_per_s", "mfu", "hfu", "fits", "headroom_bytes",
              "cuda_context_bytes", "comm_buffer_bytes", "device_bytes", "error",
              "peak_requested_bytes", "peak_reserved_bytes", "prefetch", "offload_bytes",
              "pinned_host_bytes", "offload_stall_ns", "pp", "vpp", "num_microbatches",
              "pp_stage", "pp_in_flight"])

# The per-op timing table (`actsim calibrate`; harness/README.md "Timing tables").
TIMING_COLUMNS = ["model", "precision", "attention", "batch", "seq", "op", "kind", "block",
                  "phase", "name", "math16", "flops", "bytes", "kernels", "measured_ns",
                  "shape_class"]
# --profile's per-kernel table beside it (FILE.kernels.csv): the kernels of each op region.
KERNEL_COLUMNS = ["model", "precision", "attention", "batch", "seq", "op", "kind", "block",
                  "phase", "name", "shape_class", "kernel", "device_ns"]


class UsageError(Exception):
    """Bad input: one line naming the flag or file and the field, exit status 2."""


# ---------------------------------------------------------------------------------------------
# Models (the subset of sim/io/src/load_hf.cpp and load_model.cpp this reference builds)

def model_dirs():
    dirs = [d for d in os.environ.get("ACTSIM_MODELS", "").split(":") if d]
    dirs.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
    return dirs


def resolve_model(name):
    if "/" in name or name.endswith(".json"):
        if not os.path.isfile(name):
            raise UsageError("--model: %s: no such file" % name)
        return name
    for d in model_dirs():
        path = os.path.join(d, name + ".json")
        if os.path.isfile(path):
            return path
    raise UsageError("--model: %s: not found in ACTSIM_MODELS or models/" % name)


def load_model(name):
    """A dict of the knobs the op list needs, read as sim_io reads HF and actsim files."""
    path = resolve_model(name)
    try:
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
    except (OSError, ValueError) as e:
        raise UsageError("%s: cannot read: %s" % (path, e))

    def need(key):
        if key not in j or j[key] is None:
            raise UsageError("%s: %s: missing" % (path, key))
        return j[key]

    def opt(key, default):
        return default if j.get(key) is None else j[key]

    m = {"name": name, "source": path}
    if "format" in j:  # actsim-model-v1
        if j["format"] != "actsim-model-v1":
            raise UsageError("%s: format: unknown format %r" % (path, j["format"]))
        fam = need("family")
        mlp = opt("mlp", "gelu")
        norm = opt("norm", "layernorm")
        if opt("post_norm", False) or not opt("causal", True):
            raise UsageError("%s: post_norm/causal: the torch reference builds causal pre-norm "
                             "blocks only" % path)
        m.update(family="llama" if mlp == "swiglu" else "gpt2", layers=need("layers"),
                 hidden=need("hidden"), heads=need("heads"), kv_heads=opt("kv_heads", j["heads"]),
                 ffn=opt("ffn_hidden", 4 * j["hidden"]), vocab=need("vocab"),
                 max_positions=opt("max_positions", 0), tied=opt("tied_embeddings", True),
                 qkv_bias=opt("qkv_bias", False), linear_bias=opt("linear_bias", False),
                 norm=norm, positions=opt("positions", "learned"),
                 attn_dropout=opt("attn_dropout", 0.0), hidden_dropout=opt("hidden_dropout", 0.0),
                 embd_dropout=opt("embd_dropout", 0.0), eps=1e-5)
        m["head_dim"] = opt("head_dim", m["hidden"] // m["heads"])
        if (mlp == "swiglu") != (norm == "rmsnorm") or (mlp == "swiglu") != (m["positions"] == "rope"):
            raise UsageError("%s: family %s: the torch reference builds GPT (gelu, layernorm, "
                             "learned) or Llama (swiglu, rmsnorm, rope) blocks" % (path, fam))
        return m
    t = need("model_type")
    if t == "gpt2":
        h, a = need("n_embd"), need("n_head")
        m.update(family="gpt2", layers=need("n_layer"), hidden=h, heads=a, kv_heads=a,
                 head_dim=h // a, ffn=opt("n_inner", 4 * h), vocab=need("vocab_size"),
                 max_positions=opt("n_positions", opt("n_ctx", 0)),
                 tied=opt("tie_word_embeddings", True), qkv_bias=True, linear_bias=True,
                 norm="layernorm", positions="learned", attn_dropout=opt("attn_pdrop", 0.1),
                 hidden_dropout=opt("resid_pdrop", 0.1), embd_dropout=opt("embd_pdrop", 0.1),
                 eps=opt("layer_norm_epsilon", 1e-5))
    elif t in ("llama", "mistral", "qwen2"):
        h, a = need("hidden_size"), need("num_attention_heads")
        m.update(family="llama", layers=need("num_hidden_layers"), hidden=h, heads=a,
                 kv_heads=opt("num_key_value_heads", a), head_dim=opt("head_dim", h // a),
                 ffn=need("intermediate_size"), vocab=need("vocab_size"),
                 max_positions=need("max_position_embeddings"),
                 tied=opt("tie_word_embeddings", False),
                 qkv_bias=True if t == "qwen2" else opt("attention_bias", False),
                 linear_bias=opt("mlp_bias", False), norm="rmsnorm", positions="rope",
                 attn_dropout=opt("attention_dropout", 0.0), hidden_dropout=0.0,
                 embd_dropout=0.0, eps=opt("rms_norm_eps", 1e-6),
                 rope_theta=opt("rope_theta", 10000.0))
    else:
        raise UsageError("%s: model_type: %s is not built by the torch reference (gpt2, llama, "
                         "mistral, qwen2)" % (path, t))
    return m


# ---------------------------------------------------------------------------------------------
# Strategies (sim/src/strategy.cpp; DESIGN.md section 4)

def parse_int(text, s, what):
    try:
        v = int(s)
    except ValueError:
        raise UsageError("--strategy: %s: %s is not an integer" % (text, what))
    if v < 0:
        raise UsageError("--strategy: %s: %s must not be negative" % (text, what))
    return v


def even_segments(n, m):
    """m segments over n blocks, the first n mod m one longer (sim::even_segments)."""
    m = min(m, n)
    base, extra, b, out = n // m, n % m, 0, []
    for i in range(m):
        length = base + (1 if i < extra else 0)
        out.append((b, b + length - 1))
        b += length
    return out


def resolve_strategy(text, n):
    """(canonical text, per-block mode 'store'|'sel'|'sac'|'ckpt', checkpointed segments)."""
    modes, segs = ["store"] * n, []

    def groups(first, last, k):
        b = first
        while b <= last:
            e = min(last, b + k - 1)
            segs.append((b, e))
            for i in range(b, e + 1):
                modes[i] = "ckpt"
            b = e + 1

    head, _, arg = text.partition(":")
    if text == "none":
        canon = text
    elif text == "full":
        groups(0, n - 1, 1)
        canon = text
    elif head in ("every", "block") and arg:
        k = parse_int(text, arg, "k")
        if k < 1 or k > n:
            raise UsageError("--strategy: %s: k must be in 1..%d" % (text, n))
        groups(0, n - 1, k) if head == "every" else groups(0, k - 1, 1)
        canon = "%s:%d" % (head, k)
    elif text == "sqrt":
        # m = round(sqrt(n)) even segments (Chen et al. 2016 §4.1; DESIGN.md §4), as
        # sim::sqrt_segments: not torch's checkpoint_sequential, whose segments are uneven.
        for f, l in even_segments(n, int(math.floor(math.sqrt(n) + 0.5))):
            groups(f, l, l - f + 1)
        canon = text
    elif text == "selective":
        modes = ["sel"] * n
        canon = text
    elif text == "sac:mm":
        modes = ["sac"] * n
        canon = text
    elif head == "custom" and arg:
        nxt, parts = 0, []
        for clause in arg.split("+"):
            mode, _, rng = clause.partition("@")
            rng, _, grp = rng.partition("/")
            first, _, last = rng.partition("-")
            first = parse_int(text, first, "first block")
            last = parse_int(text, last, "last block") if last else first
            if first != nxt or last < first or last >= n:
                raise UsageError("--strategy: %s: clauses must cover blocks 0..%d in order"
                                 % (text, n - 1))
            nxt = last + 1
            if mode == "none":
                pass
            elif mode == "full":
                groups(first, last, 1)
            elif mode == "seg" and grp:
                groups(first, last, parse_int(text, grp, "group"))
            elif mode in ("sel", "sac"):
                for i in range(first, last + 1):
                    modes[i] = mode
            else:
                raise UsageError("--strategy: %s: clause %r is not none, full, seg@a-b/k, sel or "
                                 "sac (offload is not built by the torch reference)"
                                 % (text, clause))
            parts.append(clause)
        if nxt != n:
            raise UsageError("--strategy: %s: blocks %d..%d are not covered" % (text, nxt, n - 1))
        canon = text
    else:
        raise UsageError("--strategy: %s: not built by the torch reference (none, full, every:k, "
                         "block:k, sqrt, selective, sac:mm, custom:<spec>; offload is not)" % text)
    return canon, modes, segs


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


# ---------------------------------------------------------------------------------------------
# Precision regimes (docs/memory-model.md section 2) and the optimizer

def regime(precision, device):
    half = torch.bfloat16
    if precision == "bf16-amp":
        return {"param_dtype": torch.float32, "amp": True, "half": half}
    if precision == "fp32":
        return {"param_dtype": torch.float32, "amp": False, "half": torch.float32}
    if precision == "bf16-mixed":
        return {"param_dtype": torch.bfloat16, "amp": False, "half": half}
    raise UsageError("--precision: %s is not built by the torch reference (bf16-amp, fp32, "
                     "bf16-mixed)" % precision)


class Trainer:
    """Model, optimizer and one training step as the simulator's training loop has it."""

    def __init__(self, mcfg, cfg, strategy, device, R, preserve_rng=True, train=True):
        self.cfg = cfg
        self.device = device
        self.model = Model(mcfg, cfg["param_dtype"], device, seed=0)
        self.runner = Runner(self.model, cfg, strategy, R, preserve_rng)
        R.amp = cfg["amp"]
        s = cfg["seq"]
        if not self.runner.flash:  # the persistent causal-mask buffer (weights category)
            self.runner.mask = torch.ones(s, s, dtype=torch.bool, device=device).tril()
        params = list(self.model.params.values())
        self.params = params
        self.main_grads = None
        self.gen = torch.Generator(device=device).manual_seed(1)
        if not train:  # the dry run: forward and backward only, grads in .grad
            return
        if cfg["precision"] == "bf16-mixed":
            # Megatron's bf16-mixed: persistent fp32 main_grad and fp32 master weights under the
            # optimizer. PyTorch has no fused wgrad-into-main_grad GEMM: each bf16 .grad is added
            # into main_grad as it is accumulated and dropped (a transient the simulator lacks).
            self.main_grads = [torch.zeros_like(p, dtype=torch.float32) for p in params]
            self.masters = [p.detach().float().requires_grad_() for p in params]
            for p, mg in zip(params, self.main_grads):
                hook = getattr(p, "register_post_accumulate_grad_hook", None)
                if hook is None:
                    raise UsageError("--precision bf16-mixed needs Tensor."
                                     "register_post_accumulate_grad_hook (torch >= 2.1)")
                hook(functools.partial(_into_main_grad, mg))
            for mp, mg in zip(self.masters, self.main_grads):
                mp.grad = mg
            opt_params = self.masters
        else:
            opt_params = params
        o = cfg["optimizer"]
        if o == "adam":
            self.opt = torch.optim.Adam(opt_params, lr=1e-4, foreach=True)
        elif o == "adam-fused":
            self.opt = torch.optim.Adam(opt_params, lr=1e-4, fused=True)
        elif o == "sgd":
            self.opt = torch.optim.SGD(opt_params, lr=1e-4, momentum=0.9)
        else:
            raise UsageError("--optimizer: %s is not adam, adam-fused or sgd" % o)

    def batch(self):
        b, s, v = self.cfg["batch"], self.cfg["seq"], self.model.m["vocab"]
        shape = (s, b) if self.runner.sbh else (b, s)
        ids = torch.randint(0, v, shape, generator=self.gen, device=self.device)
        labels = torch.randint(0, v, shape, generator=self.gen, device=self.device)
        return ids, labels

    def forward_backward(self, hold=None):
        """Forward and backward; the ids, labels and loss go into `hold` (the training loop's
        references, released after the optimizer as the simulator's protocol has it)."""
        ids, labels = self.batch()
        ctx = (torch.autocast(self.cfg["autocast_device"], dtype=self.cfg["half"])
               if self.cfg["amp"] else contextlib.nullcontext())
        self.runner.R.phase = "forward"
        with ctx:
            loss = self.runner.forward(ids, labels)
        self.runner.R.phase = "backward"
        loss.backward()
        loss = loss.detach()
        if hold is not None:
            hold.extend((ids, labels, loss))
        return loss

    def step(self):
        """One step: forward, backward, optimizer; then zero_grad(set_to_none) releases the lazy
        gradients, so that the state between steps is the simulator's baseline."""
        hold = []
        loss = self.forward_backward(hold)
        self.opt.step()
        if self.main_grads is not None:
            with torch.no_grad():
                for p, mp, mg in zip(self.params, self.masters, self.main_grads):
                    p.copy_(mp)
                    mg.zero_()
        else:
            self.opt.zero_grad(set_to_none=True)
        del hold
        return loss


def _into_main_grad(main_grad, p):
    main_grad.add_(p.grad)
    p.grad = None


# ---------------------------------------------------------------------------------------------
# Rows

def base_row(cfg, model_name, device_name, strategy, allocator, m, params):
    r = dict.fromkeys(COLUMNS, "")
    r.update(schema_version=SCHEMA_VERSION, source="torch", model=model_name, device=device_name,
             strategy=strategy, profile="pytorch", precision=cfg["precision"],
             attention=cfg["attention"],
             dropout="" if cfg["dropout"] is None else fmt_float(cfg["dropout"]),
             batch=cfg["batch"], seq=cfg["seq"], tp=1, sp="off", dp=1, zero=0,
             optimizer=cfg["optimizer"], allocator=allocator, prefetch=1, pp=1, vpp=1,
             num_microbatches=1)
    return r


def fmt_float(x):
    # as fmt's "{}" for a double: the shortest repr (0.1, 0, 0.25)
    return ("%d" % x) if float(x).is_integer() else repr(float(x))


def csv_field(v):
    s = str(v)
    if any(c in s for c in ",\"\r\n"):
        s = '"' + s.replace('"', '""') + '"'
    return s


def write_csv(path, rows):
    text = ",".join(COLUMNS) + "\n" + "".join(
        ",".join(csv_field(r[c]) for c in COLUMNS) + "\n" for r in rows)
    write_file(path, text)


def write_file(path, text):
    if path == "-":
        sys.stdout.write(text)
        return
    tmp = path + ".partial"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    os.replace(tmp, path)


def environment(device):
    env = {"torch": torch.__version__, "python": sys.version.split()[0]}
    if device.type == "cuda":
        env.update(gpu=torch.cuda.get_device_name(device), cuda=torch.version.cuda,
                   capability="%d.%d" % torch.cuda.get_device_capability(device))
        try:
            import subprocess  # the driver version: nvidia-smi, when present
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                                  "--format=csv,noheader"], capture_output=True, text=True,
                                 timeout=30, check=False)
            env["driver"] = out.stdout.strip().splitlines()[0] if out.stdout.strip() else None
        except (OSError, IndexError, ValueError):
            env["driver"] = None
    else:
        env.update(gpu=None, cuda=None, driver=None, threads=torch.get_num_threads())
    return env


# Names of actsim device files by the GPU's name, for --device auto.
GPU_NAMES = [("H200", "h200"), ("H100", "h100-sxm"), ("A100-SXM4-80GB", "a100-80gb"),
             ("A100 80GB", "a100-80gb"), ("A100-SXM4-40GB", "a100-40gb"), ("A100", "a100-40gb")]


def device_name_for(gpu):
    for key, name in GPU_NAMES:
        if key in gpu:
            return name
    raise UsageError("--device auto: no actsim device file for %r; name one with --device" % gpu)


# ---------------------------------------------------------------------------------------------
# GPU measurement

def memory_figures():
    st = torch.cuda.memory_stats()
    key = "requested_bytes.all.peak"
    if key not in st:
        raise UsageError("this torch (%s) has no %s in torch.cuda.memory_stats()"
                         % (torch.__version__, key))
    return st


def measure(trainer, timed_steps, profile_regions, kernel_table=None):
    dev = trainer.device
    trainer.step()  # warm-up: creates the optimizer state (and the cuBLAS workspace)
    torch.cuda.synchronize(dev)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(dev)
    before = memory_figures()
    trainer.step()
    torch.cuda.synchronize(dev)
    after = memory_figures()
    times = []
    for _ in range(timed_steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        trainer.step()
        end.record()
        torch.cuda.synchronize(dev)
        times.append(int(round(start.elapsed_time(end) * 1e6)))  # ms -> ns
    table = (profile_step(trainer, profile_regions, kernel_table)
             if profile_regions is not None else None)
    return {
        "peak_requested_bytes": after["requested_bytes.all.peak"],
        "peak_allocated_bytes": after["allocated_bytes.all.peak"],
        "peak_reserved_bytes": after["reserved_bytes.all.peak"],
        "baseline_requested_bytes": before["requested_bytes.all.current"],
        "baseline_allocated_bytes": before["allocated_bytes.all.current"],
        "baseline_reserved_bytes": before["reserved_bytes.all.current"],
        "step_times_ns": times,
        "step_time_ns": int(statistics.median(times)) if times else None,
    }, table


def shape_class(flops, nbytes):
    """Ops grouped by size for per-shape efficiencies: the power of two of their matmul FLOPs,
    or of their bytes when they have none."""
    if flops > 0:
        return "flops:2^%d" % int(math.floor(math.log2(flops)))
    return "bytes:2^%d" % int(math.floor(math.log2(nbytes))) if nbytes > 0 else "none"


def profile_step(trainer, R, kernel_rows=None):
    """One steady-state step under torch.profiler: device time per forward op region (and, into
    kernel_rows, every kernel of those regions: name and device time)."""
    acts = [torch.profiler.ProfilerActivity.CPU]
    if trainer.device.type == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    R.ops.clear()
    R.enabled = True
    try:
        with torch.profiler.profile(activities=acts) as prof:
            trainer.step() if hasattr(trainer, "opt") else trainer.forward_backward()
            if trainer.device.type == "cuda":
                torch.cuda.synchronize(trainer.device)
    finally:
        R.enabled = False
    times = {}
    cpu_type = torch.autograd.DeviceType.CPU
    for ev in prof.events():
        # the ranges as the host opened them (their kernels are their children's); kineto also
        # puts a copy of each range on the GPU timeline, which is not what is summed here
        if not ev.name.startswith("actsim#") or getattr(ev, "device_type", cpu_type) != cpu_type:
            continue
        idx = int(ev.name[len("actsim#"):])
        if trainer.device.type == "cuda":
            t_us = getattr(ev, "device_time_total", None)
            if t_us is None:
                t_us = ev.cuda_time_total
            kernels = count_kernels(ev, idx, kernel_rows)
        else:
            t_us, kernels = ev.cpu_time_total, 1
        times[idx] = (int(round(t_us * 1000)), kernels)
    rows = []
    for idx, rec in enumerate(R.ops):
        if idx not in times or rec["phase"] != "forward":
            continue  # recompute regions are forward kernels again; backward is not attributed
        ns, kernels = times[idx]
        rows.append({"shape_class": shape_class(rec["flops"], rec["in"] + rec["out"]),
                     "op": idx, "kind": rec["kind"], "block": rec["block"],
                     "phase": rec["phase"], "name": rec["name"], "math16": rec["math16"],
                     "flops": rec["flops"], "bytes": rec["in"] + rec["out"],
                     "kernels": kernels, "measured_ns": ns})
    if kernel_rows is not None:
        for k in kernel_rows:
            rec = R.ops[k["op"]]
            k.update(kind=rec["kind"], block=rec["block"], phase=rec["phase"], name=rec["name"],
                     shape_class=shape_class(rec["flops"], rec["in"] + rec["out"]))
        kernel_rows[:] = [k for k in kernel_rows if k["phase"] == "forward"]
    return rows


def count_kernels(ev, idx, kernel_rows):
    """Kernels launched inside a host range (by its ops, at any depth)."""
    n, todo = 0, [ev]
    while todo:
        e = todo.pop()
        for k in getattr(e, "kernels", []) or []:
            n += 1
            if kernel_rows is not None:
                kernel_rows.append({"op": idx, "kernel": k.name,
                                    "device_ns": int(round(k.duration * 1000))})
        todo.extend(getattr(e, "cpu_children", []) or [])
    return max(n, 1)


# ---------------------------------------------------------------------------------------------
# CPU dry run: the op list and strategies on tiny models, gradients compared bitwise

def dry_run(mcfg, cfg, strategies, preserve_rng):
    """Returns (rows' errors, mismatches): one forward and backward per strategy."""
    ref, mismatches, report = None, [], []
    for st in strategies:
        torch.manual_seed(1234)  # dropout draws: the same for every strategy
        tr = Trainer(mcfg, cfg, st, torch.device("cpu"), Regions(), preserve_rng, train=False)
        loss = tr.forward_backward()
        grads = {k: (p.grad.clone() if p.grad is not None else None)
                 for k, p in tr.model.params.items()}
        if ref is None:
            # a NaN would compare unequal everywhere; a missing gradient would hide a cut graph
            broken = [k for k, g in grads.items() if g is None or not torch.isfinite(g).all()]
            if not torch.isfinite(loss) or broken:
                mismatches.append((st, broken or ["loss"]))
                report.append("%-28s loss %s; missing or non-finite gradients: %s"
                              % (tr.runner.canon, loss.item(), broken[:3]))
            ref = (st, loss, grads)
            report.append("%-28s loss %.9g (reference)" % (tr.runner.canon, loss.item()))
            continue
        bad = [k for k in grads if not same(grads[k], ref[2][k])]
        if not torch.equal(loss, ref[1]):
            bad.insert(0, "loss")
        if bad:
            mismatches.append((st, bad))
            report.append("%-28s DIFFERS from %s in %d tensors (first: %s)"
                          % (tr.runner.canon, ref[0], len(bad), bad[0]))
        else:
            report.append("%-28s loss and %d gradients bitwise identical to %s"
                          % (tr.runner.canon, len(grads), ref[0]))
    return report, mismatches


def same(a, b):
    if a is None or b is None:
        return a is None and b is None
    return a.dtype == b.dtype and torch.equal(a, b)



# ---------------------------------------------------------------------------------------------
# Census of what only a recent CUDA torch can show (harness/census.py covers the rest on the CPU)

CENSUS_GPT = dict(name="census-gpt", family="gpt2", layers=1, hidden=256, heads=4, kv_heads=4,
                  head_dim=64, ffn=1024, vocab=512, max_positions=256, tied=True, qkv_bias=True,
                  linear_bias=True, norm="layernorm", positions="learned", attn_dropout=0.1,
                  hidden_dropout=0.1, embd_dropout=0.1, eps=1e-5)
CENSUS_LLAMA = dict(name="census-llama", family="llama", layers=1, hidden=256, heads=4,
                    kv_heads=2, head_dim=64, ffn=704, vocab=512, max_positions=256, tied=False,
                    qkv_bias=False, linear_bias=False, norm="rmsnorm", positions="rope",
                    attn_dropout=0.0, hidden_dropout=0.0, embd_dropout=0.0, eps=1e-6)


def census_gpu(path):
    """SDPA flash's saves (docs/memory-model.md: q, k, v, O and the fp32 logsumexp; the 16-bit
    casts of fp32 operands under autocast) and the aten ops the sac:mm policy saves, on CUDA."""
    if not torch.cuda.is_available():
        raise UsageError("--census: needs a CUDA device (harness/census.py is the CPU census)")
    dev = torch.device("cuda")
    doc = {"torch": torch.__version__, "cuda": torch.version.cuda,
           "gpu": torch.cuda.get_device_name(dev), "flash": {}, "sac:mm": {}}
    b, s, a, d = 2, 256, 8, 64
    for case, g, in_dtype, p in (("mha-bf16", a, torch.bfloat16, 0.0),
                                 ("mha-bf16-dropout", a, torch.bfloat16, 0.1),
                                 ("gqa-fp32-operands-autocast", 2, torch.float32, 0.0)):
        gen = torch.Generator(device=dev).manual_seed(0)

        def leaf(heads):
            return torch.randn(b, s, heads, d, generator=gen, device=dev).to(
                in_dtype).requires_grad_()
        q0, k0, v0 = leaf(a), leaf(g), leaf(g)
        q, k, v = (t.transpose(1, 2) for t in (q0, k0, v0))
        packs = []
        kw = {"enable_gqa": True} if g != a else {}
        with torch.autograd.graph.saved_tensors_hooks(lambda t: packs.append(t) or t,
                                                      lambda t: t), \
                torch.autocast("cuda", dtype=torch.bfloat16), flash_context()():
            o = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True, **kw)
        ptr = {storage_ptr(t): n for n, t in (("q", q0), ("k", k0), ("v", v0), ("output", o))}
        doc["flash"][case] = [{"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
                               "storage_bytes": storage_nbytes(t),
                               "is": ptr.get(storage_ptr(t), "new")} for t in packs]
        o.float().sum().backward()  # every save is usable
    for mcfg in (CENSUS_GPT, CENSUS_LLAMA):
        log = []
        cfg = dict(regime("bf16-amp", dev), precision="bf16-amp", attention="standard",
                   dropout=None, batch=2, seq=128, optimizer="adam", autocast_device="cuda")
        tr = Trainer(mcfg, cfg, "sac:mm", dev, Regions(), train=False)
        tr.runner.sac = sac_context_fn(log)
        tr.forward_backward()
        counts = {}
        for op, what in log:
            counts.setdefault(op, {}).setdefault(what, 0)
            counts[op][what] += 1
        doc["sac:mm"][mcfg["family"]] = counts
    write_file(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")


def storage_ptr(t):
    return (t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()).data_ptr()


def storage_nbytes(t):
    return (t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()).nbytes()

# ---------------------------------------------------------------------------------------------

def int_list(flag):
    def parse(text):
        out = []
        for part in text.split(","):
            try:
                v = int(part)
            except ValueError:
                raise argparse.ArgumentTypeError("%s: %r is not an integer" % (flag, part))
            if v <= 0:
                raise argparse.ArgumentTypeError("%s: %d must be positive" % (flag, v))
            out.append(v)
        return out
    return parse


def str_list(text):
    return [t for t in text.split(",") if t]


def split_strategies(text):
    # custom specs contain no commas; a plain split is the axis grammar of actsim for strategies
    return str_list(text)


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--model", type=str_list, help="model names or files, comma list")
    ap.add_argument("--census", metavar="FILE", help="instead of rows: what SDPA flash saves and "
                    "which aten ops the sac:mm policy saves, on CUDA (JSON)")
    ap.add_argument("--device", default="auto",
                    help="actsim device name for the rows (auto: from the GPU's name), or cpu "
                         "for the dry run")
    ap.add_argument("--strategy", type=split_strategies, default=["none"])
    ap.add_argument("--precision", type=str_list, default=["bf16-amp"])
    ap.add_argument("--attention", type=str_list, default=["standard"])
    ap.add_argument("--dropout", type=float, default=None,
                    help="overrides the model's dropout probabilities")
    ap.add_argument("--batch", type=int_list("--batch"), default=[1], help="micro-batch sizes")
    ap.add_argument("--seq", type=int_list("--seq"), default=[1024])
    ap.add_argument("--optimizer", default="adam", choices=["adam", "adam-fused", "sgd"])
    ap.add_argument("--allocator", type=str_list, default=["exact", "caching"],
                    help="rows per measurement: exact (compared on requested bytes), caching "
                         "(on allocated bytes)")
    ap.add_argument("--timed-steps", type=int, default=5, help="steps timed after the measured "
                    "one (the median is step_time_ns)")
    ap.add_argument("-o", "--output", default="-", help="CSV file (default stdout)")
    ap.add_argument("--profile", metavar="FILE", help="per-op timing table of one step (CSV)")
    ap.add_argument("--no-preserve-rng", action="store_true", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    if args.census:
        census_gpu(args.census)
        return 0
    if not args.model:
        raise UsageError("--model: required (a comma list of model names or files)")
    for a in args.allocator:
        if a not in ("exact", "caching"):
            raise UsageError("--allocator: %s is not exact or caching" % a)
    if args.dropout is not None and not 0 <= args.dropout < 1:
        raise UsageError("--dropout: must be in [0, 1)")
    cpu = args.device == "cpu"
    if cpu:
        device = torch.device("cpu")
        torch.set_num_threads(1)  # bitwise reproducible reductions
        device_name = "h100-sxm"  # rows need an actsim device; nothing was measured on it
    else:
        if not torch.cuda.is_available():
            raise UsageError("--device %s: no CUDA device is available (use --device cpu for "
                             "the dry run)" % args.device)
        device = torch.device("cuda")
        device_name = (device_name_for(torch.cuda.get_device_name(device))
                       if args.device == "auto" else args.device)
    models = [(name, load_model(name)) for name in args.model]
    rows, sidecar, timing, kernel_table, failed = [], [], [], [], False
    for name, mcfg in models:
        for precision in args.precision:
            for attention in args.attention:
                if attention not in ("standard", "flash"):
                    raise UsageError("--attention: %s is not standard or flash" % attention)
                for b in args.batch:
                    for s in args.seq:
                        cfg = dict(regime(precision, device), precision=precision,
                                   attention=attention, dropout=args.dropout, batch=b, seq=s,
                                   optimizer=args.optimizer, autocast_device=device.type)
                        if mcfg["positions"] == "learned" and s > mcfg["max_positions"]:
                            raise UsageError("--seq %d exceeds %s's %d positions"
                                             % (s, name, mcfg["max_positions"]))
                        if cpu:
                            canon = [resolve_strategy(st, mcfg["layers"])[0]
                                     for st in args.strategy]
                            report, bad = dry_run(mcfg, cfg, args.strategy,
                                                  not args.no_preserve_rng)
                            params = Model(mcfg, torch.float32, device, 0).param_count()
                            print("dry run %s %s %s b=%d s=%d (params %d):"
                                  % (name, precision, attention, b, s, params))
                            for line in report:
                                print("  " + line)
                            failed = failed or bool(bad)
                            if args.profile:  # CPU times: exercises the table, calibrates nothing
                                tr = Trainer(mcfg, cfg, args.strategy[0], device, Regions(),
                                             train=False)
                                for t in profile_step(tr, tr.runner.R):
                                    t.update(model=name, precision=precision,
                                             attention=attention, batch=b, seq=s)
                                    timing.append(t)
                            for st in canon:
                                for alloc in args.allocator:
                                    r = base_row(cfg, name, device_name, st, alloc, mcfg, 0)
                                    r["error"] = ("dry run on the CPU: nothing measured "
                                                  "(gradients %s)" % ("differ" if bad else
                                                                      "identical"))
                                    rows.append(r)
                            continue
                        for st in args.strategy:
                            kern = []
                            rows_for, env_row, table = run_gpu(name, mcfg, cfg, st, device,
                                                               device_name, args, kern)
                            rows.extend(rows_for(a) for a in args.allocator)
                            sidecar.append(env_row)
                            if table:
                                for t in table + kern:
                                    t.update(model=name, precision=precision,
                                             attention=attention, batch=b, seq=s)
                                timing.extend(table)
                                kernel_table.extend(kern)
    for i, r in enumerate(rows):
        r["row_index"] = i
    write_csv(args.output, rows)
    if args.output != "-":
        stem = args.output[:-4] if args.output.endswith(".csv") else args.output
        write_file(stem + ".env.json", json.dumps(
            {"environment": environment(device), "runs": sidecar}, indent=1, sort_keys=True) + "\n")
    if args.profile:
        write_file(args.profile, ",".join(TIMING_COLUMNS) + "\n" + "".join(
            ",".join(csv_field(t[c]) for c in TIMING_COLUMNS) + "\n" for t in timing))
        stem = args.profile[:-4] if args.profile.endswith(".csv") else args.profile
        write_file(stem + ".kernels.csv", ",".join(KERNEL_COLUMNS) + "\n" + "".join(
            ",".join(csv_field(k[c]) for c in KERNEL_COLUMNS) + "\n" for k in kernel_table))
    return 1 if failed else 0


def run_gpu(name, mcfg, cfg, strategy, device, device_name, args, kernels):
    R = Regions()
    env_row = {"model": name, "strategy": strategy, "precision": cfg["precision"],
               "attention": cfg["attention"], "batch": cfg["batch"], "seq": cfg["seq"]}
    trainer, fig, table, err = None, None, None, ""
    try:
        trainer = Trainer(mcfg, cfg, strategy, device, R)
        fig, table = measure(trainer, args.timed_steps, R if args.profile else None, kernels)
        params = trainer.model.param_count()
    except torch.cuda.OutOfMemoryError as e:  # a row, not the end of the run
        err = "out of memory: " + str(e).splitlines()[0]
        params = 0
    finally:
        trainer = None
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
    canon = resolve_strategy(strategy, mcfg["layers"])[0]
    env_row.update(fig or {}, error=err)

    def row(alloc):
        r = base_row(cfg, name, device_name, canon, alloc, mcfg, params)
        if err:
            r["error"] = err
            return r
        tokens = cfg["batch"] * cfg["seq"]
        r.update(layers=mcfg["layers"], params=params, params_per_rank=params,
                 peak_allocated_bytes=fig["peak_allocated_bytes"],
                 step_time_ns=fig["step_time_ns"],
                 tokens_per_s="%.3f" % (tokens / (fig["step_time_ns"] * 1e-9)),
                 peak_requested_bytes=fig["peak_requested_bytes"],
                 peak_reserved_bytes=fig["peak_reserved_bytes"], offload_bytes=0,
                 pinned_host_bytes=0, offload_stall_ns=0, pp_stage=0, pp_in_flight=1)
        return r
    return row, env_row, table


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except UsageError as e:
        sys.stderr.write("torch_reference: error: %s\n" % e)
        sys.exit(2)
