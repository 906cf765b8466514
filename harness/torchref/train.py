"""The training loop as the simulator's protocol has it, the CUDA measurement and profile, the
CPU dry run and the CUDA census."""

import contextlib
import functools
import json
import math
import statistics

import torch
import torch.nn.functional as F

from torchref.config import UsageError, regime, write_file
from torchref.model import Model, Regions, Runner, flash_context, sac_context_fn

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
