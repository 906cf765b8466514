# CLI tests (DESIGN.md §7), include()d by tests/CMakeLists.txt: the parser, axis grammar and sweep
# runner through `cli_tests`, and the real `actsim` binary through small sh scripts (each in its own
# folder, so ctest -j can run them together). In the scripts $1 is the actsim executable; they
# avoid ';' (CMake would split the argument there).
add_executable(cli_tests ${CMAKE_CURRENT_LIST_DIR}/test_cli.cpp)
target_link_libraries(cli_tests PRIVATE actsim_cli test_main actsim_options)
doctest_discover_tests(cli_tests)

function(actsim_cli_test name script)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/cli/${name})
  file(MAKE_DIRECTORY ${dir})
  add_test(NAME cli.${name} COMMAND sh -c "set -e\n${script}" sh $<TARGET_FILE:actsim>
           WORKING_DIRECTORY ${dir})
endfunction()

# run: exit 0, a table with the peak; one point per configuration.
actsim_cli_test(run_table [=[
"$1" run --model gpt2-small > out.txt
grep -q 'peak allocated' out.txt
grep -q 'The peak explained' out.txt
grep -q 'Not modeled' out.txt
"$1" run --strategy none,full,selective > three.txt
test "$(grep -c '^== ' three.txt)" -eq 3
]=])

# run --format csv: the v1 header and one row; json: an array.
actsim_cli_test(run_csv [=[
"$1" run --format csv --strategy none,full > out.csv
head -n 1 out.csv | grep -q '^schema_version,source,row_index,model,device,strategy,profile,'
test "$(wc -l < out.csv)" -eq 3
"$1" run --format json > out.json
head -c 1 out.json | grep -q '\['
grep -q '"peak_allocated_bytes"' out.json
]=])

# -o writes the file via FILE.partial and leaves nothing else.
actsim_cli_test(run_output_file [=[
rm -f r.txt r.txt.partial
"$1" run -o r.txt > stdout.txt
grep -q 'peak allocated' r.txt
test ! -s stdout.txt
test ! -e r.txt.partial
]=])

# An unknown strategy: exit 2, one line naming --strategy, nothing on stdout.
actsim_cli_test(unknown_strategy [=[
rc=0
"$1" run --strategy bogus > out.txt 2> err.txt || rc=$?
test "$rc" -eq 2
test "$(wc -l < err.txt)" -eq 1
grep -q '^actsim: error: --strategy' err.txt
test ! -s out.txt
]=])

# Bad flag values and unknown flags: exit 2, one line.
actsim_cli_test(bad_flags [=[
for args in "--seq 8:1" "--batch 0" "--zero 5" "--sp maybe" "--format xml" "--bogus" "--tp x"
do
  rc=0
  "$1" run $args > /dev/null 2> err.txt || rc=$?
  test "$rc" -eq 2
  test "$(wc -l < err.txt)" -eq 1
  grep -q '^actsim: error: ' err.txt
done
rc=0
"$1" > /dev/null 2> err.txt || rc=$?
test "$rc" -eq 2
]=])

# sweep: writes the file, rows in order, no .partial left behind.
actsim_cli_test(sweep_writes_file [=[
rm -f s.csv s.csv.partial
"$1" sweep --batch 1:4:x2 --seq 512,1k --strategy none,full -o s.csv
test -f s.csv
test ! -e s.csv.partial
test "$(wc -l < s.csv)" -eq 13
cut -d, -f3 s.csv | tail -n +2 | tr '\n' ' ' | grep -q '^0 1 2 3 4 5 6 7 8 9 10 11 $'
]=])

# A configuration that cannot be simulated is a row with its error, and the sweep exits 0.
actsim_cli_test(sweep_row_error [=[
rm -f e.csv
"$1" sweep --seq 512,2048 --strategy none -o e.csv
test "$(wc -l < e.csv)" -eq 3
# error is empty on a good row, set on a bad one; peak_requested/reserved_bytes come after it.
sed -n 2p e.csv | grep -q ',,[0-9][0-9]*,[0-9][0-9]*$'
sed -n 3p e.csv | grep -q ',--seq: [^,]*,,$'
]=])

# Determinism: two sweeps (parallel and serial) are byte-identical.
actsim_cli_test(sweep_deterministic [=[
"$1" sweep --batch 1:3 --seq 256,512 --strategy none,full,every:4,selective -o a.csv
"$1" sweep --batch 1:3 --seq 256,512 --strategy none,full,every:4,selective --jobs 1 -o b.csv
"$1" sweep --batch 1:3 --seq 256,512 --strategy none,full,every:4,selective --jobs 3 -o c.csv
cmp a.csv b.csv
cmp a.csv c.csv
]=])

