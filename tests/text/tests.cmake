# The text fuzz targets are also replayed in the default suite (fuzz_replay_test.cpp) on seeded
# mutations, whatever the compiler: the same functions libFuzzer drives under `make fuzz`.
if(TARGET test_text)
  target_sources(test_text PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../fuzz/tokenizer_fuzzer.cpp
                                   ${CMAKE_CURRENT_LIST_DIR}/../fuzz/pre_tokenizer_fuzzer.cpp
                                   ${CMAKE_CURRENT_LIST_DIR}/../fuzz/vocab_fuzzer.cpp)
  target_include_directories(test_text PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../fuzz)
endif()

# Gemma 4's test vocabulary (SKAINET_PEER_VOCAB_DIR, tests/CMakeLists.txt).
if(TARGET test_text)
  target_compile_definitions(test_text PRIVATE SKAINET_PEER_VOCAB_DIR="${SKAINET_PEER_VOCAB_DIR}")
endif()
