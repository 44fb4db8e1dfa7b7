# Logits agreement with llama.cpp (tests/peer/check_logits.sh): peer_logits is built against the peer's
# llama.h and static libraries, found from SKAINET_PEER_BIN (<peer build>/bin); skainet_logits against
# our engine. Included by tests.cmake only when SKAINET_PEER_BIN is set.
get_filename_component(peer_build "${SKAINET_PEER_BIN}" DIRECTORY)
file(STRINGS "${peer_build}/CMakeCache.txt" peer_src REGEX "^CMAKE_HOME_DIRECTORY:INTERNAL=")
string(REGEX REPLACE "^[^=]*=" "" peer_src "${peer_src}")
set(peer_libs ${peer_build}/src/libllama.a ${peer_build}/ggml/src/libggml.a
              ${peer_build}/ggml/src/libggml-cpu.a ${peer_build}/ggml/src/libggml-base.a)
set(peer_ok TRUE)
foreach(f ${peer_libs} ${peer_src}/include/llama.h)
  if(NOT EXISTS "${f}")
    message(WARNING "peer build incomplete (no ${f}); peer logits tests not registered")
    set(peer_ok FALSE)
  endif()
endforeach()
find_package(OpenMP COMPONENTS CXX)  # the peer's ggml-cpu is built with GGML_OPENMP
if(peer_ok AND NOT OpenMP_CXX_FOUND)
  message(WARNING "no OpenMP for linking the peer's ggml-cpu; peer logits tests not registered")
  set(peer_ok FALSE)
endif()

