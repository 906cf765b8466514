# Saved-tensor census (DESIGN.md §6, validation step 2), include()d by tests/CMakeLists.txt after
# include(doctest) and the test_main target. `census_tests` checks the simulator's declared saves
# against harness/census/census.json; `census.regenerate` proves that the committed census is what
# this machine's torch records (skipped where ACTSIM_CENSUS_PYTHON cannot import torch).
get_filename_component(ACTSIM_CENSUS_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)

add_executable(census_tests ${CMAKE_CURRENT_LIST_DIR}/test_census.cpp)
target_link_libraries(census_tests PRIVATE sim::sim nlohmann_json::nlohmann_json test_main
                      actsim_options)
target_compile_definitions(census_tests PRIVATE ACTSIM_SOURCE_DIR="${ACTSIM_CENSUS_ROOT}")
doctest_discover_tests(census_tests)

# Debian's python3-torch (PyTorch 1.13.1) is installed for /usr/bin/python3 only; a python3
# earlier on the PATH may lack it (TOOLCHAIN.md).
set(ACTSIM_CENSUS_PYTHON /usr/bin/python3 CACHE FILEPATH "Python with torch for harness/census.py")
# A census script re-run into the build tree and diffed against the committed file: $1 python,
# $2 source root, $3 script (relative), $4 committed file (relative), $5 output. Exit 77
# (SKIP_RETURN_CODE) when torch cannot be imported.
function(actsim_census_regenerate name script committed timeout)
  get_filename_component(out "${committed}" NAME)
  add_test(NAME ${name}
           COMMAND sh -c [=[
set -e
if ! "$1" -c "import torch" > /dev/null 2>&1
then
  echo "census: $1 cannot import torch (python3-torch not installed): skipped"
  exit 77
fi
"$1" "$2/$3" -o "$5"
diff -u "$2/$4" "$5"
]=] sh ${ACTSIM_CENSUS_PYTHON} ${ACTSIM_CENSUS_ROOT} ${script} ${committed}
           ${CMAKE_CURRENT_BINARY_DIR}/${out})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT ${timeout})
endfunction()

actsim_census_regenerate(census.regenerate harness/census.py harness/census/census.json 300)
# cpfp8 (issue 13): torch's context-parallel ring, its eager code on torch 1.13
# (harness/census_cp.py); tests/test_cpfp8.cpp holds sim/src/cp.cpp to harness/census/cp.json.
actsim_census_regenerate(census.cp_regenerate harness/census_cp.py harness/census/cp.json 120)
# inductor (issue 10): torch 1.13's min-cut partition of a Llama and a GPT-2 block
# (harness/inductor_partition.py); tests/test_inductor.cpp holds sim/src/inductor.cpp to it.
actsim_census_regenerate(census.inductor_regenerate harness/inductor_partition.py
                         harness/inductor/partition.json 120)
# time8 (issue 11): min_cut_rematerialization_partition's fx_graph_cse merges three identical
# Float8-style casts of one input into one (sim/src/fp8.cpp charges a compiled cast once).
add_test(NAME census.fp8_cast_cse
         COMMAND sh -c [=[
if ! "$1" -c "import torch" > /dev/null 2>&1
then
  echo "census: $1 cannot import torch (python3-torch not installed): skipped"
  exit 77
fi
exec "$1" "$2/harness/fp8_cast_cse.py"
]=] sh ${ACTSIM_CENSUS_PYTHON} ${ACTSIM_CENSUS_ROOT})
set_tests_properties(census.fp8_cast_cse PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
