#!/usr/bin/env bash
# Installs what actsim needs on Debian 12 (only what is missing) and configures + builds it.
# Safe to run again. Usage: scripts/setup.sh [build-dir] [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."

# The one apt line of shared TOOLCHAIN.md: compilers, CMake/Ninja, the libraries, the GUI
# stack, Xvfb and Mesa for headless screenshots, clang's fuzzer/sanitizer runtimes, and Debian's
# PyTorch for the saved-tensor census; pybind11, pytest and setuptools for the Python package
# (python/; `pip install --no-build-isolation .`).
packages=(build-essential cmake ninja-build pkg-config
  libcli11-dev libfmt-dev doctest-dev nlohmann-json3-dev libbenchmark-dev
  libimgui-dev libstb-dev libglfw3-dev libgl-dev libgl1-mesa-dri xvfb xauth
  clang libclang-rt-14-dev python3 python3-torch
  pybind11-dev python3-dev python3-pytest python3-setuptools python3-wheel python3-pip python3-pandas)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    sudo_cmd=(sudo)
  fi
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build=${1:-build}
shift || true
# The CUDA harness (harness/cuda) is built when CMake finds a CUDA compiler: nvcc on PATH, or
# else the CUDA toolkit's standard install location (CMake does not look there by itself).
cuda=()
if [[ -z ${CUDACXX:-} ]] && ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  cuda=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${cuda[@]}" "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
