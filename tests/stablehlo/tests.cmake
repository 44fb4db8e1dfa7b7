# The dequantization conformity test compiles and runs StableHLO with the IREE tools of the test
# virtual environment (scripts/setup.sh), which sit beside its Python. Missing tools fail the test.
if(TARGET test_stablehlo)
  get_filename_component(skainet_iree_bin "${SKAINET_VENV_PYTHON}" DIRECTORY)
  target_compile_definitions(test_stablehlo PRIVATE SKAINET_IREE_BIN="${skainet_iree_bin}")
endif()
