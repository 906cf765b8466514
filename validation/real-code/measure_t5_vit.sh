#!/bin/sh
# Measures T5 and ViT as transformers' modeling code runs them (harness/realcode/hf_t5_vit.py,
# written from modeling_t5.py and modeling_vit.py: transformers does not install on this
# machine's Python) on the CPU in fp32, dropout 0, and writes hf-t5-vit.csv here
# (README.md, "T5 and ViT"). Usage, from anywhere:
#   validation/real-code/measure_t5_vit.sh [PYTHON]
set -e
py=${1:-/usr/bin/python3}
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$root"
"$py" harness/measure_torch.py harness/realcode/hf_t5_vit.py:t5 \
  --model validation/real-code/models/t5-tiny-relu.json --impl hf --batch 4 --seq 128 \
  --target-seq 64 --strategy none,full --first-row 0 -o "$tmp/a.csv"
"$py" harness/measure_torch.py harness/realcode/hf_t5_vit.py:t5 \
  --builder-arg d_ff=384 --builder-arg layers=3 --builder-arg gated=true \
  --builder-arg tied=false --builder-arg seq=96 --builder-arg target_seq=96 \
  --model validation/real-code/models/t5-tiny-gated-untied.json --impl hf --batch 4 --seq 96 \
  --target-seq 96 --strategy none,full --first-row 2 -o "$tmp/b.csv"
"$py" harness/measure_torch.py harness/realcode/hf_t5_vit.py:vit \
  --model validation/real-code/models/vit-tiny.json --impl hf --batch 8 --seq 65 \
  --strategy none,full,every:2 --first-row 4 -o "$tmp/c.csv"
{ cat "$tmp/a.csv"; tail -n +2 "$tmp/b.csv"; tail -n +2 "$tmp/c.csv"; } > validation/real-code/hf-t5-vit.csv.partial
mv validation/real-code/hf-t5-vit.csv.partial validation/real-code/hf-t5-vit.csv
