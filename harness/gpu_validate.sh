#!/usr/bin/env bash
# The GPU validation in one call (DESIGN.md §6; harness/README.md "GPU runs").
#
#   harness/gpu_validate.sh --quick|--full [--out DIR] [--build DIR] [--no-build] [--python PY]
#                           [--device NAME] [--tolerance PCT] [--cpu-smoke]
#
# 1. builds actsim and actsim-harness (the CUDA backend too where the build finds nvcc);
# 2. records the environment (nvidia-smi, torch, CUDA) and runs the census of the ops only a
#    recent torch has (torch_reference.py --census: SDPA flash saves, the selective-AC policy's
#    saved ops) next to the CPU census of harness/census.py under this torch;
# 3. runs the PyTorch reference (and the CUDA harness, when built) over two disjoint grids:
#    calibration (per-op timing tables) and validation (GPT-2 small/medium and a Llama-style
#    model with GQA, SwiGLU and RMSNorm; several micro-batches and sequence lengths; every
#    strategy);
# 4. fits the device's efficiencies on the calibration grid (actsim calibrate) and checks the
#    validation grid (actsim validate, on the committed device file and on the calibrated one),
#    printing the error summary.
# Everything goes under one folder (default harness/results/<gpu>-<date>). --quick is sized to
# finish within 8 minutes on an H100 (harness/README.md has the budget); --full runs the larger
# grid. Exit status: 0 when every validation row is within --tolerance (default 1 %), 3 when a
# row misses, 2 on bad arguments, 1 when a step fails.
#
# --cpu-smoke (CI, tests/torch_reference.cmake): the same plumbing without a GPU, on the tiny
# models of tests/validation: the reference's CPU dry run (rows without figures), its CPU
# profile as the timing tables, calibrate and validate. It measures nothing.
set -euo pipefail

usage() {
  echo "usage: $0 --quick|--full [--out DIR] [--build DIR] [--no-build] [--python PY] [--device NAME] [--tolerance PCT] [--cpu-smoke]" >&2
  exit 2
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=""
out=""
build="$root/build-gpu"
python=python3
device=""
tolerance=1
build_it=1
smoke=0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) mode=quick ;;
    --full) mode=full ;;
    --out) out=${2:?--out needs a folder}; shift ;;
    --build) build=${2:?--build needs a folder}; shift ;;
    --python) python=${2:?--python needs an interpreter}; shift ;;
    --device) device=${2:?--device needs an actsim device name}; shift ;;
    --tolerance) tolerance=${2:?--tolerance needs a percentage}; shift ;;
    --no-build) build_it=0 ;;
    --cpu-smoke) smoke=1 ;;
    -h|--help) usage ;;
    *) echo "gpu_validate: error: unknown argument $1" >&2; usage ;;
  esac
  shift
done
[ -n "$mode" ] || usage

if [ "$smoke" = 1 ]; then
  gpu="cpu smoke"
  device=${device:-h100-sxm}
elif ! command -v nvidia-smi > /dev/null 2>&1 || ! nvidia-smi -L > /dev/null 2>&1; then
  echo "gpu_validate: error: no NVIDIA GPU (nvidia-smi -L fails); the CPU checks run in ctest" >&2
  exit 1
