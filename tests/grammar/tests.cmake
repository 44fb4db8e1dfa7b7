# Values generated under every schema of data/schemas.json on every real vocabulary, checked by
# Python's jsonschema (the reference validator, installed by scripts/setup.sh).
add_executable(grammar_random_values ${CMAKE_CURRENT_LIST_DIR}/tools/random_values.cpp)
target_link_libraries(grammar_random_values PRIVATE skainet_grammar nlohmann_json::nlohmann_json)
file(GLOB grammar_vocabularies ${SKAINET_SHARED_MODELS}/vocab/*.gguf)
add_test(NAME grammar.schemas_on_every_vocabulary
         COMMAND ${SKAINET_VENV_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_random_values.py
                 $<TARGET_FILE:grammar_random_values> ${CMAKE_CURRENT_LIST_DIR}/data/schemas.json
                 ${SKAINET_SHARED_MODELS}/stories260K.gguf ${grammar_vocabularies})
set_tests_properties(grammar.schemas_on_every_vocabulary PROPERTIES LABELS grammar TIMEOUT 600)

# The grammar fuzz target is also replayed in the default suite (fuzz_replay_test.cpp).
if(TARGET test_grammar)
  target_sources(test_grammar PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../fuzz/grammar_fuzzer.cpp)
  target_include_directories(test_grammar PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../fuzz)
  target_link_libraries(test_grammar PRIVATE nlohmann_json::nlohmann_json)
endif()
