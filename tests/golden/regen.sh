#!/usr/bin/env bash
# Regenerates tests/golden/tiny.csv from an actsim binary. Run it only when a change to the
# model is intended, and say in the commit what changed in the figures and why.
# Usage: tests/golden/regen.sh path/to/actsim
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ACTSIM_MODELS="$here" "$1" sweep $(cat "$here/args.txt") -o "$here/tiny.csv"
