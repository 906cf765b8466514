#!/usr/bin/env python3
"""Checks that the README's figures are what the current actsim binary prints.

Usage: scripts/readme_figures.py [--actsim build/cli/actsim] [--harness build/harness/actsim-harness]
                                 [--readme README.md] [--list] [--times]

A figure is checked where the README carries an HTML comment (invisible when rendered) before
the text, table or code block that holds it:

    <!-- check: run --model gpt2-small --batch 8 --impl hf,megatron --strategy none,full
         row impl=hf,strategy=none: peak_allocated_bytes 12.35 GiB; step_time_ns 44.7 ms
         row impl=megatron,strategy=full: weights_bytes+optimizer_bytes 1.62 GiB
    -->

`check:` gives actsim's arguments (without `actsim`), run from the repository root; or `$ `
and a program with its arguments, `{actsim}` standing for the binary, `{harness}` for
actsim-harness and `{tmp}` for a temporary folder of the command's own. Then one per line:
- `row SEL: COL VALUE [UNIT]; ...` runs the command with `--format csv` appended, picks the one
  row whose columns equal SEL (`key=value`, comma separated; empty: the only row) and writes
  column COL in UNIT with as many decimals as VALUE has: GiB, MiB, KiB (bytes / 2^30, 2^20,
  2^10), s, ms, us (nanoseconds), TFLOP (FLOPs / 1e12), % (a fraction such as `mfu`, x 100), or
  no unit (the number as is; thousands separators, a `+` or a `−` as VALUE has them). COL
  `a+b` is the sum of two columns.
- `text: LITERAL` runs the command as written and requires LITERAL in its stdout (or, when it
  fails, its stderr: error messages), spaces included.
- `find: REGEX = VALUE` runs the command as written; REGEX's one group, at its first match in
  stdout (then stderr), written as VALUE is, must equal VALUE: for tables with no CSV form
  (`validate`'s, evaluate.py's). Exit status 3 (`validate`: a row outside its tolerance) is
  accepted.
- `block`: the first fenced code block after the comment, less its `$ ` lines and their `\\`
  continuations, must be in the command's stdout line for line (trailing spaces aside).
- `env: K=V` sets a variable for the command.
The figure must also be written in the README: VALUE or LITERAL has to appear in the 60 lines
after the comment (other comments left out, runs of spaces and line breaks read as one space),
so the figure checked is the one a reader sees. Each difference is one line naming the README
line, the figure written and the one printed; the exit status is then 1 (2 for a malformed
check). Each distinct command runs once.
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

UNITS = {
    "GiB": lambda v: float(v) / 2**30,
    "MiB": lambda v: float(v) / 2**20,
    "KiB": lambda v: float(v) / 2**10,
    "s": lambda v: float(v) / 1e9,
    "ms": lambda v: float(v) / 1e6,
    "us": lambda v: float(v) / 1e3,
    "TFLOP": lambda v: float(v) / 1e12,
    "%": lambda v: float(v) * 100.0,
}
REGION_LINES = 60
HARNESS = ["build/harness/actsim-harness"]  # set from --harness


def die(msg: str) -> None:
    """A malformed check comment: one line, exit status 2."""
    print(msg, file=sys.stderr)
    sys.exit(2)


class Block:
    def __init__(self, line: int, args: str):
        self.line = line          # 1-based README line of the comment
        self.args = args
        self.env: dict[str, str] = {}
        self.rows: list[tuple[int, dict[str, str], list[tuple[str, str, str]]]] = []
        self.texts: list[tuple[int, str]] = []
        self.finds: list[tuple[int, str, str]] = []
        self.block = 0            # README line of a `block` line, 0 when none
        self.region = ""          # README text the figures must appear in


def parse(readme: str) -> list[Block]:
    lines = readme.split("\n")
    blocks: list[Block] = []
    i = 0
    starts = []
    while i < len(lines):
        m = re.match(r"\s*<!-- check:(.*)$", lines[i])
        if not m:
            i += 1
            continue
        start = i
        body = [(i + 1, m.group(1))]
        while "-->" not in body[-1][1]:
            i += 1
            if i >= len(lines):
                die(f"README line {start + 1}: check comment not closed with -->")
            body.append((i + 1, lines[i]))
        last_no, last = body[-1]
        body[-1] = (last_no, last[: last.index("-->")])
        b = Block(start + 1, body[0][1].strip())
        if not b.args:
            die(f"README line {b.line}: check: names no command")
        for no, text in body[1:]:
            text = text.strip()
            if not text:
                continue
            if text.startswith("env:"):
                k, _, v = text[4:].strip().partition("=")
                b.env[k.strip()] = v.strip()
            elif text == "block":
                b.block = no
            elif text.startswith("find:"):
                pat, eq, value = text[5:].strip().rpartition(" = ")
                if not eq or not value:
                    die(f"README line {no}: find: needs 'REGEX = VALUE'")
                try:
                    if re.compile(pat).groups != 1:
                        die(f"README line {no}: find: the pattern needs one (group)")
                except re.error as e:
                    die(f"README line {no}: find: {e}")
                b.finds.append((no, pat, value.strip()))
            elif text.startswith("text:"):
                lit = text[5:].strip()
                if not lit:
                    die(f"README line {no}: empty text:")
                b.texts.append((no, lit))
            elif text.startswith("row"):
                sel_s, colon, figs_s = text[3:].partition(": ")
                if not colon:
                    die(f"README line {no}: row needs ': ' before its figures")
                sel = {}
                for kv in filter(None, (s.strip() for s in sel_s.split(","))):
                    k, eq, v = kv.partition("=")
                    if not eq:
                        die(f"README line {no}: row selector '{kv}' is not key=value")
                    sel[k.strip()] = v.strip()
                figs = []
                for f in filter(None, (s.strip() for s in figs_s.split(";"))):
                    parts = f.split()
                    if len(parts) not in (2, 3):
                        die(f"README line {no}: figure '{f}' is not 'column value [unit]'")
                    unit = parts[2] if len(parts) == 3 else ""
                    if unit and unit not in UNITS:
                        die(f"README line {no}: unknown unit '{unit}' (one of {', '.join(UNITS)})")
                    figs.append((parts[0], parts[1], unit))
                if not figs:
                    die(f"README line {no}: row names no figure")
                b.rows.append((no, sel, figs))
            else:
                die(f"README line {no}: expected 'row', 'text:' or 'env:', got '{text}'")
        if not b.rows and not b.texts and not b.block and not b.finds:
            die(f"README line {b.line}: check names no figure")
        blocks.append(b)
        starts.append(i + 1)  # first line after the comment (0-based)
        i += 1
    for k, b in enumerate(blocks):
        region = "\n".join(lines[starts[k]:starts[k] + REGION_LINES])
        b.region = re.sub(r"<!--.*?-->", "", region, flags=re.S)  # figures in comments don't count
        b.raw_region = region
    return blocks


def decimals(value: str) -> int:
    return len(value.split(".")[1]) if "." in value else 0


def formatted(raw: str, value: str, unit: str) -> str:
    """The column's raw CSV value written as the README writes VALUE."""
    if unit:
        x = UNITS[unit](raw)
    else:
        x = float(raw)
    d = decimals(value)
    s = f"{x:,.{d}f}" if "," in value else f"{x:.{d}f}"
    if value.startswith("+") and x >= 0:
        s = "+" + s
    if s.lstrip("+-").strip("0.,") == "":
        s = s.lstrip("+-")  # -0.0 reads 0.0
    return s


