# GUI tests (DESIGN.md §8, STYLE.md rule 11), include()d by tests/CMakeLists.txt: `gui_tests`
# (the pure plot maths, the GUI's model layer against the simulator, and a windowless smoke test
# of every panel: no GL), and the real actsim-gui under Xvfb writing a screenshot per view, which
# `gui_png_check` decodes (stb_image) and checks for size and content.
if(NOT TARGET gui_panels)
  return()
endif()

add_executable(gui_tests ${CMAKE_CURRENT_LIST_DIR}/test_gui_plot.cpp ${CMAKE_CURRENT_LIST_DIR}/test_gui.cpp
                         ${CMAKE_CURRENT_LIST_DIR}/test_gui_pp.cpp)  # gui_pp: pipelines
target_link_libraries(gui_tests PRIVATE gui_panels test_main actsim_options)
target_compile_definitions(gui_tests PRIVATE ACTSIM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
doctest_discover_tests(gui_tests)

add_executable(gui_png_check ${CMAKE_CURRENT_LIST_DIR}/test_gui_png_check.cpp)
target_link_libraries(gui_png_check PRIVATE PkgConfig::STB actsim_options)

find_program(XVFB_RUN xvfb-run)
if(XVFB_RUN)
  foreach(view valley memory timeline fitmap compare)
    set(dir ${CMAKE_CURRENT_BINARY_DIR}/gui/${view})
    file(MAKE_DIRECTORY ${dir})
    add_test(NAME gui.screenshot.${view}
             COMMAND sh -c "set -e\nrm -f shot.png\n${XVFB_RUN} -a -s '-screen 0 1600x1000x24' \"$1\" --screenshot shot.png --view ${view} --model llama-2-7b --tp 8 --strategy none,full,selective\n\"$2\" shot.png 1200 800"
                     sh $<TARGET_FILE:actsim-gui> $<TARGET_FILE:gui_png_check>
             WORKING_DIRECTORY ${dir})
  endforeach()
  # gui_pp: a pipeline (pp 2, 4 micro-batches; budget: planned per stage): stage 0's curves over
  # its in-flight stash band, the op timeline, and the per-stage tables of the comparison.
  foreach(view memory timeline compare)
    set(dir ${CMAKE_CURRENT_BINARY_DIR}/gui/pipeline_${view})
    # stage 0: the one with micro-batches in flight (a stash band under the curves)
    set(stage "")
    if(view STREQUAL "memory")
      set(stage "--stage 0 --fit-curves")
    endif()
    file(MAKE_DIRECTORY ${dir})
    add_test(NAME gui.screenshot.pipeline_${view}
             COMMAND sh -c "set -e\nrm -f shot.png\n${XVFB_RUN} -a -s '-screen 0 1600x1000x24' \"$1\" --screenshot shot.png --view ${view} --model gpt2-small --pp 2 --num-microbatches 4 --strategy none,full,selective,budget:1800MiB ${stage}\n\"$2\" shot.png 1200 800"
                     sh $<TARGET_FILE:actsim-gui> $<TARGET_FILE:gui_png_check>
             WORKING_DIRECTORY ${dir})
  endforeach()
  # A real step's snapshot overlaid (issue 14): the CPU executor's step of the tiny GPT written in
  # PyTorch's snapshot format, pickled as torch.cuda.memory._dump_snapshot would, then opened by
  # actsim-gui through the converter beside it; memory and comparison views.
  if(TARGET actsim-snapshot-gen)
    foreach(view memory compare)
      set(dir ${CMAKE_CURRENT_BINARY_DIR}/gui/snapshot_${view})
      file(MAKE_DIRECTORY ${dir})
      add_test(NAME gui.screenshot.snapshot_${view}
               COMMAND sh -c "set -e\nrm -f shot.png s.json s.pickle\nflags='--model ${CMAKE_CURRENT_LIST_DIR}/golden/tiny-gpt.json --seq 64'\n\"$3\" $flags --strategy every:2 -o s.json\nPYTHONPATH=${PROJECT_SOURCE_DIR}/python/tests python3 -c 'import pathlib, snapshot_fixtures as f; f.json_to_pickle(pathlib.Path(\"s.json\"), pathlib.Path(\"s.pickle\"))'\n${XVFB_RUN} -a -s '-screen 0 1600x1000x24' \"$1\" --screenshot shot.png --view ${view} $flags --strategy every:2,none --snapshot s.pickle --fit-curves\n\"$2\" shot.png 1200 800"
                       sh $<TARGET_FILE:actsim-gui> $<TARGET_FILE:gui_png_check> $<TARGET_FILE:actsim-snapshot-gen>
               WORKING_DIRECTORY ${dir})
    endforeach()
  endif()
endif()

# Without a display: one clear line and a non-zero exit (no Xvfb needed).
set(dir ${CMAKE_CURRENT_BINARY_DIR}/gui/no_display)
file(MAKE_DIRECTORY ${dir})
add_test(NAME gui.no_display
         COMMAND sh -c "rc=0\nenv -u DISPLAY -u WAYLAND_DISPLAY \"$1\" --screenshot x.png 2> err.txt || rc=$?\ntest \"$rc\" -ne 0\ntest \"$(wc -l < err.txt)\" -eq 1\ngrep -q '^actsim-gui: error: ' err.txt\ntest ! -e x.png"
                 sh $<TARGET_FILE:actsim-gui>
         WORKING_DIRECTORY ${dir})

# Bad flags: exit 2 with one line, before any window is opened.
set(dir ${CMAKE_CURRENT_BINARY_DIR}/gui/bad_flags)
file(MAKE_DIRECTORY ${dir})
add_test(NAME gui.bad_flags
         COMMAND sh -c "for args in '--view nope' '--strategy bogus' '--model no-such-model' '--width 5' '--fit-x pp' '--fit-x tp --fit-y tp' '--snapshot no-such-snapshot.pickle' '--stage 1' '--pp 2 --stage 2'\ndo\nrc=0\nenv -u DISPLAY \"$1\" $args 2> err.txt || rc=$?\ntest \"$rc\" -eq 2\ntest \"$(wc -l < err.txt)\" -eq 1\ndone"
                 sh $<TARGET_FILE:actsim-gui>
         WORKING_DIRECTORY ${dir})
