#!/bin/sh
# Measures HF BERT's eager training step with its sequence-classification and token-
# classification heads (harness/realcode/hf_bert_builder.py: the op sequence of
# transformers' modeling_bert.py @ 8ec58104181b, written out because transformers does not
# install here) on the CPU in fp32 without dropout, under none and full, and writes
# hf-bert.csv here (README.md, "HF BERT heads"). Usage, from anywhere:
#   validation/real-code/measure_hf_bert.sh [PYTHON]
set -e
py=${1:-/usr/bin/python3}
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/validation/real-code"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
row=0
for head in seqcls tokcls
do
  cd "$root"
  "$py" "$root/harness/measure_torch.py" "$root/harness/realcode/hf_bert_builder.py:build" \
    --builder-arg head="$head" --builder-arg batch=8 --builder-arg seq=256 \
    --model "validation/real-code/models/hf-bert-l4-h256-$head.json" --impl hf \
    --attention standard --dropout 0 --batch 8 --seq 256 --strategy none,full \
    --first-row "$row" -o "$tmp/$head.csv"
  row=$((row + 2))
done
{ head -n 1 "$tmp/seqcls.csv"; tail -n +2 "$tmp/seqcls.csv"; tail -n +2 "$tmp/tokcls.csv"; } \
  > "$out/hf-bert.csv.partial"
mv "$out/hf-bert.csv.partial" "$out/hf-bert.csv"
