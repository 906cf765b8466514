#!/usr/bin/env python3
"""Measure one training step of real PyTorch code on the CPU: the exact peak of live bytes.

    python3 harness/measure_torch.py path/to/file.py:builder --model M --batch B --seq S \\
        --strategy none,full,every:2 -o rows.csv [--builder-arg key=value ...]

Runs the model that `builder` returns once per strategy, single-threaded, in fp32, after one
warm-up step (so the optimizer state exists), and writes one row per strategy in actsim's CSV
schema v1 (sim/io/src/csv.cpp, `impl` appended) with `source` torch-cpu and the measured absolute
peak in peak_allocated_bytes and peak_requested_bytes, which `actsim validate` compares with the
simulated peak less the cuBLAS workspace (the CPU has none: workspace_bytes is 0).

The builder contract
--------------------
`builder(**kwargs)` (kwargs from --builder-arg KEY=VALUE, VALUE parsed as JSON where it parses,
else a string) returns a dict, or an object with these attributes:

    model    the torch.nn.Module to train (put in train mode here);
    blocks   the modules to checkpoint, in the order the forward calls them;
    loss_fn  loss_fn(model, inputs) -> the scalar loss, or a tuple whose first item is the loss:
             the other items are held until the step ends, as a training loop that keeps them in
             variables does (nanoGPT's train.py keeps `logits` through backward and the step);
    inputs   what loss_fn takes (tensors anywhere in tuples, lists and dicts are counted live);
    optimizer_params (optional) what to hand the optimizer (a parameter list or param groups);
             model.parameters() when absent.

Strategies, as actsim names them (harness/torchref/config.py resolves them as the simulator
does): `none`, `full` (each block its own checkpoint), `every:k` and `block:k`, `sqrt`, and
`custom:` specs of none/full/seg clauses. A group of k > 1 consecutive blocks runs as one
torch.utils.checkpoint.checkpoint region: this needs each block to take the previous block's
output as its one positional argument and return one tensor (the usual `for block in blocks:
x = block(x)`); a group of one wraps the block's forward whatever its arguments. The user's file
is never edited: the tool sets an instance attribute `forward` on the block modules for the
measured step and removes it afterwards. Non-reentrant checkpointing by default (`--reentrant`
for use_reentrant=True, which needs a block input that requires grad).

What is measured
----------------
PyTorch 1.13's CPU allocator reports every allocation and free to the legacy profiler when
memory profiling is on (shared TOOLCHAIN notes, "Measuring real PyTorch code on the CPU"): the
records of kind "memory_alloc", signed sizes, in order, summed; the running sum's maximum is the
step's rise over what was live before it. Live before the step: the parameters, buffers,
optimizer state, gradients when kept (--set-to-none off) and the input tensors, each storage
counted once (by data pointer, at its storage's size). The absolute peak is their sum plus the
rise. The step is: loss_fn, backward, optimizer.step(), optimizer.zero_grad(set_to_none), and
the release of everything loss_fn returned. The forward, backward and optimizer run in three
profiler windows, so the phase of the peak is exact. The tool exits 1 if the sum does not come
back to 0 at the end (something leaked or was kept from the step).

Why fp32 only: the CPU is not the GPU under autocast. CPU autocast (bf16) casts a different op
list than CUDA autocast, CPU dropout keeps a full-size noise tensor where CUDA keeps a 1-byte
mask, and torch 1.13 has no scaled_dot_product_attention; a 16-bit measurement here would not be
what a GPU allocates. fp32 without dropout is the same op sequence and the same bytes on both.

Bad input (an unreadable or failing module, no such builder, a builder returning the wrong
thing, a bad flag): one line on stderr, exit status 2, no output file (rows are written to
FILE.partial and renamed when complete). Same inputs, byte-identical output.
"""
import argparse
import gc
import importlib.util
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROG = "measure_torch"

# actsim's CSV schema v1 (harness/actsim_csv.py, beside this file); no __pycache__ in the tree.
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
from actsim_csv import COLUMNS, csv_field  # noqa: E402  pylint: disable=wrong-import-position

# --optimizer: the torch optimizer and the name actsim's `optimizer` column gives it.
OPTIMIZERS = {"adamw": "adam", "adamw-loop": "adam-loop", "sgd": "sgd"}


class UsageError(Exception):
    """Bad input: reported as one line, exit status 2, nothing written."""


class LeakError(Exception):
    """The step did not free what it allocated: one line, exit status 1, nothing written."""


