# Validation (DESIGN.md §6), include()d by tests/CMakeLists.txt: the measured CSV committed under
# tests/validation/ (actsim-harness --backend cpu with the arguments of args.txt) is what the
# harness produces today, and `actsim validate` finds every row exact; a tampered row fails it.
set(ACTSIM_VALIDATION_DIR ${CMAKE_CURRENT_SOURCE_DIR}/validation)

# $1 actsim-harness, $2 folder, $3 output
add_test(NAME validation.harness_regenerate
         COMMAND sh -c [=[
set -e
"$1" $(cat "$2/args.txt") -o "$3"
diff -u "$2/measured-cpu.csv" "$3"
]=] sh $<TARGET_FILE:actsim-harness> ${ACTSIM_VALIDATION_DIR}
    ${CMAKE_CURRENT_BINARY_DIR}/measured-cpu.csv)

add_test(NAME validation.exact
         COMMAND actsim validate ${ACTSIM_VALIDATION_DIR}/measured-cpu.csv --tolerance 0)

# One row's measured peak one byte off: validate must exit 3 and flag that row.
add_test(NAME validation.tampered_row_fails
         COMMAND sh -c [=[
awk -F, -v OFS=, 'NR == 5 { $60 = "1" $60 } { print }' "$2/measured-cpu.csv" > "$3"  # 60: peak_requested_bytes
cmp -s "$2/measured-cpu.csv" "$3" && { echo "tampering changed nothing"; exit 1; }
"$1" validate "$3" --tolerance 0 > "$3.out"
status=$?
grep -q "exceeds tolerance" "$3.out" || { echo "no row flagged"; exit 1; }
test "$status" -eq 3
]=] sh $<TARGET_FILE:actsim> ${ACTSIM_VALIDATION_DIR}
    ${CMAKE_CURRENT_BINARY_DIR}/tampered.csv)

# actsim-harness --backend cuda. Built with the CUDA backend (nvcc found): with no usable GPU
# (CI) it exits 3 with one line naming cudaGetDeviceCount's error and writes nothing; on a
# machine with a GPU it measures the committed configs' first points (source cuda) and its rows
# validate exactly (the device ledger counts exact bytes), with a timing table row per call.
# Built without it: exit 3, saying so.
if(TARGET cuda_backend)
  add_test(NAME validation.cuda_backend
           COMMAND sh -c [=[
rm -f "$3" "$3.timings" "$3.err"
# (in sanitizer builds on a GPU machine, the CUDA driver needs ASan's shadow gap unprotected)
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}protect_shadow_gap=0" \
"$1" --backend cuda --model exec-gpt,exec-llama --strategy none,full,selective \
  --attention standard,flash --batch 2 --seq 8 -o "$3" --timings "$3.timings" 2> "$3.err"
status=$?
cat "$3.err"
if [ "$status" -eq 3 ]; then
  test "$(wc -l < "$3.err")" -eq 1 || exit 1
  grep -q '^actsim-harness: error: --backend cuda: no usable CUDA device (cudaGetDeviceCount: cuda' "$3.err" \
    || grep -q '^actsim-harness: error: --backend cuda: no CUDA device (cudaGetDeviceCount found 0)$' "$3.err" \
    || exit 1
  test ! -e "$3" && test ! -e "$3.timings"
  exit
fi
test "$status" -eq 0 || exit 1
test "$(grep -c '^1,cuda,' "$3")" -eq 12 || exit 1
head -n 1 "$3.timings" | grep -q '^model,precision,attention,batch,seq,op,kind,block,phase,name,math16,flops,bytes,kernels,measured_ns$'
test "$(grep -c ',forward,' "$3.timings")" -gt 0 || exit 1
"$4" validate "$3" --tolerance 0
]=] sh $<TARGET_FILE:actsim-harness> ${ACTSIM_VALIDATION_DIR}
      ${CMAKE_CURRENT_BINARY_DIR}/measured-cuda.csv $<TARGET_FILE:actsim>)
  set(actsim_cuda_test validation.cuda_backend)
else()
  add_test(NAME validation.cuda_backend_not_built
           COMMAND sh -c [=[
"$1" --backend cuda --model exec-gpt 2> "$2"
status=$?
grep -q "^actsim-harness: error: --backend cuda: this build has no CUDA backend" "$2" && test "$status" -eq 3
]=] sh $<TARGET_FILE:actsim-harness> ${CMAKE_CURRENT_BINARY_DIR}/cuda.err)
  set(actsim_cuda_test validation.cuda_backend_not_built)
endif()

# Torch rows are compared on the figure matching their allocator: simulated rows relabelled
# `torch`, with the figure that must not be read spoiled (exact: peak_allocated_bytes; caching:
# peak_requested_bytes), validate exactly; spoiling the figure that is read fails.
# Columns: 2 source, 18 allocator, 22 peak_allocated_bytes, 60 peak_requested_bytes.
add_test(NAME validation.torch_rows_use_the_allocator_figure
         COMMAND sh -c [=[
set -e
"$1" sweep --model exec-gpt --strategy none,full --batch 2 --seq 8 --allocator exact,caching \
  --format csv -o "$2.sim.csv"
awk -F, -v OFS=, 'NR > 1 { $2 = "torch"; if ($18 == "exact") $22 = 1; else $60 = 1 } 1' \
  "$2.sim.csv" > "$2"
"$1" validate "$2" --tolerance 0
awk -F, -v OFS=, 'NR > 1 && $18 == "caching" { $22 = $22 + 1 } 1' "$2" > "$2.bad.csv"
set +e
"$1" validate "$2.bad.csv" --tolerance 0 > /dev/null
test $? -eq 3
]=] sh $<TARGET_FILE:actsim> ${CMAKE_CURRENT_BINARY_DIR}/torch-rows.csv)

# Bad input: one line naming the file and the field, exit status 2.
add_test(NAME validation.bad_input
         COMMAND sh -c [=[
printf 'schema_version,source,row_index\n1,cpu,0\n' > "$2"
"$1" validate "$2" 2> "$2.err"
status=$?
test "$status" -eq 2 && grep -q "peak_requested_bytes\|model: column missing" "$2.err" || exit 1
"$1" validate "$3/measured-cpu.csv" --tolerance -1 2> "$2.err"
test $? -eq 2 && grep -q -- "--tolerance" "$2.err"
]=] sh $<TARGET_FILE:actsim> ${CMAKE_CURRENT_BINARY_DIR}/bad.csv ${ACTSIM_VALIDATION_DIR})

set_tests_properties(validation.harness_regenerate validation.exact validation.tampered_row_fails
                     ${actsim_cuda_test} validation.torch_rows_use_the_allocator_figure
                     validation.bad_input
                     PROPERTIES ENVIRONMENT "ACTSIM_MODELS=${ACTSIM_VALIDATION_DIR}")
