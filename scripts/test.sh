#!/usr/bin/env bash
# README command 2: set up, build, and run every test; then the same suites built with
# AddressSanitizer + UndefinedBehaviorSanitizer. .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
(cd build && ctest --output-on-failure -j "$(nproc)")

# Sanitized build of everything but the GUI (Mesa and the X libraries it loads under Xvfb are
# not ours to leak-check). Any ASan or UBSan report fails the test that triggered it.
scripts/setup.sh build-asan -DACTSIM_SANITIZE=ON -DACTSIM_BUILD_GUI=OFF -DACTSIM_BUILD_BENCH=OFF
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j "$(nproc)")

# libFuzzer: the strategy parser and the config loaders, 30 s each (clang from setup.sh).
scripts/fuzz.sh 30
