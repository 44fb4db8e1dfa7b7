# The plan fuzz targets are also replayed in the default suite (fuzz_replay_test.cpp) on seeded
# mutations, whatever the compiler: the same functions libFuzzer drives under `make fuzz`.
if(TARGET test_plan)
  target_sources(test_plan PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../fuzz/plan_fuzzer.cpp
                                   ${CMAKE_CURRENT_LIST_DIR}/../fuzz/plan_json_fuzzer.cpp)
  target_include_directories(test_plan PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../fuzz)
endif()

# `plan --svg` opened in headless Chromium (Debian's `chromium`, installed by scripts/setup.sh): the
# screenshot must show the drawing. A missing Chromium fails the test, never skips it.
add_test(NAME plan.svg_in_chromium
         COMMAND ${SKAINET_VENV_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/svg_in_chromium.py $<TARGET_FILE:skainet>
                 ${SKAINET_SHARED_MODELS}/stories260K.gguf ${CMAKE_CURRENT_BINARY_DIR}/plan_svg)
set_tests_properties(plan.svg_in_chromium PROPERTIES LABELS plan TIMEOUT 180)
