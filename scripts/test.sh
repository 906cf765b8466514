#!/usr/bin/env bash
# README command 2: set up, build, and run every test; then the same suites built with
# AddressSanitizer + UndefinedBehaviorSanitizer. .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's wall time goes to stderr, so a slow CI run says where its minutes went.
phase() { echo "test.sh: $1 done after ${SECONDS}s" >&2; }
scripts/setup.sh build
phase "build"
(cd build && ctest --output-on-failure -j "$(nproc)")
phase "tests"

# Sanitized build of everything but the GUI (Mesa and the X libraries it loads under Xvfb are
# not ours to leak-check). Any ASan or UBSan report fails the test that triggered it. The CUDA
# backend is left out here (-DACTSIM_CUDA=OFF): nvcc's device code is not instrumented, the build
# above already compiles it, and without a GPU its tests only check the refusal. The CUDA
# harness's host side is still built and tested under the sanitizers.
scripts/setup.sh build-asan -DACTSIM_SANITIZE=ON -DACTSIM_BUILD_GUI=OFF -DACTSIM_BUILD_BENCH=OFF \
  -DACTSIM_CUDA=OFF
phase "sanitized build"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j "$(nproc)")
phase "sanitized tests"

# libFuzzer: the strategy parser and the config loaders, 30 s each (clang from setup.sh).
scripts/fuzz.sh 30
phase "fuzzers"
