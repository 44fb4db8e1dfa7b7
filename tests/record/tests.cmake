# The recorded path end to end, against IREE (docs/export.md): the built `skainet` exports, the IREE
# tools and Python runtime of the test virtual environment (scripts/setup.sh; they sit beside
# SKAINET_VENV_PYTHON) compile and run. A missing IREE makes these tests fail, never skip.
#   record.modules         the fixture that builds the modules below's tests run (modules.cmake)
#   record.generation      IREE's greedy 64 tokens == `skainet run --temp 0` (stories260K F32, Q8_0;
#                          both kernel forms)
#   record.stablehlo_packed the portable form keeps packed weights packed under IREE (llvm-cpu): no
#                          dispatch at load, every one-row product fused with its dequantization
#   record.archive         model.irpa entries == the GGUF's == iree-convert-parameters' (F32, Q8_0)
#   record.targets.cuda    the module compiles for CUDA sm_80 (F32, Q4_0; no GPU needed)
#   record.targets.vulkan  the module compiles for Vulkan (ampere; F32, Q4_0)
#   record.export_1b       1.1B-shaped Q4_0 synth: archive within 2% of the GGUF, export peak RSS
#                          under 25% of it; the module hoists nothing, IREE's decode/prefill peak RSS
#                          within the bounds of issue 23 and report.txt's figure (~600 MiB, deleted)
#   record.plugin          libskainet_iree_plugin.so under IREE: plugin_dispatch.mlir's imports
#                          (matmul, attention, gather, repack) against numpy, refusals, iree-run-module
if(NOT TARGET skainet)
  return()
endif()

set(skainet_record_stories "${SKAINET_SHARED_MODELS}/stories260K.gguf")
set(skainet_record_work "${CMAKE_BINARY_DIR}/record-check")
include(${CMAKE_CURRENT_LIST_DIR}/modules.cmake)

function(skainet_record_test name timeout)
  add_test(NAME record.${name}
           COMMAND ${SKAINET_VENV_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/${ARGN})
  # Each test has its own work folder, so they may run in parallel (ctest -j).
  set_tests_properties(record.${name} PROPERTIES LABELS "record;iree" TIMEOUT ${timeout}
                       ENVIRONMENT PYTHONDONTWRITEBYTECODE=1)
endfunction()

skainet_record_test(stablehlo_packed 600 check_stablehlo_packed.py ${skainet_modules} ${stablehlo_packed_formats})
skainet_record_test(generation 900 check_generation.py
  $<TARGET_FILE:skainet> ${skainet_record_stories} ${skainet_modules} ${generation_ctx})
set_tests_properties(record.generation record.stablehlo_packed PROPERTIES FIXTURES_REQUIRED record_modules)
skainet_record_test(archive 300 check_archive.py
  $<TARGET_FILE:skainet> ${skainet_record_stories} ${skainet_record_work}/archive)
skainet_record_test(targets.cuda 600 check_targets.py
  $<TARGET_FILE:skainet> ${skainet_record_stories} ${skainet_record_work}/cuda cuda)
skainet_record_test(targets.vulkan 600 check_targets.py
  $<TARGET_FILE:skainet> ${skainet_record_stories} ${skainet_record_work}/vulkan vulkan)
skainet_record_test(export_1b 900 check_export_1b.py
  $<TARGET_FILE:skainet> ${skainet_record_work}/export_1b)
skainet_record_test(plugin 300 check_plugin.py
  $<TARGET_FILE:skainet_iree_plugin> ${skainet_record_work}/plugin)

# The 1.1B export and the GPU targets' compiles (~65 s of the suite's CPU, nothing the CPU path runs)
# are left out of `make test` and run by `make test-slow`, which .ci/run runs too.
set_property(TEST record.targets.cuda record.targets.vulkan record.export_1b APPEND PROPERTY LABELS slow)
