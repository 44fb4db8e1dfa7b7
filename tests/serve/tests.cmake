# `skainet serve` end to end with the real `openai` Python client (pip, installed into the test venv by
# scripts/setup.sh): a missing client makes the test fail, never skip. check_serve.py starts the built
# server on stories260K with --port 0 (it reads the port from stderr) and always kills it.
if(TARGET skainet)
  add_test(NAME serve.openai_client
           COMMAND ${SKAINET_VENV_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_serve.py
                   $<TARGET_FILE:skainet> ${SKAINET_SHARED_MODELS}/stories260K.gguf)
  set_tests_properties(serve.openai_client PROPERTIES LABELS serve TIMEOUT 600 ENVIRONMENT PYTHONDONTWRITEBYTECODE=1)
  # Two replicas behind HAProxy (docs/deploy.md), one killed under load: every later request answered.
  add_test(NAME serve.load_balancer_failover
           COMMAND ${SKAINET_VENV_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_failover.py
                   $<TARGET_FILE:skainet> ${SKAINET_SHARED_MODELS}/stories260K.gguf)
  set_tests_properties(serve.load_balancer_failover PROPERTIES LABELS serve TIMEOUT 300)
endif()

# The request-parsing fuzz target is also replayed in the default suite (fuzz_replay_test.cpp).
if(TARGET test_serve)
  target_sources(test_serve PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../fuzz/serve_request_fuzzer.cpp)
  target_include_directories(test_serve PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../fuzz)
endif()

# fields_test.cpp checks that docs/serving.md shows the request-field table as fields.cpp has it.
if(TARGET test_serve)
  target_compile_definitions(test_serve PRIVATE SKAINET_DOCS_DIR="${PROJECT_SOURCE_DIR}/docs")
endif()

# Log-probabilities against the peer's llama-server on the same files (check_logprobs_peer.py): only
# with SKAINET_PEER_BIN, as tests/peer/tests.cmake's checks.
if(SKAINET_PEER_BIN AND TARGET skainet)
  add_test(NAME serve.logprobs_peer
           COMMAND ${SKAINET_VENV_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_logprobs_peer.py
                   $<TARGET_FILE:skainet> ${SKAINET_PEER_BIN} ${SKAINET_SHARED_MODELS}
                   ${CMAKE_BINARY_DIR}/peer-logprobs)
  set_tests_properties(serve.logprobs_peer PROPERTIES LABELS peer TIMEOUT 300 ENVIRONMENT PYTHONDONTWRITEBYTECODE=1)
endif()