else
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
fi
day=$(date -u +%Y-%m-%d)
if [ -z "$out" ]; then
  slug=$(printf '%s' "$gpu" | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')
  out="$root/harness/results/$slug-$day-$mode"
fi
mkdir -p "$out/calibration" "$out/validation"
log="$out/log.txt"
: > "$log"
start=$(date +%s)
step() { echo "== $* ($(( $(date +%s) - start )) s)" | tee -a "$log"; }

# --- 1. build ------------------------------------------------------------------------------
if [ "$build_it" = 1 ]; then
  step "build"
  generator=()
  if command -v ninja > /dev/null 2>&1; then generator=(-G Ninja); fi
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DACTSIM_BUILD_GUI=OFF \
    -DACTSIM_BUILD_BENCH=OFF -DACTSIM_BUILD_TESTS=OFF >> "$log" 2>&1
  cmake --build "$build" --target actsim actsim-harness -j "$(nproc)" >> "$log" 2>&1
fi
actsim="$build/cli/actsim"
harness="$build/harness/actsim-harness"
if [ "$smoke" = 1 ]; then
  export ACTSIM_MODELS="$root/tests/validation"  # exec-gpt, exec-llama
else
  export ACTSIM_MODELS="$root/harness/models"  # the Llama-style validation model
fi
# The CUDA harness runs beside the reference when it was built with its CUDA backend and a GPU
# answers (never in --cpu-smoke); otherwise the torch rows alone are measured.
cuda_harness=0
if [ "$smoke" = 0 ] && "$harness" --help 2>&1 | grep -q -- '--timings' \
   && nvidia-smi > /dev/null 2>&1; then
  cuda_harness=1
fi

# --- 2. environment and census -------------------------------------------------------------
step "environment"
[ "$smoke" = 1 ] || nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || true
"$python" -c 'import sys, torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "python", sys.version.split()[0])' \
  > "$out/environment.txt"
echo "gpu $gpu" >> "$out/environment.txt"
tee -a "$log" < "$out/environment.txt"
if [ -z "$device" ]; then
  case "$gpu" in
    *H200*) device=h200 ;;
    *H100*) device=h100-sxm ;;
    *A100*80GB*) device=a100-80gb ;;
    *A100*) device=a100-40gb ;;
    *) echo "gpu_validate: error: no actsim device file for $gpu: pass --device" >&2; exit 2 ;;
  esac
fi
step "census (flash and selective-AC saves on CUDA; the CPU census under this torch)"
[ "$smoke" = 1 ] || "$python" "$root/harness/torch_reference.py" --census "$out/census-gpu.json" 2>> "$log" \
  || echo "torch_reference.py --census failed (see log.txt)" | tee -a "$log"
if [ "$smoke" = 0 ] && "$python" "$root/harness/census.py" -o "$out/census-cpu.json" >> "$log" 2>&1; then
  if diff -q "$root/harness/census/census.json" "$out/census-cpu.json" > /dev/null; then
    echo "CPU census under this torch: identical to the committed one" | tee -a "$log"
  else
    echo "CPU census under this torch differs from the committed one (see census-cpu.json)" | tee -a "$log"
  fi
fi

# --- 3. grids ------------------------------------------------------------------------------
# Calibration and validation grids share no (model, precision, attention, batch, seq) point:
# actsim calibrate refuses a timing row on the validation grid (DESIGN.md §6).
strategies="none,full,every:2,block:4,sqrt,selective,sac:mm"
if [ "$smoke" = 1 ]; then
  strategies="none,full,every:2,sqrt,selective"  # what torch 1.13 on the CPU can express
  calib=("exec-gpt 2 16 standard" "exec-llama 1 16 standard")
  valid=("exec-gpt 1,2 8 standard" "exec-llama 2 8 standard")
  timed=1
elif [ "$mode" = quick ]; then
  calib=(  # model batch seq attention
    "gpt2-small 2 512 standard,flash"
    "tinyllama-1.1b 1 512 standard,flash"
  )
  valid=(
    "gpt2-small 1,4 1024 standard"
    "gpt2-medium 2 1024 standard"
    "tinyllama-1.1b 1 1024,2048 standard"
    "tinyllama-1.1b 2 1024 flash"
  )
  timed=3
else
  calib=(
    "gpt2-small 1,2,8 256,512 standard,flash"
    "gpt2-medium 1,4 512 standard,flash"
    "tinyllama-1.1b 1,2 256,512 standard,flash"
  )
  valid=(
    "gpt2-small 1,2,4,8 1024 standard,flash"
    "gpt2-medium 1,2,4 1024 standard,flash"
    "tinyllama-1.1b 1,2 1024,2048 standard,flash"
    "tinyllama-1.1b 4 1024 standard,flash"
  )
  timed=5
fi

precision=bf16-amp
reference_device=$device
if [ "$smoke" = 1 ]; then
  precision=fp32  # CPU autocast is not CUDA autocast
  reference_device=cpu
