# The IREE modules the recorded-path tests run, made as build steps: each is exported and compiled
# once (tests/record/build_module.py), and again only when `skainet`, its model or the scripts change,
# so a test run on a warm build only runs them. They are not part of `all` (a kernel edit should not
# wait for 67 compiles): the test `record.modules` builds the target `record_modules` as the fixture
# every test that reads them requires, a no-op when they are current.
#
# Under ${CMAKE_BINARY_DIR}/record-modules: models/<case>.gguf (made here; stories260K F32 is read in
# place) and <case>/<config>/ (export folder + model.vmfb).

set(skainet_modules "${CMAKE_BINARY_DIR}/record-modules")
set(skainet_module_scripts ${CMAKE_CURRENT_LIST_DIR}/build_module.py ${CMAKE_CURRENT_LIST_DIR}/record_support.py
                           ${PROJECT_SOURCE_DIR}/scripts/iree_module.py)
set(skainet_module_outputs "")

# skainet_test_model(CASE VAR <skainet arguments, OUT where the file goes>): VAR = the model's path.
function(skainet_test_model case var)
  set(out "${skainet_modules}/models/${case}.gguf")
  set(inputs ${ARGN})
  list(FILTER inputs INCLUDE REGEX "^/.*\\.gguf$")  # the model it is made from, if any
  list(TRANSFORM ARGN REPLACE "^OUT$" "${out}")
  add_custom_command(OUTPUT ${out} COMMAND $<TARGET_FILE:skainet> ${ARGN}
                     DEPENDS skainet ${inputs} VERBATIM COMMENT "record modules: ${case}.gguf")
  set(${var} ${out} PARENT_SCOPE)
endfunction()

# skainet_test_module(CASE CONFIG MODEL <build_module.py options>)
function(skainet_test_module case config model)
  set(dir "${skainet_modules}/${case}/${config}")
  add_custom_command(OUTPUT ${dir}/model.vmfb
                     COMMAND ${SKAINET_VENV_PYTHON} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/build_module.py
                             $<TARGET_FILE:skainet> ${model} ${dir} ${ARGN}
                     DEPENDS skainet ${model} ${skainet_module_scripts} VERBATIM
                     COMMENT "record modules: ${case}/${config}")
  set(skainet_module_outputs ${skainet_module_outputs} ${dir}/model.vmfb PARENT_SCOPE)
endfunction()

set(stories "${SKAINET_SHARED_MODELS}/stories260K.gguf")
skainet_test_model(Q8_0 stories_q8_0 quantize ${stories} OUT Q8_0)
skainet_test_model(Q4_0 stories_q4_0 quantize ${stories} OUT Q4_0)

# RecordedConformity (conformity_test.cpp): each case's prefill at its prompt's length, ctx 64, in
# four configurations: the StableHLO form with an F32 and an F16 KV cache, the engine-kernel form with
# dense F32 weights (F32 cache) and with the plan's weights (F16 cache).
set(conformity_prompt "Once upon a time, there was a little girl named")
function(skainet_conformity_modules case model)
  set(common --prompt ${conformity_prompt} --ctx 64)
  skainet_test_module(${case} stablehlo-f32 ${model} ${common} --kernels stablehlo --kv-type f32)
  skainet_test_module(${case} stablehlo-f16 ${model} ${common} --kernels stablehlo --kv-type f16)
  skainet_test_module(${case} engine-dense ${model} ${common} --kernels engine --kv-type f32 --weight-form f32,heap)
  skainet_test_module(${case} engine-planned ${model} ${common} --kernels engine --kv-type f16)
  set(skainet_module_outputs ${skainet_module_outputs} PARENT_SCOPE)
endfunction()

skainet_conformity_modules(F32 ${stories})
skainet_conformity_modules(Q8_0 ${stories_q8_0})
skainet_conformity_modules(Q4_0 ${stories_q4_0})
# Synthetic families (`synth --preset tiny --bigram --seed 7`): q/k/v biases, NeoX RoPE and K formats
# (Qwen2), q/k norms (Qwen3), fused weights (Phi-3), rope_freqs (Llama 3.1), GeGLU, post norms,
# windows, soft caps, embedding scale and a tied output (Gemma 2 and 3).
foreach(synth Qwen2_Q4_K_M:qwen2:Q4_K_M Qwen3_Q8_0:qwen3:Q8_0 Phi3_Q8_0:phi3:Q8_0 Llama3_F32:llama3:F32
              Gemma2_Q8_0:gemma2:Q8_0 Gemma3_F32:gemma3:F32)
  string(REPLACE ":" ";" parts ${synth})
  list(GET parts 0 case)
  list(GET parts 1 arch)
  list(GET parts 2 type)
  skainet_test_model(${case} model synth --preset tiny --arch ${arch} --type ${type} --bigram --seed 7 OUT)
  skainet_conformity_modules(${case} ${model})
