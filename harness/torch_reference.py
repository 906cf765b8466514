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
import json
import sys

sys.dont_write_bytecode = True  # no __pycache__ beside the sources (imported modules below)

import torch  # noqa: E402  pylint: disable=wrong-import-position

from torchref.config import (UsageError, load_model, regime,  # noqa: E402
                             resolve_strategy, write_file)
from torchref.model import Model, Regions  # noqa: E402
from torchref.train import (Trainer, census_gpu, dry_run, measure,  # noqa: E402
                            profile_step)

from actsim_csv import COLUMNS, SCHEMA_VERSION, csv_field  # noqa: E402

# The per-op timing table (`actsim calibrate`; harness/README.md "Timing tables").
TIMING_COLUMNS = ["model", "precision", "attention", "batch", "seq", "op", "kind", "block",
                  "phase", "name", "math16", "flops", "bytes", "kernels", "measured_ns",
                  "shape_class"]
# --profile's per-kernel table beside it (FILE.kernels.csv): the kernels of each op region.
KERNEL_COLUMNS = ["model", "precision", "attention", "batch", "seq", "op", "kind", "block",
                  "phase", "name", "shape_class", "kernel", "device_ns"]

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
             num_microbatches=1,
             # The op list torchref builds: Megatron's GPT layout (fused QKV views, strided
             # bmm) or HF's Llama (sim/include/sim/impl.hpp).
             impl="hf" if m["family"] == "llama" else "megatron",
             # torchref zeroes with set_to_none and checkpoints with use_reentrant=False
             set_to_none="on", reentrant="off")
    return r


def fmt_float(x):
    # as fmt's "{}" for a double: the shortest repr (0.1, 0, 0.25)
    return ("%d" % x) if float(x).is_integer() else repr(float(x))



def write_csv(path, rows):
    text = ",".join(COLUMNS) + "\n" + "".join(
        ",".join(csv_field(r[c]) for c in COLUMNS) + "\n" for r in rows)
    write_file(path, text)


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


class Parser(argparse.ArgumentParser):
    """argparse with its errors as UsageError: one line, exit status 2."""

    def error(self, message):
        raise UsageError(message)


def parse_args(argv):
    ap = Parser(
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
    if args.timed_steps < 1:
        raise UsageError("--timed-steps: must be at least 1")
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
                 pinned_host_bytes=0, offload_stall_ns=0, pp_stage=0, pp_in_flight=1,
                 tokens_per_s_per_gpu="%.3f" % (tokens / (fig["step_time_ns"] * 1e-9)))
        return r
    return row, env_row, table


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except UsageError as e:
        sys.stderr.write("torch_reference: error: %s\n" % e)
        sys.exit(2)
