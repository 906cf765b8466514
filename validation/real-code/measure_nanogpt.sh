#!/bin/sh
# Measures nanoGPT's model.py (slow-attention path, torch 1.13, CPU, fp32) under none, full and
# every:2 for the configurations of nanogpt.csv, and writes nanogpt.csv (README.md here).
#   validation/real-code/measure_nanogpt.sh NANOGPT_DIR [PYTHON]
# NANOGPT_DIR holds an unmodified model.py of karpathy/nanoGPT (outside this repository).
set -e
dir=${1:?usage: measure_nanogpt.sh NANOGPT_DIR [PYTHON]}
py=${2:-/usr/bin/python3}
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/validation/real-code"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
row=0
# name n_layer n_head n_embd bias batch seq
while read -r name layers heads embd bias batch seq
do
  "$py" "$root/harness/measure_torch.py" "$root/harness/realcode/nanogpt_builder.py:build" \
    --builder-arg nanogpt_dir="$dir" --builder-arg n_layer="$layers" \
    --builder-arg n_head="$heads" --builder-arg n_embd="$embd" --builder-arg bias="$bias" \
    --builder-arg batch="$batch" --builder-arg seq="$seq" \
    --model "validation/real-code/models/$name.json" --impl nanogpt --attention standard \
    --batch "$batch" --seq "$seq" --strategy none,full,every:2 --first-row "$row" \
    -o "$tmp/$name.csv"
  row=$((row + 3))
done <<CONFIGS
nanogpt-l4-h256-bias 4 4 256 true 4 256
nanogpt-l4-h256-nobias 4 4 256 false 4 256
nanogpt-l6-h384-bias 6 6 384 true 2 256
CONFIGS
set -- "$tmp"/nanogpt-l4-h256-bias.csv "$tmp"/nanogpt-l4-h256-nobias.csv \
  "$tmp"/nanogpt-l6-h384-bias.csv
{ head -n 1 "$1"; for f in "$@"; do tail -n +2 "$f"; done; } > "$out/nanogpt.csv.partial"
mv "$out/nanogpt.csv.partial" "$out/nanogpt.csv"
