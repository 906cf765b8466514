#!/bin/sh
# Measures karpathy/nanoGPT's model.py (its slow attention path: torch 1.13 has no SDPA) on the
# CPU in fp32 under none, full and every:2 for the three configurations below, and writes
#   nanogpt.csv              the step as train.py runs it (`logits` held through backward and
#                            the optimizer step: train.py:300)
#   variants/nanogpt-drop-logits.csv  the same with the logits dropped as soon as the loss is computed
# (README.md here). Usage, from anywhere:
#   validation/real-code/measure_nanogpt.sh NANOGPT_DIR [PYTHON]
# NANOGPT_DIR holds an unmodified model.py of karpathy/nanoGPT (outside this repository);
# VARIANTS="nanogpt-drop-logits:false" (or nanogpt:true) writes one of the two files.
set -e
dir=${1:?usage: measure_nanogpt.sh NANOGPT_DIR [PYTHON]}
py=${2:-/usr/bin/python3}
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/validation/real-code"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for variant in ${VARIANTS:-nanogpt:true nanogpt-drop-logits:false}
do
  file=${variant%%:*} keep=${variant#*:} row=0
  # name n_layer n_head n_embd bias batch seq
  while read -r name layers heads embd bias batch seq
  do
    "$py" "$root/harness/measure_torch.py" "$root/harness/realcode/nanogpt_builder.py:build" \
      --builder-arg nanogpt_dir="$dir" --builder-arg n_layer="$layers" \
      --builder-arg n_head="$heads" --builder-arg n_embd="$embd" --builder-arg bias="$bias" \
      --builder-arg batch="$batch" --builder-arg seq="$seq" --builder-arg keep_logits="$keep" \
      --model "validation/real-code/models/$name.json" --impl nanogpt --attention standard \
      --batch "$batch" --seq "$seq" --strategy none,full,every:2 --first-row "$row" \
      -o "$tmp/$file-$name.csv"
    row=$((row + 3))
  done <<CONFIGS
nanogpt-l4-h256-bias 4 4 256 true 4 256
nanogpt-l4-h256-nobias 4 4 256 false 4 256
nanogpt-l6-h384-bias 6 6 384 true 2 256
CONFIGS
  set -- "$tmp/$file-nanogpt-l4-h256-bias.csv" "$tmp/$file-nanogpt-l4-h256-nobias.csv" \
    "$tmp/$file-nanogpt-l6-h384-bias.csv"
  # The variant --impl nanogpt does not model (logits dropped) goes to variants/ (README).
  dest="$out/$file.csv"
  [ "$keep" = true ] || dest="$out/variants/$file.csv"
  { head -n 1 "$1"; for f in "$@"; do tail -n +2 "$f"; done; } > "$dest.partial"
  mv "$dest.partial" "$dest"
done