# ---------------------------------------------------------------------------------------------
# Flags

def parse_args(argv):
    p = argparse.ArgumentParser(
        prog=PROG, description="Measure the exact peak of live bytes of one training step of "
        "real PyTorch code on the CPU (fp32 only: CPU autocast casts other ops than CUDA's, CPU "
        "dropout keeps full-size noise, torch 1.13 has no SDPA), once per checkpointing "
        "strategy, and write actsim CSV rows (source torch-cpu). See the module docstring for "
        "the builder contract.")
    p.add_argument("target", help="path/file.py:builder")
    p.add_argument("--builder-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="keyword argument for the builder (VALUE as JSON, else a string)")
    p.add_argument("--strategy", default="none,full",
                   help="comma list: none, full, every:k, block:k, sqrt, custom:... "
                   "(none/full/seg clauses)")
    p.add_argument("--reentrant", action="store_true",
                   help="use_reentrant=True (default: non-reentrant)")
    p.add_argument("--optimizer", default="adamw", help="adamw (foreach, the default), "
                   "adamw-loop (foreach=False: the per-parameter loop) or sgd")
    p.add_argument("--set-to-none", default="on", help="on: zero_grad(set_to_none=True), "
                   "gradients freed between steps (default); off: zeroed and kept")
    p.add_argument("--model", required=True,
                   help="the model as actsim loads it (a models/*.json stem or path, or an HF "
                   "config.json path): written to the row")
    p.add_argument("--impl", default="", help="actsim implementation the code is, NAME or NAME@VERSION (row's impl, impl_version)")
    p.add_argument("--batch", required=True, help="micro-batch (written to the row)")
    p.add_argument("--seq", required=True, help="sequence length (written to the row)")
    p.add_argument("--target-seq", default="",
                   help="encoder-decoder models: the decoder's length (written to the row)")
    p.add_argument("--attention", default="standard", help="written to the row")
    p.add_argument("--dropout", default="0", help="written to the row (the builder must agree)")
    p.add_argument("--device", default="h100-sxm",
                   help="actsim device the row names (default h100-sxm, actsim's default; the "
                   "memory compared does not depend on it: validate subtracts the workspace)")
    p.add_argument("--precision", default="fp32", help="fp32 only (see above)")
    p.add_argument("--lora-rank", type=int, default=0,
                   help="written to the row: the LoRA rank the builder applied (0: none)")
    p.add_argument("--lora-targets", default="",
                   help="written to the row: the LoRA targets as actsim names them")
    p.add_argument("--trace", metavar="FILE",
                   help="also write every allocation and free of each measured step (phase, "
                   "innermost ops, signed bytes, live bytes) to FILE")
    p.add_argument("--first-row", type=int, default=0,
                   help="row_index of the first row (to join the files of several runs)")
    p.add_argument("-o", "--output", required=True, help="CSV file to write")


    def error(message):
        raise UsageError(message)
    p.error = error
    a = p.parse_args(argv)
    if a.precision != "fp32":
        raise UsageError("--precision: %r: only fp32 is measured on the CPU (CPU autocast, "
                         "dropout and attention differ from CUDA's)" % a.precision)
    if a.optimizer not in OPTIMIZERS:
        raise UsageError("--optimizer: %r is not %s" % (a.optimizer, ", ".join(OPTIMIZERS)))
    if a.set_to_none not in ("on", "off"):
        raise UsageError("--set-to-none: %r is not on or off" % a.set_to_none)
    for flag in ("batch", "seq"):
        v = getattr(a, flag)
        if not v.isdigit() or int(v) < 1:
            raise UsageError("--%s: %r is not a positive integer" % (flag, v))
    try:
        if float(a.dropout) != 0.0:
            raise ValueError
    except ValueError:
        raise UsageError("--dropout: %r: only 0 is measured (CPU dropout keeps a full-size "
                         "noise tensor, CUDA a 1-byte mask)" % a.dropout) from None
    if ":" not in a.target:
        raise UsageError("%s: expected path/file.py:builder" % a.target)
    if not os.path.isfile(a.target.rpartition(":")[0]):
        raise UsageError("%s: no such file" % a.target.rpartition(":")[0])
    a.kwargs = {}
    for kv in a.builder_arg:
        k, eq, v = kv.partition("=")
        if not eq or not k.isidentifier():
            raise UsageError("--builder-arg: %r is not KEY=VALUE" % kv)
        try:
            a.kwargs[k] = json.loads(v)
        except ValueError:
            a.kwargs[k] = v
    a.strategies = [s for s in a.strategy.split(",")]
    if any(not s for s in a.strategies):
        raise UsageError("--strategy: %r has an empty item" % a.strategy)
    return a


# ---------------------------------------------------------------------------------------------
# The builder

def load_builder(target, kwargs):
    path, _, name = target.rpartition(":")
    if not os.path.isfile(path):
        raise UsageError("%s: no such file" % path)
    try:
        spec = importlib.util.spec_from_file_location("measured_module", path)
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        spec.loader.exec_module(module)
    except Exception as e:  # any failure of the user's module is bad input
        raise UsageError("%s: import failed: %s: %s" % (path, type(e).__name__,
                                                        one_line(e))) from None
    builder = getattr(module, name, None)
    if not callable(builder):
        raise UsageError("%s: no callable %r" % (path, name))
    try:
        built = builder(**kwargs)
    except Exception as e:
        raise UsageError("%s: %s(...) failed: %s: %s" % (path, name, type(e).__name__,
                                                         one_line(e))) from None
    get = (lambda k: built.get(k)) if isinstance(built, dict) else \
        (lambda k: getattr(built, k, None))
    import torch
    spec = {k: get(k) for k in ("model", "blocks", "loss_fn", "inputs", "optimizer_params")}
    if not isinstance(spec["model"], torch.nn.Module):
        raise UsageError("%s: %s returned no `model` (a torch.nn.Module)" % (path, name))
    blocks = spec["blocks"]
    if not isinstance(blocks, (list, tuple, torch.nn.ModuleList)) or not blocks or \
            not all(isinstance(b, torch.nn.Module) for b in blocks):
        raise UsageError("%s: %s returned no `blocks` (a non-empty list of modules)"
                         % (path, name))
    if not callable(spec["loss_fn"]):
        raise UsageError("%s: %s returned no callable `loss_fn`" % (path, name))
    if spec["inputs"] is None:
        raise UsageError("%s: %s returned no `inputs`" % (path, name))
    spec["blocks"] = list(blocks)
    return spec


def one_line(e):
    return " ".join(str(e).split()) or "(no message)"


# ---------------------------------------------------------------------------------------------
# Strategies: checkpoint regions patched onto the blocks

def resolve(strategy, n):
    sys.path.insert(0, HERE)
    from torchref.config import UsageError as RefUsageError, resolve_strategy
    try:
        canon, modes, segs = resolve_strategy(strategy, n)
    except RefUsageError as e:
        raise UsageError(str(e)) from None
    if any(m in ("sel", "sac") for m in modes):
        raise UsageError("--strategy: %s: selective and op-level checkpointing need the block's "
                         "ops; this tool checkpoints whole blocks only" % strategy)
    return canon, segs


class Patched:
    """Sets instance `forward`s so that each segment runs under one checkpoint; undoes it."""

    def __init__(self, blocks, segs, reentrant):
        import torch.utils.checkpoint as cp
        self.blocks, self.saved = blocks, []
        for first, last in segs:
            if first == last:
                self.patch(first, self.single(blocks[first], cp, reentrant))
            else:
                group = [blocks[i].forward for i in range(first, last + 1)]

                def run(x, group=group):
                    for f in group:
                        x = f(x)
                    return x

                def head(x, run=run):
                    return cp.checkpoint(run, x, use_reentrant=reentrant)
                self.patch(first, head)
                for i in range(first + 1, last + 1):
                    self.patch(i, lambda x: x)

    @staticmethod
    def single(block, cp, reentrant):
        f = block.forward
        if reentrant:
            return lambda *a: cp.checkpoint(f, *a, use_reentrant=True)
        return lambda *a, **k: cp.checkpoint(f, *a, use_reentrant=False, **k)

    def patch(self, i, fn):
        b = self.blocks[i]
        self.saved.append((b, b.__dict__.get("forward")))
        b.forward = fn

    def undo(self):
        for b, old in reversed(self.saved):
            if old is None:
                del b.forward
            else:
                b.forward = old


# ---------------------------------------------------------------------------------------------
# Measurement

def tensors_in(x, out):
    import torch
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, dict):
        for v in x.values():
            tensors_in(v, out)
    elif isinstance(x, (list, tuple)):
        for v in x:
            tensors_in(v, out)
    return out


