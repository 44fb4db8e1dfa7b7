# Fault injection (docs/reliability.md, "Fault injection"): not skainet_test_dir, because the directory
# holds two test binaries and a library that must not be linked like the others.
#
# skainet_iofault: the I/O fault injector, a shared library in C, so the sanitizer presets (which set
# only C++ flags) leave it uninstrumented: it is LD_PRELOADed into the unchanged `skainet` binary,
# whose own sanitizer runtime it must not bring a second copy of.
add_library(skainet_iofault SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fault/io_fault.c)
target_link_libraries(skainet_iofault PRIVATE ${CMAKE_DL_LIBS})

function(skainet_fault_test name)
  cmake_parse_arguments(T "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${CMAKE_CURRENT_SOURCE_DIR}
                                             ${CMAKE_CURRENT_SOURCE_DIR}/support ${CMAKE_CURRENT_SOURCE_DIR}/fault)
  target_link_libraries(${name} PRIVATE ${T_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    SKAINET_SHARED_MODELS="${SKAINET_SHARED_MODELS}"
    SKAINET_BINARY_DIR="${PROJECT_BINARY_DIR}"
    SKAINET_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    SKAINET_IOFAULT_LIBRARY="$<TARGET_FILE:skainet_iofault>")
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS fault)
endfunction()

# I/O faults: AtomicFile in process (the injector linked in), and synth/quantize/export as the
# `skainet` binary with the injector preloaded.
skainet_fault_test(test_fault_io
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fault/atomic_file_fault_test.cpp ${CMAKE_CURRENT_SOURCE_DIR}/fault/io_fault_cli_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/cli/cli_support.cpp
  DEPS skainet_base skainet_gguf skainet_kernels skainet_iofault)
add_dependencies(test_fault_io skainet skainet_iofault)

# Allocation faults: operator new replaced in this binary only.
skainet_fault_test(test_fault_alloc
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fault/alloc_fault_test.cpp ${CMAKE_CURRENT_SOURCE_DIR}/fault/alloc_fault.cpp
  DEPS skainet_generate skainet_convert)