if(peer_ok)
  add_executable(peer_logits ${CMAKE_CURRENT_LIST_DIR}/peer_logits.cpp)
  target_include_directories(peer_logits PRIVATE ${peer_src}/include ${peer_src}/ggml/include)
  target_link_libraries(peer_logits PRIVATE ${peer_libs} OpenMP::OpenMP_CXX Threads::Threads ${CMAKE_DL_LIBS} m)

  add_executable(skainet_logits ${CMAKE_CURRENT_LIST_DIR}/skainet_logits.cpp)
  target_link_libraries(skainet_logits PRIVATE skainet_generate)

  # A tinyllama-architecture model (32/4 heads, head dim 64, ffn 2.75 x dim, the LLaMA SPM vocabulary
  # of 32000) at dim 2048 and 2 layers instead of 22: the full shape's F32 file is 4.4 GB. Two weight
  # kinds: `bigram` (synth --bigram: a decisive top-1 at every step, as a trained model has; every
  # top-1 must be equal) and `random` (plain noise: near-flat logits whose top-1 the 8-bit activation
  # rounding decides, so flips inside the measured logit difference are reported, not failed).
  # Tolerances: measured values and margins are in docs/benchmarks.md ("Logits against llama.cpp").
  set(SKAINET_LOGITS_SHAPE --preset tinyllama-1.1b --layers 2 CACHE STRING
      "skainet synth shape options of the peer logits tests")
  # The families after Llama, each with its family's real vocabulary (Qwen3: Qwen2's, 151936 tokens;
  # Phi-3: its own SPM one, 32064; Llama 3: llama-bpe, 128256; Gemma: LLaMA's SPM one, the nearest),
  # at a width that keeps the F32 embedding and output at 300 MB each: 8/4 heads, 2 layers. Qwen3's
  # head size (128) is not dim / heads, as in the real models.
  set(SKAINET_FAMILY_SHAPE --preset tiny --dim 512 --heads 8 --kv-heads 4 --ffn 1024 --ctx 512)
  # Qwen2 (q/k/v biases, NeoX RoPE) at the same shape with the GPT-2 byte-level BPE vocabulary, so the
  # prompt ids differ: "Once upon a time" is [7454, 2402, 257, 640] there, no BOS.
  # TYPE@peer cases: files llama-quantize makes from the F16 bigram synth (Q2_K, Q3_K_M, IQ4_NL, IQ4_XS,
  # each with llama.cpp's per-tensor mix, which our `quantize` must reproduce tensor for tensor).
  # name; weights; top-1 rule; type; bound on max|dlogit|/max|logit|; on rms(dlogit)/max|logit| (per step);
  # optionally the K and V caches' type (-ctk/-ctv; llama.cpp then runs with flash attention, which a
  # quantized V needs there), the prompt repeated 20 times so the steps read 100-odd quantized cells.
  foreach(case "F32;bigram;strict;F32;1e-3;2.5e-4" "Q8_0;bigram;strict;Q8_0;3e-2;1e-2"
               "random_F32;random;near-ties;F32;2e-3;5e-4" "random_Q8_0;random;near-ties;Q8_0;5e-2;1.5e-2"
               "qwen2_F32;qwen2;strict;F32;1e-3;2.5e-4" "qwen2_Q8_0;qwen2;strict;Q8_0;3e-2;1e-2"
               "peer_Q2_K;bigram;strict;Q2_K@peer;5e-2;1.5e-2" "peer_Q3_K_M;bigram;strict;Q3_K_M@peer;5e-2;1.5e-2"
               "peer_IQ4_NL;bigram;strict;IQ4_NL@peer;5e-2;1.5e-2" "peer_IQ4_XS;bigram;strict;IQ4_XS@peer;5e-2;1.5e-2"
               "qwen3_F32;qwen3;strict;F32;1e-3;2.5e-4" "qwen3_Q8_0;qwen3;strict;Q8_0;3e-2;1e-2"
               "phi3_F32;phi3;strict;F32;1e-3;2.5e-4" "phi3_Q8_0;phi3;strict;Q8_0;3e-2;1e-2"
               "llama3_F32;llama3;strict;F32;1e-4;2.5e-5" "llama3_Q8_0;llama3;strict;Q8_0;3e-2;1e-2"
               "gemma_F32;gemma;strict;F32;1e-3;2.5e-4" "gemma_Q8_0;gemma;strict;Q8_0;3e-2;1e-2"
               "gemma2_F32;gemma2;strict;F32;1e-3;2.5e-4" "gemma2_Q8_0;gemma2;strict;Q8_0;3e-2;1e-2"
               "gemma3_F32;gemma3;strict;F32;1e-3;2.5e-4" "gemma3_Q8_0;gemma3;strict;Q8_0;3e-2;1e-2"
               # llama-quantize's mix on the families' own tensors (fused qkv; a tied token_embd)
               "phi3_Q4_K_M;phi3;strict;Q4_K_M@peer;5e-2;1.5e-2" "gemma2_Q4_K_M;gemma2;strict;Q4_K_M@peer;5e-2;1.5e-2"
               # Quantized caches: each engine rounds its own K and V rows, which differ in the last bits,
               # so a coarse cache's rounding parts them by its step (measured: q4_0 moves either engine's
               # logits 8.6e-2 from its F16 cache's, and the two engines 1.2e-1 apart; q8_0 1.7e-2 and 1.6e-2).
               "kv_q8_0;bigram;strict;Q8_0;3e-2;1e-2;q8_0" "kv_q4_0;bigram;strict;Q8_0;2e-1;5e-2;q4_0"
               "kv_q5_1;bigram;strict;Q8_0;8e-2;2e-2;q5_1"
               # Mixtures of experts (routed row by row; synth's router decisive, so a wrong expert shows).
               # Q4_K_M@peer: llama-quantize's mix, its 8-expert rules included, which ours must equal.
               "qwen3moe_F32;qwen3moe;strict;F32;1e-3;2.5e-4" "qwen3moe_Q8_0;qwen3moe;strict;Q8_0;3e-2;1e-2"
               "qwen3moe_Q4_K_M;qwen3moe;strict;Q4_K_M@peer;5e-2;1.5e-2"
               "llama_moe_F32;mixtral;strict;F32;1e-3;2.5e-4" "llama_moe_Q8_0;mixtral;strict;Q8_0;3e-2;1e-2"
               "llama_moe_Q4_K_M;mixtral;strict;Q4_K_M@peer;5e-2;1.5e-2"
               # gpt-oss: sinks, biases, the clamped SwiGLU, every other layer windowed. MXFP4: our synth's
               # MXFP4_MOE (expert stacks MXFP4, the rest Q8_0), which both engines read, and llama-quantize's
               # own MXFP4_MOE of the F16 synth (@peer), whose per-tensor types ours must equal.
               "gpt_oss_F32;gpt-oss;strict;F32;1e-3;2.5e-4" "gpt_oss_Q8_0;gpt-oss;strict;Q8_0;3e-2;1e-2"
               "gpt_oss_Q4_K_M;gpt-oss;strict;Q4_K_M@peer;5e-2;1.5e-2"
               "gpt_oss_MXFP4;gpt-oss;strict;MXFP4_MOE;3e-2;1e-2"
               "gpt_oss_MXFP4_peer;gpt-oss;strict;MXFP4_MOE@peer;3e-2;1e-2"
               # YaRN (rope.scaling.type yarn): gpt-oss's released files' scaling, NeoX pairs, its windowed
               # layers on the same factor; and llama's adjacent pairs (Qwen's 128K files are the same math).
               "gpt_oss_yarn_F32;gpt-oss-yarn;strict;F32;1e-3;2.5e-4" "llama_yarn_F32;llama-yarn;strict;F32;1e-3;2.5e-4")
    list(GET case 0 name)
    list(GET case 1 weights)
    list(GET case 2 top1)
    list(GET case 3 type)
    list(GET case 4 tol)
    list(GET case 5 rms_tol)
    set(shape ${SKAINET_LOGITS_SHAPE})
    set(vocab llama-spm)
    set(env "SKAINET_PEER_BIN=${SKAINET_PEER_BIN}")
    set(work ${weights})
    list(LENGTH case fields)
    if(fields GREATER 6)
      list(GET case 6 kv)
      list(APPEND env "SKAINET_LOGITS_KV=${kv}" "SKAINET_LOGITS_REPEAT=20")
      set(work ${weights}-kv-${kv})
    endif()
    if(weights STREQUAL "bigram")
      list(APPEND shape --bigram)
    elseif(weights STREQUAL "qwen2")
      list(APPEND shape --bigram --arch qwen2)
      set(vocab gpt-2)
      list(APPEND env "SKAINET_LOGITS_IDS=7454,2402,257,640")
    elseif(weights STREQUAL "qwen3")
      set(shape ${SKAINET_FAMILY_SHAPE} --layers 2 --head-dim 128 --bigram --arch qwen3)
      set(vocab qwen2)
      list(APPEND env "SKAINET_LOGITS_IDS=12522,5193,264,882")
    elseif(weights STREQUAL "qwen3moe")
      # 8 experts of 256 (Qwen3-30B-A3B's ratio of expert to model width), 2 used per token.
      set(shape ${SKAINET_FAMILY_SHAPE} --layers 2 --head-dim 128 --experts 8 --experts-used 2 --expert-ffn 256
          --bigram --arch qwen3moe)
      set(vocab qwen2)
      list(APPEND env "SKAINET_LOGITS_IDS=12522,5193,264,882")
    elseif(weights STREQUAL "mixtral")
      # Mixtral: a llama file with 8 experts of ffn width, 2 used per token.
      set(shape ${SKAINET_FAMILY_SHAPE} --layers 2 --bigram --arch mixtral)  # 8 experts, 2 used
    elseif(weights MATCHES "^gpt-oss")
      # 8 experts of 256, 2 used; a 16-position window on layer 0 (of 2), so the 37 positions cross it.
      set(shape ${SKAINET_FAMILY_SHAPE} --layers 2 --experts 8 --experts-used 2 --expert-ffn 256 --sliding-window 16
          --bigram --arch gpt-oss)
    elseif(weights STREQUAL "llama-yarn")
      set(shape ${SKAINET_FAMILY_SHAPE} --layers 2 --bigram --arch llama)
    elseif(weights STREQUAL "phi3")
      set(shape ${SKAINET_FAMILY_SHAPE} --layers 2 --bigram --arch phi3)
      set(vocab phi-3)
    elseif(weights STREQUAL "llama3")
      # 400 prompt positions: Llama 3's rope_freqs scale frequencies that turn too slowly to matter in
      # 37 (measured: without them the F32 logits part by 8.7e-4, with them by 2.9e-6; hence 1e-4).
      set(shape ${SKAINET_FAMILY_SHAPE} --layers 2 --bigram --arch llama3)
      set(vocab llama-bpe)
      list(APPEND env "SKAINET_LOGITS_IDS=128000,12805,5304,264,892" "SKAINET_LOGITS_REPEAT=80")
    elseif(weights STREQUAL "gemma")
      # No Gemma vocabulary is beside us: LLaMA's SPM one stands in (for Gemma 2 and 3 too).
      set(shape ${SKAINET_FAMILY_SHAPE} --layers 2 --bigram --arch gemma)
    elseif(weights MATCHES "^gemma")
      # A 16-position window, so the 37 positions cross it; Gemma 3 at 6 layers for one global layer
      # (5 of 6 are windowed).
      set(shape ${SKAINET_FAMILY_SHAPE} --sliding-window 16 --bigram --arch ${weights})
      if(weights STREQUAL "gemma3")
        list(APPEND shape --layers 6 --head-dim 128)
      else()
        list(APPEND shape --layers 2)
      endif()
    endif()
    if(weights MATCHES "-yarn$")
      # Factor 32 over an original context of 32: at head size 64 and base 10000 the ramp runs over pairs
      # 0 to 6 (the rest interpolated), the magnitude is 1 + 0.1 ln 32, and the 37 positions pass 32.
      list(APPEND shape --rope-scaling yarn --rope-scale 32 --yarn-orig-ctx 32)
    endif()
    add_test(NAME peer_logits_${name}
      COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_logits.sh $<TARGET_FILE:skainet> $<TARGET_FILE:peer_logits>
        $<TARGET_FILE:skainet_logits> ${SKAINET_VENV_PYTHON} ${SKAINET_SHARED_MODELS}/vocab/ggml-vocab-${vocab}.gguf
        ${CMAKE_BINARY_DIR}/peer-logits/${work} ${type} ${tol} ${rms_tol} ${top1} ${shape})
    set_tests_properties(peer_logits_${name} PROPERTIES LABELS peer TIMEOUT 900 ENVIRONMENT "${env}")
    if(type MATCHES "@peer$")  # these share the F16 synth they quantize from
      set_tests_properties(peer_logits_${name} PROPERTIES RESOURCE_LOCK peer_logits_f16_synth)
    endif()
  endforeach()
endif()
