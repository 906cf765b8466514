# Golden CSV for a tiny model (tests/golden/): the whole CSV of a sweep over every strategy,
# precision and attention kind must equal the committed file byte for byte. A change to the
# model that moves a figure shows up here; regenerate with tests/golden/regen.sh and say why.
add_test(NAME golden.tiny_csv
  COMMAND ${CMAKE_COMMAND}
          -DACTSIM=$<TARGET_FILE:actsim>
          -DGOLDEN_DIR=${CMAKE_CURRENT_SOURCE_DIR}/golden
          -DOUT=${CMAKE_CURRENT_BINARY_DIR}/golden_tiny.csv
          -P ${CMAKE_CURRENT_SOURCE_DIR}/golden/check.cmake)
