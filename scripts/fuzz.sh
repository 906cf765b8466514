#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 30) on its seed
# corpus: the strategy seeds in fuzz/corpus/strategy; real HF config.json files of many families
# (fuzz/corpus/config), every shipped model and device config and the fuzz regressions for the
# config loader; argument vectors (fuzz/corpus/cli, one argument per line) for the command line,
# which writes only inside its own temporary folder under build-fuzz/run/tmp; the snapshot
# converter's JSON (fuzz/corpus/snapshot, from python/tests/snapshot_fixtures.py). A crash fails
# with the reproducer's path; add it to tests/fuzz_regressions/ with a test. Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DACTSIM_FUZZ=ON -DACTSIM_BUILD_TESTS=OFF \
  -DACTSIM_BUILD_GUI=OFF -DACTSIM_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target fuzz_strategy fuzz_config fuzz_cli fuzz_snapshot
work=build-fuzz/run
rm -rf "$work" && mkdir -p "$work/strategy" "$work/config" "$work/cli" "$work/snapshot" \
  "$work/artifacts" "$work/tmp"
cp fuzz/corpus/snapshot/* "$work/snapshot/"
cp fuzz/corpus/strategy/* "$work/strategy/"
# Prefixed by their folder: a shipped model may share its file name with a corpus config.
for f in fuzz/corpus/config/*.json models/*.json models/devices/*.json tests/fuzz_regressions/*.json; do
  cp "$f" "$work/config/$(basename "$(dirname "$f")")-$(basename "$f")"
done
cp fuzz/corpus/cli/* "$work/cli/"
if [[ -d tests/fuzz_regressions/cli ]]; then cp tests/fuzz_regressions/cli/* "$work/cli/"; fi
export ACTSIM_MODELS="$PWD/models" TMPDIR="$PWD/$work/tmp"
# The fuzzers run side by side, one per core (each is single-threaded and runs its full SECONDS
# either way): on CI's 2 cores, in two rounds of two, 2 x SECONDS of wall instead of 4 x. Each
# writes its own log; a crash is reported when its round has finished.
targets=(strategy config cli snapshot)
cores=$(nproc)
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
status=0
for ((i = 0; i < ${#targets[@]}; i += cores)); do
  round=("${targets[@]:i:cores}")
  pids=()
  for t in "${round[@]}"; do
    echo "fuzz: $t for ${seconds}s" >&2
    "build-fuzz/fuzz/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=4096 \
      -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$work/$t" 2>"$work/$t.log" &
    pids+=($!)
  done
  for j in "${!round[@]}"; do
    t=${round[j]}
    if ! wait "${pids[j]}"; then
      tail -n 30 "$work/$t.log" >&2
      echo "fuzz: fuzz_$t crashed; reproducer in $work/artifacts/" >&2
      status=1
      continue
    fi
    grep -E "stat::number_of_executed_units" "$work/$t.log" | sed "s/^/fuzz: $t: /" >&2 || true
  done
  ((status == 0)) || exit "$status"
done
