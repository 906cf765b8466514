#!/usr/bin/env bash
# README command 1: set up, build, and run actsim's main job on the default model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
exec build/cli/actsim run --model gpt2-small --device h100-sxm --batch 8 --seq 1024 \
  --strategy none,full,selective "$@"