def live_bytes(tensors):
    """Bytes of the distinct storages behind `tensors` (a storage counted once)."""
    seen, total = set(), 0
    for t in tensors:
        s = t.storage()
        if s.data_ptr() in seen or s.nbytes() == 0:
            continue
        seen.add(s.data_ptr())
        total += s.nbytes()
    return total


class Window:
    """One legacy-profiler window with memory records (the shared TOOLCHAIN notes)."""

    def __init__(self, trace=False):
        self.trace = trace

    def __enter__(self):
        import torch
        from torch.autograd import ProfilerState
        cfg = torch.autograd.ProfilerConfig(ProfilerState.CPU, False, True, False, False, False,
                                            torch._C._profiler._ExperimentalConfig())
        torch.autograd.profiler_legacy._enable_profiler_legacy(cfg)
        return self

    def __exit__(self, *exc):
        import torch
        lists = torch.autograd._disable_profiler_legacy()
        mem = [rl for rl in lists if any(e.kind() == "memory_alloc" for e in rl)]
        if len(mem) > 1:
            raise RuntimeError("memory records on %d threads: the order is not defined"
                               % len(mem))
        # One thread's records, in the order they were made (ordering by start_us would give
        # the same order, less well defined within one microsecond).
        events = mem[0] if mem else []
        self.sizes = [e.cpu_memory_usage() for e in events if e.kind() == "memory_alloc"]
        if self.trace:  # (op stack, signed bytes) per record, for --trace
            stack, self.records = [], []
            for e in events:
                if e.kind() == "push":
                    stack.append(e.name())
                elif e.kind() == "pop" and stack:
                    stack.pop()
                elif e.kind() == "memory_alloc":
                    self.records.append(("/".join(stack[-3:]), e.cpu_memory_usage()))
        return False


