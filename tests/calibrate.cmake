# actsim calibrate (DESIGN.md §5, §6), include()d by tests/CMakeLists.txt after include(doctest)
# and the test_main target: the fit against synthetic tables from the engine's own time model
# (calibrate_tests), and the verb through the real binary: a fit written to a new device file
# that loads, the grids kept apart, and bad input (one line, exit 2, no output file).
add_executable(calibrate_tests ${CMAKE_CURRENT_LIST_DIR}/test_calibrate.cpp)
target_link_libraries(calibrate_tests PRIVATE actsim_cli nlohmann_json::nlohmann_json test_main
                      actsim_options)
target_compile_definitions(calibrate_tests PRIVATE ACTSIM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
doctest_discover_tests(calibrate_tests)

set(ACTSIM_CALIBRATE_DIR ${CMAKE_CURRENT_BINARY_DIR}/calibrate)
file(MAKE_DIRECTORY ${ACTSIM_CALIBRATE_DIR})
# A tiny table (three compute-bound GEMMs, three memory-bound copies, each also paying a 5 us
# launch): on the h100-sxm peaks it is fitted exactly by compute 0.5, memory 0.5, launch 5000 ns.
# $1 actsim, $2 work folder.
set(ACTSIM_CALIBRATE_PRELUDE [=[
set -e
mkdir -p "$2"
cd "$2"
rm -f new.json
printf 'model,precision,attention,batch,seq,op,kind,block,phase,name,math16,flops,bytes,kernels,measured_ns\n' > t.csv
for f in 989000000000 1978000000000 4945000000000
do
  echo "gpt2-small,bf16-amp,standard,1,128,0,linear,0,forward,fc1,1,$f,1000,1,$((f / 494500 + 5000))" >> t.csv
done
for m in 3350000000 6700000000 33500000000
do
  echo "gpt2-small,bf16-amp,standard,1,128,1,add,0,forward,residual 1,1,0,$m,1,$((m / 1675 + 5000))" >> t.csv
done
printf 'schema_version,source,model,precision,attention,batch,seq\n1,torch,gpt2-small,bf16-amp,standard,4,1024\n' > val.csv
]=])

add_test(NAME calibrate.writes_a_device_file
         COMMAND sh -c "${ACTSIM_CALIBRATE_PRELUDE}
\"$1\" calibrate t.csv --device h100-sxm --validation-grid val.csv --provenance 'test table' -o new.json > out.txt
grep -q '\"compute_efficiency\": 0.5,' new.json
grep -q '\"memory_efficiency\": 0.5,' new.json
grep -q '\"launch_overhead_ns\": 5000,' new.json
grep -q 'actsim calibrate.*from t.csv; test table' new.json
\"$1\" run --device ./new.json --model gpt2-small > run.txt
grep -q 'efficiency_by_kind' new.json && exit 1
rm -f kinds.json
\"$1\" calibrate t.csv --by-kind 3 --validation-grid val.csv --provenance 'test table' -o kinds.json > kinds.txt
grep -q '\"linear\": {' kinds.json
grep -q '\"add\": {' kinds.json
grep -q 'per op kind with at least 3 rows' kinds.json
\"$1\" run --device ./kinds.json --model gpt2-small > run.txt
awk -F, -v OFS=, 'NR > 1 { $15 = $15 \"00000\" } 1' t.csv > slow.csv
rm -f slow.json
\"$1\" calibrate slow.csv --by-kind 3 --validation-grid val.csv --provenance 'slow' -o slow.json > slow.txt
grep -q '\"compute_efficiency\": 5e-06,' slow.json
\"$1\" run --device ./slow.json --model gpt2-small > run.txt
cp kinds.json copy.json
\"$1\" calibrate t.csv --device ./copy.json --by-kind 0 --validation-grid val.csv --provenance 'in place' --in-place > inplace.txt
grep -q 'from t.csv; in place' copy.json
grep -q 'efficiency_by_kind' copy.json && exit 1
\"$1\" run --device ./copy.json --model gpt2-small > run.txt
set +e
\"$1\" calibrate t.csv --device h100-sxm --validation-grid val.csv --provenance x -o new.json 2> err.txt
test $? -eq 2 && grep -q 'exists' err.txt
" sh $<TARGET_FILE:actsim> ${ACTSIM_CALIBRATE_DIR}/ok)

# Bad input: each one line naming the file or flag, exit 2, no device file written.
add_test(NAME calibrate.bad_input
         COMMAND sh -c "${ACTSIM_CALIBRATE_PRELUDE}
sed 's/,1,128,/,4,1024,/' t.csv > on-grid.csv
sed '3s/,[0-9]*$/,-1/' t.csv > negative.csv
printf 'model,op\nx,1\n' > header.csv
check() {
  expect=$1
  shift
  rm -f new.json
  set +e
  \"$A\" calibrate \"$@\" > out.txt 2> err.txt
  status=$?
  set -e
  test $status -eq 2 || { echo \"exit $status for $*\"; exit 1; }
  test \"$(wc -l < err.txt)\" -eq 1
  grep -q -- \"$expect\" err.txt || { cat err.txt; exit 1; }
  test ! -e new.json
}
A=\"$1\"
check 'validation grid' on-grid.csv --validation-grid val.csv --provenance x -o new.json
check 'measured_ns' negative.csv --validation-grid val.csv --provenance x -o new.json
check 'precision' header.csv --validation-grid val.csv --provenance x -o new.json
check 'cannot open' missing.csv --validation-grid val.csv --provenance x -o new.json
check 'validation-grid' t.csv --provenance x -o new.json
check 'in-place' t.csv --validation-grid val.csv --provenance x
check 'h200x' t.csv --device h200x --validation-grid val.csv --provenance x -o new.json
" sh $<TARGET_FILE:actsim> ${ACTSIM_CALIBRATE_DIR}/bad)

# actsim validate reports step time where rows measured it (not gated by --tolerance), on the
# rows' device or on --device (a calibrated file): simulated rows relabelled `torch` with their
# step time stretched by 1.25 read -20.00 %, and another device predicts other times.
add_test(NAME calibrate.validate_reports_step_time
         COMMAND sh -c [=[
set -e
mkdir -p "$2"
cd "$2"
"$1" sweep --model gpt2-small --strategy none,full --batch 2 --seq 256 --format csv -o sim.csv
awk -F, -v OFS=, 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == "step_time_ns") c = i }
  NR > 1 { $2 = "torch"; $c = sprintf("%d", $c * 5 / 4) } { print }' sim.csv > torch.csv
"$1" validate torch.csv > h100.txt
test "$(grep -c -- '-20.00 %' h100.txt)" -ge 2
grep -q 'Step time' h100.txt
"$1" validate torch.csv --device h200 > h200.txt
grep 'ms' h100.txt > a.txt
grep 'ms' h200.txt > b.txt
! cmp -s a.txt b.txt
]=] sh $<TARGET_FILE:actsim> ${ACTSIM_CALIBRATE_DIR}/time)
