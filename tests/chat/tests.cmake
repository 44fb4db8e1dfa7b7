# The chat-template renderer against Python's Jinja2 (the reference renderer), configured as
# HuggingFace's apply_chat_template configures it. render_reference.py fails, never skips, when
# Jinja2 is missing from the venv.
add_executable(chat_render_cases ${CMAKE_CURRENT_LIST_DIR}/tool/render_cases.cpp)
target_link_libraries(chat_render_cases PRIVATE skainet_chat)
if(TARGET test_chat)
  add_dependencies(test_chat chat_render_cases)
endif()

add_test(NAME chat.jinja2_reference
         COMMAND ${SKAINET_VENV_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/render_reference.py
                 --tool $<TARGET_FILE:chat_render_cases>
                 --templates ${SKAINET_SHARED_MODELS}/templates
                 --workdir ${CMAKE_CURRENT_BINARY_DIR}/chat_reference)
set_tests_properties(chat.jinja2_reference PROPERTIES LABELS chat TIMEOUT 300)

add_test(NAME chat.jinja2_random
         COMMAND ${SKAINET_VENV_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/random_differential.py
                 --tool $<TARGET_FILE:chat_render_cases>
                 --workdir ${CMAKE_CURRENT_BINARY_DIR}/chat_random)
set_tests_properties(chat.jinja2_random PROPERTIES LABELS chat TIMEOUT 300)

# The renderer's fuzz target is also replayed in the default suite (fuzz_replay_test.cpp), whatever
# the compiler: the same function libFuzzer drives under `make fuzz`.
if(TARGET test_chat)
  target_sources(test_chat PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../fuzz/chat_template_fuzzer.cpp)
  target_include_directories(test_chat PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../fuzz)
endif()