fi

run_reference() {  # $1 folder, $2 index, $3 strategies, $4 "model batch seq attention", $5 profile
  local dir=$1 i=$2 st=$3 model batch seq attn
  read -r model batch seq attn <<< "$4"
  local args=(--model "$model" --batch "$batch" --seq "$seq" --attention "$attn"
              --strategy "$st" --precision "$precision" --device "$reference_device"
              --timed-steps "$timed"
              -o "$dir/torch-$i.csv")
  [ "$5" = profile ] && args+=(--profile "$dir/timing-torch-$i.csv")
  "$python" "$root/harness/torch_reference.py" "${args[@]}" 2>> "$log"
  if [ "$cuda_harness" = 1 ]; then
    "$harness" --backend cuda --model "$model" --batch "$batch" --seq "$seq" --attention "$attn" \
      --strategy "$st" --precision "$precision" --device "$device" -o "$dir/cuda-$i.csv" \
      --timings "$dir/timing-cuda-$i.csv" 2>> "$log"
  fi
}

step "calibration grid"
for i in "${!calib[@]}"; do
  run_reference "$out/calibration" "$i" none "${calib[$i]}" profile
done
step "validation grid"
for i in "${!valid[@]}"; do
  run_reference "$out/validation" "$i" "$strategies" "${valid[$i]}" noprofile
done

# One measured CSV per grid and source: the header once, then every part's rows.
join_csv() {  # $1 output, $2... parts
  local target=$1
  shift
  [ $# -gt 0 ] || return 0
  head -n 1 "$1" > "$target"
  for part in "$@"; do tail -n +2 "$part" >> "$target"; done
}
join_csv "$out/validation/torch.csv" "$out"/validation/torch-[0-9]*.csv
join_csv "$out/calibration/torch.csv" "$out"/calibration/torch-[0-9]*.csv
if [ "$cuda_harness" = 1 ]; then
  join_csv "$out/validation/cuda.csv" "$out"/validation/cuda-[0-9]*.csv
fi

# --- 4. calibrate and validate -------------------------------------------------------------
step "calibrate ($device) on the calibration grid"
timing=()
for f in "$out"/calibration/timing-*.csv; do
  case "$f" in
    *.kernels.csv) ;;  # torch_reference's per-kernel table: for reading, not a timing table
    *) timing+=("$f") ;;
  esac
done
# --cpu-smoke fits a GPU's roofline to CPU timings of tiny ops: the fit may find no positive
# efficiencies in that noise, which is reported and not fatal there (nothing is calibrated then).
calibrated=1
if ! "$actsim" calibrate "${timing[@]}" --device "$device" --validation-grid "$out/validation/torch.csv" \
  --provenance "$gpu, $day, harness/gpu_validate.sh --$mode" -o "$out/$device-calibrated.json" \
  > "$out/calibrate.txt" 2>&1; then
  calibrated=0
  cat "$out/calibrate.txt"
  [ "$smoke" = 1 ] || exit 1
  echo "calibration skipped: CPU timings in --cpu-smoke" | tee -a "$out/calibrate.txt"
else
  cat "$out/calibrate.txt"
fi

status=0
step "validate: peak memory on the validation grid (device file as committed)"
"$actsim" validate "$out/validation/torch.csv" --tolerance "$tolerance" > "$out/validate-torch.txt" || status=$?
cat "$out/validate-torch.txt"
if [ "$calibrated" = 1 ]; then
  step "validate: the same rows on the calibrated device (step time)"
  "$actsim" validate "$out/validation/torch.csv" --tolerance "$tolerance" \
    --device "$out/$device-calibrated.json" > "$out/validate-torch-calibrated.txt" || true
  cat "$out/validate-torch-calibrated.txt"
fi
if [ "$cuda_harness" = 1 ]; then
  step "validate: the CUDA harness's rows"
  "$actsim" validate "$out/validation/cuda.csv" --tolerance 0 > "$out/validate-cuda.txt" || status=$?
  cat "$out/validate-cuda.txt"
fi
step "done: everything is under $out (exit $status)"
exit "$status"
