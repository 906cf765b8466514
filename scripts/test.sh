#!/usr/bin/env bash
# README command 2: set up, build, and run every test. .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
cd build
ctest --output-on-failure -j "$(nproc)"
