#!/usr/bin/env python3
"""Re-simulates validation/time/published.csv with actsim and prints predicted, measured and
error per row and per source (README "Validation"). Standard library only.
Usage: validation/time/evaluate.py path/to/actsim [out.csv]"""
import csv, json, os, subprocess, sys, tempfile
from collections import defaultdict

here = os.path.dirname(os.path.abspath(__file__))
actsim = sys.argv[1]


def flags(r):
    model = r["model"]
    if model.endswith(".json"):  # a model file of this folder (validation/time/models/)
        model = os.path.join(here, model)
    f = ["--model", model, "--device", r["device"], "--profile", r["profile"],
         "--strategy", r["strategy"], "--attention", r["attention"], "--batch", r["batch"],
         "--seq", r["seq"], "--tp", r["tp"], "--sp", r["sp"], "--dp", r["dp"], "--zero", r["zero"],
         "--gpus-per-node", r["gpus_per_node"]]
    if r["precision"]:
        f += ["--precision", r["precision"]]
    if r.get("impl"):
        f += ["--impl", r["impl"]]
    if r.get("microbatches"):
        f += ["--num-microbatches", r["microbatches"]]
    if r.get("pp"):  # appended column: pipeline stages (--pp)
        f += ["--pp", r["pp"]]
    if r.get("vpp"):  # appended column: model chunks per stage (--vpp, interleaved 1F1B)
        f += ["--vpp", r["vpp"]]
    if r.get("cp"):  # feat2 (issue 13): context parallelism and FP8 linears
        f += ["--cp", r["cp"]]
    if r.get("fp8"):
        f += ["--fp8", r["fp8"]]
    if r.get("norm_kernel"):  # time5 (issue 11): the run's RMSNorm kernel (--norm-kernel)
        f += ["--norm-kernel", r["norm_kernel"]]
    if r.get("compile"):  # fp8sac (issue 10): torch.compile of the blocks (--compile)
        f += ["--compile", r["compile"]]
    if r.get("grad_accum_fusion"):  # time6 (issue 11): Megatron's --no-gradient-accumulation-fusion
        f += ["--grad-accum-fusion", r["grad_accum_fusion"]]
    if r.get("deterministic"):  # time7 (issue 11): Megatron's --deterministic-mode
        f += ["--deterministic", r["deterministic"]]
    return f


def layer_ms(r, phase_set):
    # One middle block's spans on the compute and tensor-parallel streams, from the trace.
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "t.json")
        subprocess.run([actsim, "trace"] + flags(r) + ["-o", out], check=True)
        ev = json.load(open(out))["traceEvents"]
    layer = 10
    ns = sum(float(e["dur"]) for e in ev if e.get("ph") == "X" and e["tid"] in (0, 1)
             and e["args"]["layer"] == layer and e["args"]["phase"] in phase_set)
    return ns / 1000.0  # trace durations are microseconds


def run_json(r):
    out = subprocess.run([actsim, "run"] + flags(r) + ["--format", "json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)[0]


rows = list(csv.DictReader(open(os.path.join(here, "published.csv"))))
results = []
for r in rows:
    m = r["metric"]
    if m == "layer_fwd_ms":
        pred = layer_ms(r, {"forward"})
    elif m == "layer_bwd_ms":
        pred = layer_ms(r, {"backward", "recompute"})
    elif m == "mfu_pct":
        pred = 100 * run_json(r)["mfu"]
    elif m == "step_s":
        pred = run_json(r)["step_time_ns"] / 1e9
    elif m == "tokens_per_s_per_gpu":
        pred = run_json(r)["tokens_per_s_per_gpu"]
    else:
        raise SystemExit("%s: metric: unknown '%s'" % (r["id"], m))
    meas = float(r["measured"])
    err = (pred - meas) / meas
    results.append((r, pred, meas, err))

w = csv.writer(sys.stdout if len(sys.argv) < 3 else open(sys.argv[2], "w", newline=""))
w.writerow(["id", "source", "metric", "predicted", "measured", "error_pct"])
per = defaultdict(list)
for r, pred, meas, err in results:
    w.writerow([r["id"], r["source"], r["metric"], "%.3f" % pred, "%g" % meas, "%+.1f" % (100 * err)])
    per[r["source"]].append(err)
for s, errs in per.items():
    mean = sum(abs(e) for e in errs) / len(errs)
    worst = max(errs, key=abs)
    print("# %s: %d rows, mean |error| %.1f %%, worst %+.1f %%" % (s, len(errs), 100 * mean,
                                                                   100 * worst), file=sys.stderr)
errs = [e for r, p, m, e in results]
print("# all rows: %d rows, mean |error| %.1f %%, worst %+.1f %%"
      % (len(errs), 100 * sum(abs(e) for e in errs) / len(errs), 100 * max(errs, key=abs)),
      file=sys.stderr)
