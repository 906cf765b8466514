"""actsim's knobs for the PyTorch reference: model files (as sim/io reads them), strategies
(as sim/src/strategy.cpp resolves them), precision regimes; errors as one-line UsageError."""

import json
import math
import os
import sys

import torch

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


def write_file(path, text):
    if path == "-":
        sys.stdout.write(text)
        return
    tmp = path + ".partial"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    os.replace(tmp, path)
