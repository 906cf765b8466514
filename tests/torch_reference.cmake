# The PyTorch reference (DESIGN.md §6 step 5, harness/torch_reference.py) and the GPU script
# (harness/gpu_validate.sh), include()d by tests/CMakeLists.txt after census.cmake (which sets
# ACTSIM_CENSUS_PYTHON). No GPU in CI: the reference's CPU dry run runs the same model and
# strategy code on the tiny models of tests/validation and requires every strategy's loss and
# gradients to be bitwise identical to `none`'s; the GPU measurement itself is not run here.
get_filename_component(ACTSIM_TREF_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(ACTSIM_TREF_STRATEGIES
    "none,full,every:2,sqrt,block:1,selective,custom:none@0-0+full@1-2+sel@3-3+seg@4-4/1")

# Byte-compiles it and its modules (no torch needed; compile() writes no __pycache__ into the
# source tree).
add_test(NAME torch_reference.compiles
         COMMAND ${ACTSIM_CENSUS_PYTHON} -c
                 "import sys; [compile(open(f).read(), f, 'exec') for f in sys.argv[1:]]"
                 ${ACTSIM_TREF_ROOT}/harness/torch_reference.py
                 ${ACTSIM_TREF_ROOT}/harness/torchref/__init__.py
                 ${ACTSIM_TREF_ROOT}/harness/torchref/config.py
                 ${ACTSIM_TREF_ROOT}/harness/torchref/model.py
                 ${ACTSIM_TREF_ROOT}/harness/torchref/train.py)

# $1 python, $2 source root, $3 strategies, $4 actsim, $5 work folder. Exit 77 without torch.
set(ACTSIM_TREF_PRELUDE [=[
set -e
if ! "$1" -c "import torch" > /dev/null 2>&1
then
  echo "torch_reference: $1 cannot import torch: skipped"
  exit 77
fi
mkdir -p "$5"
export ACTSIM_MODELS="$2/tests/validation"
ref="$2/harness/torch_reference.py"
]=])

# GPT (dropout 0.1 at all three sites, fused QKV, LayerNorm) and Llama (GQA 4/2, SwiGLU,
# RMSNorm, rotary) under fp32 and bf16-mixed, every strategy torch 1.13 can express: each
# strategy's loss and all gradients equal `none`'s bitwise (the script exits 1 otherwise).
add_test(NAME torch_reference.dry_run_gradients
         COMMAND sh -c "${ACTSIM_TREF_PRELUDE}
\"$1\" \"$ref\" --device cpu --model exec-gpt,exec-llama --strategy \"$3\" --batch 2 --seq 8 \\
  --precision fp32,bf16-mixed -o \"$5/dry.csv\" > \"$5/dry.txt\"
cat \"$5/dry.txt\"
test \"$(grep -c 'bitwise identical' \"$5/dry.txt\")\" -eq 24
! grep -q DIFFERS \"$5/dry.txt\"
"
         sh ${ACTSIM_CENSUS_PYTHON} ${ACTSIM_TREF_ROOT} ${ACTSIM_TREF_STRATEGIES}
         $<TARGET_FILE:actsim> ${CMAKE_CURRENT_BINARY_DIR}/torch_reference)

# The comparison can fail: recomputing without restoring the RNG state draws new dropout masks,
# so every checkpointing strategy must be reported as differing, with exit status 1.
add_test(NAME torch_reference.dry_run_detects_new_masks
         COMMAND sh -c "${ACTSIM_TREF_PRELUDE}
set +e
\"$1\" \"$ref\" --device cpu --model exec-gpt --strategy none,full,selective --batch 2 --seq 8 \\
  --precision fp32 --no-preserve-rng -o \"$5/rng.csv\" > \"$5/rng.txt\"
status=$?
cat \"$5/rng.txt\"
test $status -eq 1 && test \"$(grep -c DIFFERS \"$5/rng.txt\")\" -eq 2
"
         sh ${ACTSIM_CENSUS_PYTHON} ${ACTSIM_TREF_ROOT} ${ACTSIM_TREF_STRATEGIES}
         $<TARGET_FILE:actsim> ${CMAKE_CURRENT_BINARY_DIR}/torch_reference/rng)

# Its rows are the CSV schema v1: the header is actsim's own, `actsim validate` reads the file
# (dry-run rows carry an error, so nothing is compared), and the profile table has a row per
# forward op region with the calibration columns. exec-llama's gate proj in block 0 (fp32, b 2,
# s 8, h 16, f 24): FLOPs 2 x 16 tokens x 16 x 24 = 12,288 (class 2^13), bytes 4 x (16 x 16 in
# + 24 x 16 weight + 16 x 24 out) = 4,096.
add_test(NAME torch_reference.rows_and_profile_schema
         COMMAND sh -c "${ACTSIM_TREF_PRELUDE}
\"$1\" \"$ref\" --device cpu --model exec-llama --strategy none,sqrt --batch 2 --seq 8 \\
  --precision fp32 -o \"$5/rows.csv\" --profile \"$5/profile.csv\" > /dev/null
\"$4\" run --model exec-gpt --seq 8 --format csv | head -n 1 > \"$5/header.txt\"
head -n 1 \"$5/rows.csv\" | cmp - \"$5/header.txt\"
test \"$(wc -l < \"$5/rows.csv\")\" -eq 5
grep -q '\"environment\"' \"$5/rows.env.json\"
\"$4\" validate \"$5/rows.csv\" > \"$5/validate.txt\"
grep -q '^0 rows' \"$5/validate.txt\"
head -n 1 \"$5/profile.csv\" | grep -q '^model,precision,attention,batch,seq,op,kind,block,phase,name,math16,flops,bytes,kernels,measured_ns,shape_class$'
grep -q ',linear,0,forward,gate proj,0,12288,4096,1,[0-9]*,flops:2^13$' \"$5/profile.csv\"
head -n 1 \"$5/profile.kernels.csv\" | grep -q '^model,.*,shape_class,kernel,device_ns$'
"
         sh ${ACTSIM_CENSUS_PYTHON} ${ACTSIM_TREF_ROOT} ${ACTSIM_TREF_STRATEGIES}
         $<TARGET_FILE:actsim> ${CMAKE_CURRENT_BINARY_DIR}/torch_reference/schema)

# Bad input: one line on stderr naming the flag, exit status 2, no output file.
add_test(NAME torch_reference.bad_input
         COMMAND sh -c "${ACTSIM_TREF_PRELUDE}
for args in '--strategy bogus' '--strategy every:9' '--model no-such-model' '--precision fp8' \\
  '--strategy custom:none@0-1+full@3-4' '--batch 2,x' '--timed-steps 0' '--bogus'
do
  rm -f \"$5/bad.csv\"
  set +e
  \"$1\" \"$ref\" --device cpu --model exec-gpt --seq 8 $args -o \"$5/bad.csv\" > /dev/null 2> \"$5/err.txt\"
  status=$?
  set -e
  test $status -eq 2
  test \"$(wc -l < \"$5/err.txt\")\" -eq 1
  grep -q '^torch_reference: error: .*--' \"$5/err.txt\"
  test ! -e \"$5/bad.csv\"
done
"
         sh ${ACTSIM_CENSUS_PYTHON} ${ACTSIM_TREF_ROOT} ${ACTSIM_TREF_STRATEGIES}
         $<TARGET_FILE:actsim> ${CMAKE_CURRENT_BINARY_DIR}/torch_reference/bad)

set_tests_properties(torch_reference.dry_run_gradients torch_reference.dry_run_detects_new_masks
                     torch_reference.rows_and_profile_schema torch_reference.bad_input
                     PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

# harness/gpu_validate.sh: CI has no GPU, so its syntax (bash -n) and, where installed,
# shellcheck.
add_test(NAME gpu_validate.syntax
         COMMAND sh -c [=[
set -e
bash -n "$1"
if command -v shellcheck > /dev/null 2>&1
then
  shellcheck "$1"
fi
]=] sh ${ACTSIM_TREF_ROOT}/harness/gpu_validate.sh)

# The reference builds the simulator's parameters: its count equals `actsim run`'s `params`
# (tied embeddings, biases, positions, GQA projections) for the GPT and the Llama model.
add_test(NAME torch_reference.parameters_match_the_simulator
         COMMAND sh -c "${ACTSIM_TREF_PRELUDE}
for m in exec-gpt exec-llama
do
  \"$1\" \"$ref\" --device cpu --model $m --strategy none --batch 2 --seq 8 --precision fp32 \\
    -o \"$5/$m.csv\" > \"$5/$m.txt\"
  torch=$(sed -n 's/.*(params \\([0-9]*\\)).*/\\1/p' \"$5/$m.txt\")
  sim=$(\"$4\" run --model $m --seq 8 --format csv | awk -F, 'NR == 2 { print $20 }')
  echo \"$m: torch $torch, simulator $sim\"
  test -n \"$torch\" && test \"$torch\" = \"$sim\"
done
"
         sh ${ACTSIM_CENSUS_PYTHON} ${ACTSIM_TREF_ROOT} ${ACTSIM_TREF_STRATEGIES}
         $<TARGET_FILE:actsim> ${CMAKE_CURRENT_BINARY_DIR}/torch_reference/params)
set_tests_properties(torch_reference.parameters_match_the_simulator
                     PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

# The script's plumbing without a GPU (--cpu-smoke: tiny models, the reference's CPU dry run
# and profile, calibrate, validate; nothing measured): it finishes with status 0, joins one row
# file per grid (header once: 2 GPT batches x 5 strategies x 2 allocators + 5 Llama x 2), keeps
# timing tables apart from row files, and writes a calibrated device file that loads.
add_test(NAME gpu_validate.cpu_smoke
         COMMAND sh -c "${ACTSIM_TREF_PRELUDE}
rm -rf \"$5\"
bash \"$2/harness/gpu_validate.sh\" --quick --cpu-smoke --no-build --build \"$6\" --python \"$1\" \\
  --out \"$5\" > \"$5.log\"
test \"$(wc -l < \"$5/validation/torch.csv\")\" -eq 31
test \"$(grep -c '^schema_version' \"$5/validation/torch.csv\")\" -eq 1
test \"$(grep -c '^schema_version' \"$5/calibration/torch.csv\")\" -eq 1
test -s \"$5/calibration/timing-torch-0.csv\"
# The fit of an H100 roofline to CPU timings may find nothing (then it says so); when it does
# find efficiencies, the device file it wrote must load and simulate.
if test -e \"$5/h100-sxm-calibrated.json\"; then \"$4\" run --device \"$5/h100-sxm-calibrated.json\" --model exec-gpt --seq 8 > /dev/null; else grep -q 'calibration skipped: CPU timings' \"$5/calibrate.txt\"; fi
grep -q 'within the tolerance' \"$5/validate-torch.txt\"
"
         sh ${ACTSIM_CENSUS_PYTHON} ${ACTSIM_TREF_ROOT} ${ACTSIM_TREF_STRATEGIES}
         $<TARGET_FILE:actsim> ${CMAKE_CURRENT_BINARY_DIR}/gpu_validate_smoke ${CMAKE_BINARY_DIR})
set_tests_properties(gpu_validate.cpu_smoke PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
                     DEPENDS "torch_reference.compiles")

# Segments per strategy, against DESIGN.md §4 worked by hand: sqrt over n blocks is
# m = round(sqrt(n)) segments, the first n mod m one block longer (n = 5: m = 2, sizes 3 + 2;
# n = 12: m = 3, 4 + 4 + 4; n = 24: m = 5, 5 + 5 + 5 + 5 + 4; n = 2: m = 1); every:k groups of k,
# the last smaller; block:k the first k blocks one by one; custom clauses as written.
add_test(NAME torch_reference.segments
         COMMAND sh -c "${ACTSIM_TREF_PRELUDE}
cd \"$2/harness\"
\"$1\" -B -c '
import torchref.config as T
seg = lambda s, n: T.resolve_strategy(s, n)[2]
assert seg(\"sqrt\", 5) == [(0, 2), (3, 4)], seg(\"sqrt\", 5)
assert seg(\"sqrt\", 12) == [(0, 3), (4, 7), (8, 11)]
assert seg(\"sqrt\", 24) == [(0, 4), (5, 9), (10, 14), (15, 19), (20, 23)]
assert seg(\"sqrt\", 2) == [(0, 1)]
assert seg(\"every:2\", 5) == [(0, 1), (2, 3), (4, 4)]
assert seg(\"block:2\", 5) == [(0, 0), (1, 1)]
assert seg(\"full\", 3) == [(0, 0), (1, 1), (2, 2)]
assert seg(\"none\", 3) == [] and seg(\"selective\", 3) == []
c = T.resolve_strategy(\"custom:none@0-1+seg@2-6/2+sel@7-7+sac@8-9\", 10)
assert c[2] == [(2, 3), (4, 5), (6, 6)], c[2]
assert c[1] == [\"store\"] * 2 + [\"ckpt\"] * 5 + [\"sel\"] + [\"sac\"] * 2, c[1]
print(\"segments as DESIGN.md 4 defines them\")
'
"
         sh ${ACTSIM_CENSUS_PYTHON} ${ACTSIM_TREF_ROOT} ${ACTSIM_TREF_STRATEGIES}
         $<TARGET_FILE:actsim> ${CMAKE_CURRENT_BINARY_DIR}/torch_reference/segments)
set_tests_properties(torch_reference.segments PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