endforeach()
# Mixtures of experts (routing by expert_ids/expert_weights, products by matmul_experts): qwen3moe
# (8 experts, 2 used, experts of their own width), a Mixtral-style llama (4 experts, 2 used) and
# gpt-oss (below).
skainet_test_model(Qwen3Moe_Q8_0 model synth --preset tiny --arch qwen3moe --expert-ffn 96 --type Q8_0 --bigram --seed 7 OUT)
skainet_conformity_modules(Qwen3Moe_Q8_0 ${model})
skainet_test_model(Mixtral_F32 model synth --preset tiny --arch llama --experts 4 --type F32 --bigram --seed 7 OUT)
skainet_conformity_modules(Mixtral_F32 ${model})
# gpt-oss: attention sinks, biases, the clamped SwiGLU and expert biases; layer 0 of the two windowed,
# its window (8) shorter than the prompt, so the mask's window bites in prefill and decode alike. Q8_0
# throughout, and MXFP4_MOE (MXFP4 expert stacks, dequantized by the StableHLO rules in both forms).
foreach(synth GptOss_Q8_0:Q8_0 GptOss_MXFP4:MXFP4_MOE)
  string(REPLACE ":" ";" parts ${synth})
  list(GET parts 0 case)
  list(GET parts 1 type)
  skainet_test_model(${case} model synth --preset tiny --arch gpt-oss --expert-ffn 96 --sliding-window 8
                     --type ${type} --bigram --seed 7 OUT)
  skainet_conformity_modules(${case} ${model})
endforeach()
# YaRN (lower_rope's per-pair blend and magnitude): factor 32 over an original context of 32, so the
# ramp runs over pairs 0 to 6 of 32.
skainet_test_model(LlamaYarn_F32 model synth --preset tiny --arch llama --rope-scaling yarn --rope-scale 32
                   --yarn-orig-ctx 32 --type F32 --bigram --seed 7 OUT)
skainet_conformity_modules(LlamaYarn_F32 ${model})

# record.generation (check_generation.py): 64 greedy tokens at ctx 128, F32 and Q8_0 in both kernel
# forms, and Q8_0 in the form without fused one-row products.
set(generation_ctx 128)  # check_generation.py runs the eager engine at the same context
foreach(form engine stablehlo)
  skainet_test_module(generation-F32 ${form} ${stories} --ctx ${generation_ctx} --kernels ${form})
  skainet_test_module(generation-Q8_0 ${form} ${stories_q8_0} --ctx ${generation_ctx} --kernels ${form})
endforeach()
skainet_test_module(generation-Q8_0 stablehlo-flat ${stories_q8_0} --ctx ${generation_ctx} --kernels stablehlo-flat)

# record.stablehlo_packed (check_stablehlo_packed.py): a tiny llama (rows of 256 and 512, so the K and
# IQ4 formats apply) quantized to a legacy, K and IQ4 format each, exported in the portable form and
# compiled with IREE's scheduling statistics.
set(stablehlo_packed_formats Q4_0 Q8_0 Q4_K_M Q6_K Q3_K_M IQ4_XS)
skainet_test_model(packed-F32 tiny synth --preset tiny --type F32 OUT)
foreach(type ${stablehlo_packed_formats})
  skainet_test_model(packed-${type} model quantize ${tiny} OUT ${type})
  skainet_test_module(packed ${type} ${model} --ctx 128 --kernels stablehlo --statistics)
endforeach()

add_custom_target(record_modules DEPENDS ${skainet_module_outputs})
add_test(NAME record.modules COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target record_modules)
set_tests_properties(record.modules PROPERTIES LABELS "record;iree" TIMEOUT 1800 FIXTURES_SETUP record_modules)
