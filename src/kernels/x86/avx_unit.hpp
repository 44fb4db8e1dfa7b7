// What the AVX2 and AVX-512 units (matmul_avx2.cpp, matmul_avx512.cpp) share, included at the top of
// each after its SKAINET_X86_VNNI choice: the kernel headers, the rows of the packed formats whose
// kernels are the same templates at both levels, and the level's IsaKernels over a unit's own rows
// and those. Every template here is instantiated in the including unit, with that unit's ISA flags;
// internal linkage like the headers it includes.
#pragma once

#include <algorithm>
#include <array>
#include <iterator>

#include "kernels/x86/simd_int8.hpp"
#include "kernels/x86/simd_tiles.hpp"
#include "kernels/x86/k_tiles.hpp"
#include "kernels/x86/feed_tiles.hpp"
#include "kernels/x86/softmax.hpp"
#include "kernels/x86/rows.hpp"
#include "kernels/x86/simd_iq4.hpp"
#include "kernels/x86/simd_q23_k.hpp"
#include "kernels/x86/attend.hpp"

namespace skainet::kernels::x86 {
namespace {

// The packed formats whose one-row dots and tiles differ between the levels only through the
// headers' SKAINET_X86_VNNI choice. Q4_0 and IQ4_XS, and the dense types, have kernels of their own
// at each level (the unit's rows).
constexpr FormatKernels kSharedFormats[] = {
    {.type = GgmlType::Q4_1,
     .act = Act::Q8x32,
     .gemv = gemm_legacy<Q4_1Dec, &dot_legacy<Q4_1Dec>>,
     .attend_keys = &attend_keys<KvRef<GgmlType::Q4_1>>,
     .attend_values = &attend_values<KvRef<GgmlType::Q4_1>>},
    {.type = GgmlType::Q5_0,
     .act = Act::Q8x32,
     .gemv = gemm_legacy<Q5_0Dec, &dot_legacy<Q5_0Dec>>,
     .attend_keys = &attend_keys<KvRef<GgmlType::Q5_0>>,
     .attend_values = &attend_values<KvRef<GgmlType::Q5_0>>},
    {.type = GgmlType::Q5_1,
     .act = Act::Q8x32,
     .gemv = gemm_legacy<Q5_1Dec, &dot_legacy<Q5_1Dec>>,
     .attend_keys = &attend_keys<KvRef<GgmlType::Q5_1>>,
     .attend_values = &attend_values<KvRef<GgmlType::Q5_1>>},
    {.type = GgmlType::Q8_0,
     .act = Act::Q8x32,
     .gemv = gemm_legacy<Q8_0Dec, &dot_q8_0>,
     .feed = &gemm_feed<FeedQ8_0, &dot_q8_0>,
     .attend_keys = &attend_keys<KvQ8_0>,
     .attend_values = &attend_values<KvQ8_0>},
    {.type = GgmlType::IQ4_NL,
     .act = Act::Q8x32,
     .gemv = gemm_legacy<IQ4_NLDec, &dot_iq4_nl>,
     .attend_keys = &attend_keys<KvRef<GgmlType::IQ4_NL>>,
     .attend_values = &attend_values<KvRef<GgmlType::IQ4_NL>>},
    {.type = GgmlType::MXFP4, .act = Act::Q8x32, .gemv = gemm_legacy<MXFP4Dec, &dot_mxfp4>},
    {.type = GgmlType::Q2_K, .act = Act::Q8x256, .gemv = gemm_k<Q2_KDecode, &dot_q2_k>},
    {.type = GgmlType::Q3_K, .act = Act::Q8x256, .gemv = gemm_k<Q3_KDecode, &dot_q3_k>},
    {.type = GgmlType::Q4_K, .act = Act::Q8x256, .gemv = &gemm_q4_k_as_feed, .feed = &gemm_feed<FeedQ4_K, &dot_q4_k>},
    {.type = GgmlType::Q5_K, .act = Act::Q8x256, .gemv = gemm_k<Q5_KDecode, &dot_q5_k>},
    {.type = GgmlType::Q6_K,
     .act = Act::Q8x256,
     .gemv = gemm_k<Q6_KDecode, &dot_q6_k>,
     .feed = &gemm_feed<FeedQ6_K, &dot_q6_k>,
     // On AVX2 the file-order dot (14.8 against 11.5 GB/s from L2/L3, one thread, k 2048) and K tiles
     // (n 128, 5632 rows: 36.9 against 58.2 ms) beat the feed tile: the plan keeps Q6_K in file order.
     .feed_offered = SKAINET_X86_VNNI != 0},
};

// A level's rows: the unit's own, then the shared ones (x86/level.cpp indexes them by type).
template <size_t N>
constexpr auto with_shared_formats(const FormatKernels (&own)[N]) noexcept {
  std::array<FormatKernels, N + std::size(kSharedFormats)> all{};
  std::copy(std::begin(own), std::end(own), all.begin());
  std::copy(std::begin(kSharedFormats), std::end(kSharedFormats), all.begin() + N);
  return all;
}

// The level's IsaKernels over `formats` and the row kernels the headers above define for it.
template <size_t N>
constexpr IsaKernels isa_kernels(const char* name, const std::array<FormatKernels, N>& formats) noexcept {
  return {
      .name = name,
      .quantize_q8x32 = &quantize_q8x32,
      .quantize_q8x256 = &quantize_q8x256,
      .formats = formats.data(),
      .format_count = static_cast<int64_t>(N),
      .softmax_row = &softmax_row,
      .split_bf16_pairs = nullptr,
      .swiglu_row = &swiglu_row,
      .rms_norm_row = &rms_norm_row,
      .f32_to_f16_row = &f32_to_f16_row,
  };
}

}  // namespace
}  // namespace skainet::kernels::x86
