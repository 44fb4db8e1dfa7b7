# The dequantization fuzz target is also replayed in the default suite (fuzz_replay_test.cpp) on
# seeded mutations, whatever the compiler: the same function libFuzzer drives under `make fuzz`.
if(TARGET test_kernels)
  target_sources(test_kernels PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../fuzz/dequantize_fuzzer.cpp)
  target_include_directories(test_kernels PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../fuzz)
endif()