class StepRun:
    """One training step in three windows: forward, backward, optimizer (+ release)."""

    def __init__(self, spec, opt, set_to_none, trace=False):
        self.spec, self.opt, self.set_to_none, self.trace = spec, opt, set_to_none, trace

    def run(self):
        spec = self.spec
        t0 = time.perf_counter()
        with Window(self.trace) as fwd:
            out = spec["loss_fn"](spec["model"], spec["inputs"])
        loss = out[0] if isinstance(out, (tuple, list)) else out
        with Window(self.trace) as bwd:
            loss.backward()
        with Window(self.trace) as step:
            self.opt.step()
            self.opt.zero_grad(set_to_none=self.set_to_none)
            del out, loss
        self.wall_s = time.perf_counter() - t0
        self.phases = [("forward", fwd.sizes), ("backward", bwd.sizes),
                       ("optimizer", step.sizes)]
        if self.trace:
            self.records = [("forward", fwd.records), ("backward", bwd.records),
                            ("optimizer", step.records)]

    def rise(self):
        """(peak rise over the start, its phase, the end's net sum)."""
        total, peak, phase = 0, 0, "forward"
        for name, sizes in self.phases:
            for s in sizes:
                total += s
                if total > peak:
                    peak, phase = total, name
        return peak, phase, total


def make_optimizer(name, params):
    import torch
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, foreach=True)
    if name == "adamw-loop":
        return torch.optim.AdamW(params, lr=1e-4, foreach=False)
    return torch.optim.SGD(params, lr=1e-4, momentum=0.9)


