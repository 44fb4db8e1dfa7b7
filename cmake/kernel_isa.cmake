# Per-source ISA flags of the x86 kernels (src/kernels/x86/): each matmul_<isa>.cpp is compiled for
# its instruction set only, and the dispatch picks a table at run time (base::CpuFeatures), so the
# rest of the library keeps the baseline flags and the binary still runs on a CPU without AVX2.
# Included right after skainet_module(kernels ...), whose recursive glob already holds the files.
# GCC 12 warns that AVX-512 intrinsics with an unused pass-through operand (max, roundscale, scalef)
# read it uninitialized; the operand is undefined by design, so the AVX-512 units silence both forms.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$" AND
   CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_compile_definitions(skainet_kernels PRIVATE SKAINET_X86_KERNELS=1)
  set_source_files_properties(${PROJECT_SOURCE_DIR}/src/kernels/x86/matmul_avx2.cpp
    TARGET_DIRECTORY skainet_kernels PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
  set_source_files_properties(${PROJECT_SOURCE_DIR}/src/kernels/x86/matmul_avx512.cpp
    TARGET_DIRECTORY skainet_kernels PROPERTIES
    COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512vnni;$<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized;-Wno-uninitialized>")
  set_source_files_properties(${PROJECT_SOURCE_DIR}/src/kernels/x86/matmul_amx.cpp
    TARGET_DIRECTORY skainet_kernels PROPERTIES
    COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512vnni;-mamx-tile;-mamx-int8;$<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>")
  set_source_files_properties(${PROJECT_SOURCE_DIR}/src/kernels/x86/matmul_amx_bf16.cpp
    TARGET_DIRECTORY skainet_kernels PROPERTIES
    COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512bf16;-mamx-tile;-mamx-bf16;$<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized;-Wno-uninitialized>")
endif()
