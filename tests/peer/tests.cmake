# Checks against the peer engine (llama.cpp, built by scripts/peer.sh). They run only when asked for:
#   cmake --preset release -DSKAINET_PEER_BIN="$(scripts/peer.sh)" && ctest --preset release -L peer
# Without SKAINET_PEER_BIN (the default) nothing here is registered, so the default suite never needs the
# peer build.
set(SKAINET_PEER_BIN "" CACHE PATH "bin dir of the peer llama.cpp build (printed by scripts/peer.sh); enables the 'peer' tests")

if(SKAINET_PEER_BIN)
  if(NOT IS_DIRECTORY "${SKAINET_PEER_BIN}")
    message(WARNING "SKAINET_PEER_BIN=${SKAINET_PEER_BIN} is not a directory; peer tests not registered")
  elseif(NOT TARGET skainet)
    message(WARNING "no skainet target; peer tests not registered")
  else()
    add_test(NAME peer_quantized_loads
      COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_quantized_loads.sh
        $<TARGET_FILE:skainet> ${SKAINET_PEER_BIN} ${SKAINET_SHARED_MODELS}
        ${CMAKE_BINARY_DIR}/peer-check)
    set_tests_properties(peer_quantized_loads PROPERTIES LABELS peer TIMEOUT 300)
    # Every tokenizer.ggml.pre name: ids equal to llama-tokenize's on a vocabulary that differs from
    # ggml-vocab-llama-bpe.gguf only in that key (written under the build dir at test time).
    add_test(NAME peer_pre_tokenizers
      COMMAND ${SKAINET_VENV_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_pre_tokenizers.py
        $<TARGET_FILE:skainet> ${SKAINET_PEER_BIN} ${SKAINET_SHARED_MODELS}/vocab ${CMAKE_BINARY_DIR}/peer-pre-tokenizers)
    set_tests_properties(peer_pre_tokenizers PROPERTIES LABELS peer TIMEOUT 900)
    # Gemma 4's tokenizer on llama.cpp's own vocabulary (SKAINET_PEER_VOCAB_DIR, tests/text/tests.cmake).
    add_test(NAME peer_gemma4_tokenizer
      COMMAND ${SKAINET_VENV_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_gemma4_tokenizer.py
        $<TARGET_FILE:skainet> ${SKAINET_PEER_BIN} ${SKAINET_PEER_VOCAB_DIR}/ggml-vocab-gemma-4.gguf
        ${CMAKE_BINARY_DIR}/peer-gemma4)
    set_tests_properties(peer_gemma4_tokenizer PROPERTIES LABELS peer TIMEOUT 600)
    include(${CMAKE_CURRENT_LIST_DIR}/logits.cmake)
  endif()
endif()