def measure(args):
    import torch
    torch.set_num_threads(1)  # intra-op threads make the record order (and the peak) vary
    torch.manual_seed(0)
    spec = load_builder(args.target, args.kwargs)
    model, blocks = spec["model"], spec["blocks"]
    resolved = [resolve(s, len(blocks)) for s in args.strategies]
    model.train()
    params = spec["optimizer_params"]
    opt = make_optimizer(args.optimizer, params if params is not None else model.parameters())
    set_to_none = args.set_to_none == "on"
    try:
        # Warm-up: the optimizer state exists from here on, as in any step after the first.
        StepRun(spec, opt, set_to_none).run()
    except Exception as e:
        raise UsageError("%s: the warm-up step failed: %s: %s" % (args.target, type(e).__name__,
                                                                  one_line(e))) from None
    n_params = sum(p.numel() for p in model.parameters())
    param_list = list(model.parameters())
    rows, traces = [], []
    for index, (canon, segs) in enumerate(resolved):
        patch = Patched(blocks, segs, args.reentrant)
        gc.collect()
        try:
            weights = live_bytes(param_list)
            grads = live_bytes([p.grad for p in param_list if p.grad is not None])
            opt_state = live_bytes(tensors_in([dict(s) for s in opt.state.values()], []))
            before = live_bytes(param_list + list(model.buffers())
                                + [p.grad for p in param_list if p.grad is not None]
                                + tensors_in([dict(s) for s in opt.state.values()], [])
                                + tensors_in(spec["inputs"], []))
            run = StepRun(spec, opt, set_to_none, trace=bool(args.trace))
            try:
                run.run()
            except Exception as e:
                raise UsageError("%s: strategy %s: the step failed: %s: %s" % (
                    args.target, canon, type(e).__name__, one_line(e))) from None
        finally:
            patch.undo()
        rise, phase, net = run.rise()
        if net != 0:
            raise LeakError("strategy %s: %d bytes allocated in the step were not freed by "
                               "its end" % (canon, net))
        peak = before + rise
        if args.trace:
            traces.append(trace_text(canon, before, run))
        r = dict.fromkeys(COLUMNS, "")
        r.update(schema_version=1, source="torch-cpu", row_index=args.first_row + index, model=args.model,
                 device=args.device, strategy=canon, profile="pytorch", precision="fp32",
                 attention=args.attention, dropout=args.dropout, batch=int(args.batch),
                 seq=int(args.seq), tp=1, sp="off", dp=1, zero=0,
                 optimizer=OPTIMIZERS[args.optimizer], allocator="exact", layers=len(blocks),
                 params=n_params, params_per_rank=n_params, peak_allocated_bytes=peak,
                 peak_phase=phase, weights_bytes=weights, grads_bytes=grads,
                 optimizer_bytes=opt_state, workspace_bytes=0, peak_requested_bytes=peak,
                 peak_reserved_bytes=peak, prefetch=1, pp=1, vpp=1, num_microbatches=1,
                 pp_stage=0, pp_in_flight=1, impl=args.impl.partition("@")[0],
                 impl_version=args.impl.partition("@")[2],  # implver: NAME@VERSION
                 set_to_none=args.set_to_none,
                 reentrant="on" if args.reentrant else "off",
                 target_seq=int(args.target_seq) if args.target_seq else "",
                 ep=1, moe_imbalance="1.00",
                 lora_rank=args.lora_rank,
                 lora_targets=args.lora_targets, qlora="off", cp=1, fp8="off",
                 padding="off", norm_kernel="default", compile="off", grad_accum_fusion="on",
                 moe_aux_loss_coeff=0,  # mla5
                 etp=1,  # etp (issue 13)
                 cross_entropy_loss_fusion="off",  # te_norm (issue 10)
                 deterministic="off",  # time7
                 moe_shared_expert_overlap="off")  # moetp (issue 13)
        rows.append(r)
        print("%-12s peak %14d B = live before %d + rise %d (%s); step %.2f s (profiled)"
              % (canon, peak, before, rise, phase, run.wall_s))
    if args.trace:
        write_text(args.trace, "".join(traces))
    return rows


def trace_text(strategy, before, run):
    """--trace: every allocation and free of the step, with the innermost ops around it."""
    lines, total = ["# strategy %s: live before the step %d B\n" % (strategy, before)], before
    lines.append("phase,op,bytes,live\n")
    for phase, records in run.records:
        for op, size in records:
            total += size
            lines.append("%s,%s,%d,%d\n" % (phase, csv_field(op), size, total))
    return "".join(lines)


def write_text(path, text):
    with open(path + ".partial", "w", encoding="utf-8", newline="") as f:
        f.write(text)
    os.replace(path + ".partial", path)



def write_rows(path, rows):
    text = ",".join(COLUMNS) + "\n" + "".join(
        ",".join(csv_field(r[c]) for c in COLUMNS) + "\n" for r in rows)
    write_text(path, text)


def main(argv):
    try:
        args = parse_args(argv)
        try:
            import torch  # noqa: F401
        except ImportError:
            raise UsageError("torch cannot be imported by %s" % sys.executable) from None
        out_dir = os.path.dirname(os.path.abspath(args.output))
        if not os.path.isdir(out_dir):
            raise UsageError("-o: %s: no such directory" % out_dir)
        rows = measure(args)
        write_rows(args.output, rows)
    except UsageError as e:
        print("%s: error: %s" % (PROG, e), file=sys.stderr)
        return 2
    except LeakError as e:
        print("%s: error: %s" % (PROG, e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