def written(figure: str, region: str) -> bool:
    """FIGURE is in the README text REGION, line breaks and runs of spaces read as one space."""
    return " ".join(figure.split()) in " ".join(region.split())


def fenced_block(region: str) -> str | None:
    """The first fenced code block of REGION without its `$ ` command lines."""
    m = re.search(r"^```[^\n]*\n(.*?)^```", region, flags=re.S | re.M)
    if not m:
        return None
    kept, command = [], False
    for l in m.group(1).split("\n"):
        if l.startswith("$ ") or command:  # a command line and its continuations
            command = l.rstrip().endswith("\\")
            continue
        kept.append(l.rstrip())
    return "\n".join(kept).strip("\n")


_ran: dict[tuple, tuple[int, str, str, float]] = {}


def run(actsim: str, args: list[str], env: dict[str, str]) -> tuple[int, str, str, float]:
    """actsim ARGS, or ARGS as a program of its own when they start with `$` (`{actsim}` in
    them replaced by the binary's path). A command checked twice runs once."""
    key = (actsim, tuple(args), tuple(sorted(env.items())))
    if key not in _ran:
        _ran[key] = _run(actsim, args, env)
    return _ran[key]


def _run(actsim: str, args: list[str], env: dict[str, str]) -> tuple[int, str, str, float]:
    e = dict(os.environ)
    e.update(env)
    with tempfile.TemporaryDirectory() as tmp:
        subst = {"{actsim}": actsim, "{harness}": HARNESS[0], "{tmp}": tmp}
        argv = [actsim] + args
        if args[:1] == ["$"]:
            argv = args[1:]
            for k, v in subst.items():
                argv = [x.replace(k, v) for x in argv]
        t0 = time.monotonic()
        p = subprocess.run(argv, capture_output=True, text=True, env=e, timeout=120)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--actsim", default="build/cli/actsim")
    ap.add_argument("--readme", default="README.md")
    ap.add_argument("--harness", default="build/harness/actsim-harness", help="actsim-harness, for {harness}")
    ap.add_argument("--list", action="store_true", help="print the checks and run nothing")
    ap.add_argument("--times", action="store_true", help="print each command's wall time")
    a = ap.parse_args()
    HARNESS[0] = a.harness

    with open(a.readme, encoding="utf-8") as f:
        blocks = parse(f.read())
    if not blocks:
        print(f"{a.readme}: no check comments", file=sys.stderr)
        return 1
    failures: list[str] = []
    figures = 0
    for b in blocks:
        args = shlex.split(b.args)
        if args and args[0] == "actsim":
            args = args[1:]
        if a.list:
            print(f"{a.readme}:{b.line}: actsim {' '.join(args)}")
            continue
        where = f"{a.readme}:{b.line}"
        if b.rows:
            rc, out, err, dt = run(a.actsim, args + ["--format", "csv"], b.env)
            if a.times:
                print(f"{dt:6.2f} s  {where}  actsim {' '.join(args)} --format csv")
            if rc != 0:
                failures.append(f"{where}: actsim {' '.join(args)} --format csv: exit {rc}: {err.strip()[:300]}")
            else:
                table = list(csv.DictReader(io.StringIO(out)))
                for no, sel, figs in b.rows:
                    wl = f"{a.readme}:{no}"
                    bad = [k for k in sel if table and k not in table[0]]
                    if bad:
                        failures.append(f"{wl}: no CSV column {bad[0]}")
                        continue
                    hits = [r for r in table if all(r[k] == v for k, v in sel.items())]
                    if len(hits) != 1:
                        failures.append(f"{wl}: row {sel} matches {len(hits)} of {len(table)} rows, not one")
                        continue
                    for col, value, unit in figs:
                        figures += 1
                        cols = col.split("+")
                        missing = [c for c in cols if c not in hits[0]]
                        if missing:
                            failures.append(f"{wl}: no CSV column {missing[0]}")
                            continue
                        if any(hits[0][c] == "" for c in cols):
                            failures.append(f"{wl}: {col} is empty in the row {sel}")
                            continue
                        raw = str(sum(float(hits[0][c]) for c in cols))
                        got = formatted(raw, value.replace("\u2212", "-"), unit).replace("-", "\u2212") \
                            if "\u2212" in value else formatted(raw, value, unit)
                        shown = f"{value} {unit}".strip()
                        if got != value:
                            failures.append(f"{wl}: {col} {sel}: README {shown}, actsim prints {got} {unit}".rstrip())
                        if not written(value, b.region):
                            failures.append(f"{wl}: {shown} is checked but not written in the text after the comment")
        if b.block:
            wl = f"{a.readme}:{b.block}"
            want = fenced_block(b.raw_region)
            rc, out, err, dt = run(a.actsim, args, b.env)
            if a.times:
                print(f"{dt:6.2f} s  {where}  actsim {' '.join(args)} (block)")
            figures += 1
            got = "\n".join(l.rstrip() for l in out.split("\n"))
            if want is None:
                failures.append(f"{wl}: block: no fenced code block after the comment")
            elif rc != 0:
                failures.append(f"{wl}: actsim {' '.join(args)}: exit {rc}: {err.strip()[:300]}")
            elif want not in got:
                wl_lines, got_lines = want.split("\n"), got.split("\n")
                first = next((l for l in wl_lines if l not in got_lines), wl_lines[0])
                failures.append(f"{wl}: the code block is not what actsim {' '.join(args)} prints; "
                                f"first line not printed: {first.strip()}")
        if b.texts or b.finds:
            rc, out, err, dt = run(a.actsim, args, b.env)
            for no, pat, value in b.finds:
                figures += 1
                wl = f"{a.readme}:{no}"
                m = re.search(pat, out, flags=re.M) or re.search(pat, err, flags=re.M)
                if rc not in (0, 3):  # validate exits 3 when a row is outside its tolerance
                    failures.append(f"{wl}: actsim {' '.join(args)}: exit {rc}: {err.strip()[:300]}")
                elif not m:
                    failures.append(f"{wl}: actsim {' '.join(args)}: nothing printed matches {pat}")
                else:
                    plain = value.replace("\u2212", "-")
                    got = formatted(m.group(1).replace(",", "").replace("\u2212", "-"), plain, "")
                    if got != plain:
                        failures.append(f"{wl}: {pat}: README {value}, actsim prints {m.group(1)}")
                if not written(value, b.region):
                    failures.append(f"{wl}: {value} is checked but not written in the text after the comment")
            if a.times:
                print(f"{dt:6.2f} s  {where}  actsim {' '.join(args)}")
            for no, lit in b.texts:  # text: the literal, exit status as printed
                figures += 1
                wl = f"{a.readme}:{no}"
                if rc != 0 and lit not in err:
                    failures.append(f"{wl}: actsim {' '.join(args)}: exit {rc}: {err.strip()[:300]}")
                elif lit not in out and lit not in err:
                    failures.append(f"{wl}: actsim {' '.join(args)} no longer prints: {lit}")
                if not written(lit, b.region):
                    failures.append(f"{wl}: '{lit}' is checked but not written in the text after the comment")
    if a.list:
        return 0
    for f in failures:
        print(f)
    print(f"{a.readme}: {len(blocks)} commands, {figures} figures checked, {len(failures)} differences")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
