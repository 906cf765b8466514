# readme: every figure of the README that carries a `<!-- check: ... -->` comment is what this
# build of actsim prints (scripts/readme_figures.py; about 6 s, most of it evaluate.py). When a
# change moves a figure, this test names the README line, the figure written and the one
# printed: re-run the command and correct the README.
add_test(NAME readme.figures
         COMMAND python3 scripts/readme_figures.py --actsim $<TARGET_FILE:actsim>
                 --harness $<TARGET_FILE:actsim-harness> --readme README.md
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(readme.figures PROPERTIES LABELS readme TIMEOUT 120)

# The checker itself: a README whose figures are right passes, and one with six wrong figures
# (a value, a row, a line, a code block, a failing command, a figure not written) fails with
# each one named.
add_test(NAME readme.figures_checker
         COMMAND sh -c [=[
set -u
python3 scripts/readme_figures.py --actsim "$1" --readme tests/readme_figures/right.md
rc=0
python3 scripts/readme_figures.py --actsim "$1" --readme tests/readme_figures/wrong.md > "$2" || rc=$?
test "$rc" -eq 1
grep -q 'wrong.md:4: params .*README 124,439,809, actsim prints 124,439,808' "$2"
grep -q "wrong.md:5: row {'strategy': 'sqrt'} matches 0 of 2 rows" "$2"
grep -q 'wrong.md:10: .* no longer prints: == gpt2-small on h100-sxm, strategy fulll ==' "$2"
grep -q 'wrong.md:14: the code block is not what actsim models prints' "$2"
grep -q 'wrong.md:20: .* exit 2: actsim: error: no-such-model' "$2"
grep -q 'wrong.md:25: 12 is checked but not written' "$2"
grep -q ' 6 differences$' "$2"
]=] sh $<TARGET_FILE:actsim> ${CMAKE_CURRENT_BINARY_DIR}/readme-figures-wrong.txt
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(readme.figures_checker PROPERTIES LABELS readme TIMEOUT 120)