# File-level errors: exit 2 and no output file (a missing model, an unwritable output).
actsim_cli_test(sweep_missing_model [=[
rm -f m.csv m.csv.partial
rc=0
"$1" sweep --model no-such-model -o m.csv 2> err.txt || rc=$?
test "$rc" -eq 2
test "$(wc -l < err.txt)" -eq 1
test ! -e m.csv
test ! -e m.csv.partial
rc=0
"$1" sweep --model ./missing/config.json -o m.csv 2> err.txt || rc=$?
test "$rc" -eq 2
test ! -e m.csv
rc=0
"$1" sweep -o no-such-folder/x.csv 2> err.txt || rc=$?
test "$rc" -eq 2
grep -q -- '--output' err.txt
]=])

# trace: one configuration as a Chrome/Perfetto trace that parses as JSON; lists are refused.
actsim_cli_test(trace [=[
rm -f step.json step.json.partial
"$1" trace --model gpt2-small --strategy full --allocator caching -o step.json
test ! -e step.json.partial
python3 -c "import json,sys; d=json.load(open('step.json')); e=d['traceEvents']; \
assert any(x['ph']=='X' for x in e) and any(x['ph']=='C' for x in e)"
rc=0
"$1" trace --strategy none,full -o bad.json 2> err.txt || rc=$?
test "$rc" -eq 2
grep -q -- '--strategy' err.txt
test ! -e bad.json
]=])

# valley and models run and print what they promise.
actsim_cli_test(valley [=[
"$1" valley --model gpt2-small > v.txt
grep -q 'sqrt(n)' v.txt
grep -q 'm\*' v.txt
"$1" valley --format csv > v.csv
head -n 1 v.csv | grep -q '^model,device,n,m,'
test "$(wc -l < v.csv)" -eq 13
rc=0
"$1" valley --batch 1,2 2> err.txt || rc=$?
test "$rc" -eq 2
grep -q -- '--batch' err.txt
]=])

actsim_cli_test(models [=[
"$1" models > m.txt
grep -q 'gpt2-small' m.txt
grep -q 'h100-sxm' m.txt
]=])

# plan --budget: a custom: spec that fits, the model line, the fixed comparison; the spec re-runs
# to the same peak. A budget below every plan: exit 2, one line naming the smallest feasible peak
# (above the budget), nothing on stdout and no output file.
actsim_cli_test(plan_budget [=[
"$1" plan --model gpt2-small --batch 8 --budget 10GiB > plan.txt
grep -q '^  custom:' plan.txt
grep -q 'memory in 1 MiB slots' plan.txt
grep -q 'Best fixed strategy that fits' plan.txt
spec=$(grep '^  custom:' plan.txt | tr -d ' ')
"$1" plan --model gpt2-small --batch 8 --budget 10GiB --format csv > plan.csv
"$1" run --model gpt2-small --batch 8 --strategy "$spec" --format csv > rerun.csv
test "$(tail -n 1 plan.csv | cut -d, -f6)" = "$spec"
test "$(tail -n 1 plan.csv | cut -d, -f22)" = "$(tail -n 1 rerun.csv | cut -d, -f22)"
test "$(tail -n 1 plan.csv | cut -d, -f22)" -le 10737418240
rm -f none.txt none.txt.partial
rc=0
"$1" plan --model gpt2-small --batch 8 --budget 1GiB -o none.txt > out.txt 2> err.txt || rc=$?
test "$rc" -eq 2
test "$(wc -l < err.txt)" -eq 1
grep -q '^actsim: error: --budget: 1GiB: no plan fits .* the smallest feasible peak is ' err.txt
test ! -s out.txt
test ! -e none.txt
test ! -e none.txt.partial
rc=0
"$1" plan --model gpt2-small --budget 12XB > /dev/null 2> err.txt || rc=$?
test "$rc" -eq 2
grep -q '^actsim: error: --budget: 12XB: ' err.txt
]=])

# budget: in a sweep: the strategy column holds the plan's custom: spec; an unmet budget is a row
# with its error.
actsim_cli_test(sweep_budget [=[
"$1" sweep --model gpt2-small --batch 8 --strategy budget:10GiB,budget:1GiB -j 1 -o b.csv
sed -n 2p b.csv | cut -d, -f6 | grep -q '^custom:'
sed -n 3p b.csv | grep -q 'smallest feasible peak'
]=])
