# test_irpa checks its archives against IREE's own tools (iree-dump-parameters, iree-convert-parameters,
# iree-create-parameters), which scripts/setup.sh installs beside the venv's Python. Missing tools
# make those tests fail, never skip.
if(TARGET test_irpa)
  get_filename_component(skainet_iree_tools_dir "${SKAINET_VENV_PYTHON}" DIRECTORY)
  target_compile_definitions(test_irpa PRIVATE SKAINET_IREE_TOOLS_DIR="${skainet_iree_tools_dir}")
endif()
