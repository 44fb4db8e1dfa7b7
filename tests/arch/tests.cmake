# No tensor name or hyper-parameter key spelled outside the arch module (issue 12).
add_test(NAME arch.spelled_once COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/spelled_once.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(arch.spelled_once PROPERTIES LABELS arch)
