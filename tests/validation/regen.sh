#!/bin/sh
# Regenerates measured-cpu.csv (or writes it to $2): one actsim-harness run per line of args.txt,
# the first run's CSV whole, each later run's rows after its header. (exec11: args.txt holds one
# grid per line; the LoRA, QLoRA and MLA grids are not crossed with the first.)
# Usage: tests/validation/regen.sh build/harness/actsim-harness [output.csv]
set -e
here=$(dirname "$0")
out=${2:-$here/measured-cpu.csv}
tmp="$out.partial"
rm -f "$tmp"
first=1
while IFS= read -r line; do
  [ -z "$line" ] && continue
  # shellcheck disable=SC2086
  ACTSIM_MODELS="$here" "$1" $line -o "$tmp.run"
  if [ "$first" -eq 1 ]; then cat "$tmp.run" > "$tmp"; first=0; else tail -n +2 "$tmp.run" >> "$tmp"; fi
  rm -f "$tmp.run"
done < "$here/args.txt"
mv "$tmp" "$out"
