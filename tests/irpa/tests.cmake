# The .irpa fuzz target is also replayed in the default suite (fuzz_replay_test.cpp) on seeded
# mutations, whatever the compiler: the same function libFuzzer drives under `make fuzz`.
if(TARGET test_irpa)
  target_sources(test_irpa PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../fuzz/irpa_reader_fuzzer.cpp)
  target_include_directories(test_irpa PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../fuzz)
endif()
