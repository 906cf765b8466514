#!/bin/sh
# famdec (issue 12): GPT-NeoX (Pythia) as HF's modeling code runs it in eager mode
# (harness/realcode/gpt_neox_builder.py: written for torch 1.13 from transformers'
# modular_gpt_neox.py @ 00dcc6dda6f6; transformers itself is not installed here), measured on the
# CPU in fp32 under none and full, with torch 1.13's foreach AdamW and with SGD, parallel and
# sequential residual. Writes gpt-neox.csv here (README.md). Usage, from anywhere:
#   validation/real-code/measure_gpt_neox.sh [PYTHON]
set -e
py=${1:-/usr/bin/python3}
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
row=0
# model-file parallel optimizer
while read -r name parallel opt
do
  "$py" "$root/harness/measure_torch.py" "$root/harness/realcode/gpt_neox_builder.py:build" \
    --builder-arg parallel="$parallel" --model "validation/real-code/models/$name.json" \
    --impl hf --attention standard --optimizer "$opt" --batch 4 --seq 256 \
    --strategy none,full --first-row "$row" -o "$tmp/$row.csv"
  row=$((row + 2))
done <<CONFIGS
gpt-neox-l4-h256 true adamw
gpt-neox-l4-h256 true sgd
gpt-neox-l4-h256-seq false sgd
CONFIGS
{ head -n 1 "$tmp/0.csv"; for r in 0 2 4; do tail -n +2 "$tmp/$r.csv"; done; } > "$root/validation/real-code/gpt-neox.csv.partial"
mv "$root/validation/real-code/gpt-neox.csv.partial" "$root/validation/real-code/gpt-neox.csv"
