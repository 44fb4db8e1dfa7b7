# Conformity with implementations nobody here wrote. quant_exchange moves tensors through GGUF
# files; quant_crosscheck.py compares what it reads and writes with gguf-py's quants module.
add_executable(quant_exchange ${CMAKE_CURRENT_LIST_DIR}/quant_exchange.cpp)
target_link_libraries(quant_exchange PRIVATE skainet_gguf skainet_kernels fmt::fmt)

add_test(NAME conformity.quant_crosscheck
         COMMAND ${SKAINET_VENV_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/quant_crosscheck.py
                 $<TARGET_FILE:quant_exchange> ${CMAKE_CURRENT_BINARY_DIR}/quant_xcheck)
set_tests_properties(conformity.quant_crosscheck PROPERTIES LABELS conformity TIMEOUT 300)
