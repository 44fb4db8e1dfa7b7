# The plan fuzz targets are also replayed in the default suite (fuzz_replay_test.cpp) on seeded
# mutations, whatever the compiler: the same functions libFuzzer drives under `make fuzz`.
if(TARGET test_plan)
  target_sources(test_plan PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../fuzz/plan_fuzzer.cpp
                                   ${CMAKE_CURRENT_LIST_DIR}/../fuzz/plan_json_fuzzer.cpp)
  target_include_directories(test_plan PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../fuzz)
endif()
