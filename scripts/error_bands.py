#!/usr/bin/env python3
"""Writes models/error-bands.csv: the validated error band of each implementation and model
family, from `actsim validate --format csv` over every measured table in validation/
(published GPU measurements and real PyTorch code measured on the CPU).

`actsim run` prints the band of the implementation and family it simulated beside the peak, or
"not validated". Regenerate after any change to the simulator or to validation/, and commit the
result (tests/cli.cmake checks that the committed file is what this script writes).

Usage: scripts/error_bands.py path/to/actsim [-o models/error-bands.csv]
Standard library only; run from anywhere (paths are relative to the repository).
"""
import argparse
import csv
import io
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The tables, in a fixed order (the output is byte-identical run to run).
TABLES = ["validation/published", "validation/real-code"]


def tables():
    out = []
    for folder in TABLES:
        d = os.path.join(ROOT, folder)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith(".csv"):
                out.append(os.path.join(folder, name))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("actsim", help="the actsim binary")
    ap.add_argument("-o", "--output", default=os.path.join(ROOT, "models", "error-bands.csv"))
    args = ap.parse_args()
    bands = {}  # (impl, family, figure) -> [errors], sources
    for table in tables():
        run = subprocess.run([os.path.abspath(args.actsim), "validate", table, "--format", "csv"],
                             cwd=ROOT, capture_output=True, text=True)
        if run.returncode not in (0, 3):  # 3: some row past its tolerance, still a result
            sys.exit("error_bands: actsim validate %s failed: %s" % (table, run.stderr.strip()))
        for row in csv.DictReader(io.StringIO(run.stdout)):
            key = (row["impl"], row["family"], row["figure"])
            errors, sources = bands.setdefault(key, ([], []))
            errors.append(abs(float(row["error_pct"])))
            if row["group"] not in sources:
                sources.append(row["group"])
    lines = ["impl,family,figure,rows,mean_abs_error_pct,max_abs_error_pct,sources\n"]
    for (impl, family, figure) in sorted(bands):
        errors, sources = bands[(impl, family, figure)]
        lines.append("%s,%s,%s,%d,%.2f,%.2f,\"%s\"\n" % (
            impl, family, figure, len(errors), sum(errors) / len(errors), max(errors),
            "; ".join(s.replace('"', "'") for s in sources)))
    tmp = args.output + ".partial"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.writelines(lines)
    os.replace(tmp, args.output)


if __name__ == "__main__":
    main()
