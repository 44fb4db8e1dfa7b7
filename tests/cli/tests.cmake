# test_cli drives the built `skainet` binary, so it must exist before the tests run.
if(TARGET test_cli)
  add_dependencies(test_cli skainet)
endif()
