# Includes point only to the same layer or lower (the layers and each module's: the top CMakeLists.txt).
get_property(skainet_module_layers GLOBAL PROPERTY SKAINET_MODULE_LAYERS)
string(REPLACE ";" " " skainet_layer_order "${SKAINET_LAYERS}")
string(REPLACE ";" " " skainet_module_layers "${skainet_module_layers}")
add_test(NAME layers.includes
         COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/check_layers.py ${PROJECT_SOURCE_DIR} "${skainet_layer_order}"
                 "${skainet_module_layers}")
set_tests_properties(layers.includes PROPERTIES LABELS layers)
