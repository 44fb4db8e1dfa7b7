# RE2 (linear-time, bounded-stack regex) for placement's --override-tensor patterns. Debian ships no
# CMake package for it, so pkg-config finds it; only skainet_placement links it.
find_package(PkgConfig REQUIRED)
pkg_check_modules(RE2 REQUIRED IMPORTED_TARGET re2)
# GNU libmicrohttpd (Debian's libmicrohttpd-dev): the HTTP transport under `skainet serve`, chosen
# over cpp-httplib for its event loop (docs/dependencies.md); only skainet_serve links it.
pkg_check_modules(MHD REQUIRED IMPORTED_TARGET libmicrohttpd)
# libedit (Debian's libedit-dev, BSD licence): the line editor of `skainet chat` at a terminal, through
# its readline-compatible API (docs/cli.md, chat); only the skainet command links it.
pkg_check_modules(EDIT REQUIRED IMPORTED_TARGET libedit)

# skainet_layer_of(MODULE LAYER): MODULE's layer, one of SKAINET_LAYERS (the top CMakeLists.txt).
function(skainet_layer_of name layer)
  list(FIND SKAINET_LAYERS "${layer}" rank)
  if(rank LESS 0)
    message(FATAL_ERROR "module ${name}: layer '${layer}' is not one of: ${SKAINET_LAYERS}")
  endif()
  set_property(GLOBAL PROPERTY SKAINET_RANK_${name} ${rank})
  set_property(GLOBAL APPEND PROPERTY SKAINET_MODULE_LAYERS "${name}=${layer}")
endfunction()

# One static library per module in src/<name>/, sources found by glob so that adding a file needs no
# edit here. Dependencies are declared once, in the top-level list, and only point downward: a module
# links only modules declared before it, in its own layer or lower.
function(skainet_module name)
  cmake_parse_arguments(M "RECURSE" "LAYER" "DEPS" ${ARGN})
  skainet_layer_of(${name} "${M_LAYER}")
  get_property(rank GLOBAL PROPERTY SKAINET_RANK_${name})
  foreach(dep ${M_DEPS})
    if(dep MATCHES "^skainet_(.+)$")
      get_property(dep_rank GLOBAL PROPERTY SKAINET_RANK_${CMAKE_MATCH_1})
      if("${dep_rank}" STREQUAL "" OR dep_rank GREATER rank)
        message(FATAL_ERROR "module ${name} (${M_LAYER}) links ${dep}, which is not declared before it in a layer at or below")
      endif()
    endif()
  endforeach()
  if(M_RECURSE)
    file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cpp)
  else()
    file(GLOB sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cpp)
  endif()
  if(NOT sources)  # a module with headers only so far
    add_library(skainet_${name} INTERFACE)
    target_include_directories(skainet_${name} INTERFACE ${PROJECT_SOURCE_DIR}/include)
    target_link_libraries(skainet_${name} INTERFACE ${M_DEPS})
    return()
  endif()
  add_library(skainet_${name} STATIC ${sources})
  target_include_directories(skainet_${name} PUBLIC ${PROJECT_SOURCE_DIR}/include
                                             PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(skainet_${name} PUBLIC ${M_DEPS})
endfunction()

# One GoogleTest binary per folder of tests/, named test_<folder>. COUNT_ALLOCATIONS links the
# process-wide allocation counter (tests/support/alloc_counter.cpp, which interposes malloc); PROPERTIES
# are test properties given to every test of the binary (a fixture they require, say).
function(skainet_test_dir name)
  cmake_parse_arguments(T "COUNT_ALLOCATIONS" "" "DEPS;PROPERTIES" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${name}/*.cpp)
  if(NOT sources)
    return()
  endif()
  if(T_COUNT_ALLOCATIONS)
    list(APPEND sources ${CMAKE_CURRENT_SOURCE_DIR}/support/alloc_counter.cpp)
  endif()
  add_executable(test_${name} ${sources})
  target_include_directories(test_${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${CMAKE_CURRENT_SOURCE_DIR}
                                                  ${CMAKE_CURRENT_SOURCE_DIR}/support)
  target_link_libraries(test_${name} PRIVATE ${T_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  # The IREE tools (the recorded path's peer) sit beside the test environment's Python.
  get_filename_component(iree_bin "${SKAINET_VENV_PYTHON}" DIRECTORY)
  target_compile_definitions(test_${name} PRIVATE
    SKAINET_IREE_BIN="${iree_bin}"
    SKAINET_SHARED_MODELS="${SKAINET_SHARED_MODELS}"
    SKAINET_TEST_DATA="${CMAKE_CURRENT_SOURCE_DIR}/${name}/data"
    SKAINET_BINARY_DIR="${PROJECT_BINARY_DIR}"
    SKAINET_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  gtest_discover_tests(test_${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS ${name} ${T_PROPERTIES})
endfunction()
