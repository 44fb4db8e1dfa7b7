// IQ4_NL and IQ4_XS one-row dot products on 256-bit vectors, for both ISA units (included after
// simd_int8.hpp, whose helpers and SKAINET_X86_VNNI choice they use). The 4-bit indices become the
// signed levels kIq4nlValues with one byte shuffle, then a signed x signed integer dot per 32
// elements (|level| <= 127 against |x| <= 127: no int16 pair saturates). IQ4_NL dots against a
// Q8x32 activation (as llama.cpp's against Q8_0), IQ4_XS against Q8x256 (llama.cpp: Q8_K); on
// AVX-512 VNNI IQ4_XS's prefill decodes each block once per call into the K tiles' form.
#pragma once

namespace skainet::kernels::x86 {
namespace {

// 16 bytes of nibbles -> the 32 levels they index, elements 0..15 from the low nibbles.
inline __m256i iq4_levels32(const std::byte* p) noexcept {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
  return _mm256_shuffle_epi8(_mm256_set_m128i(table, table), nibbles32(p));
}

// A 32-element block with its F16 scale first and signed quants, as Q8_0: the legacy prefill tiles
// (simd_tiles.hpp) read it as they read Q8_0.
struct IQ4_NLDec {
  static constexpr int64_t kBytes = sizeof(BlockIQ4_NL);
  static constexpr bool kSigned = true;
  static __m256i quants(const std::byte* b) noexcept { return iq4_levels32(b + 2); }
};

float dot_iq4_nl(const std::byte* w, const std::byte* xr, int64_t k, const ActLayout& L) noexcept {
  return dot_signed<IQ4_NLDec>(w, xr, k, L);
}

// The signed 6-bit scale (ls - 32) of each of an IQ4_XS block's eight 32-element sub-blocks.
inline void iq4_xs_scales(const std::byte* p, int32_t (&scale)[8]) noexcept {
  uint16_t scales_h;
  std::memcpy(&scales_h, p + offsetof(BlockIQ4_XS, scales_h), 2);
  const auto* scales_l = reinterpret_cast<const uint8_t*>(p + offsetof(BlockIQ4_XS, scales_l));
  for (int j = 0; j < 8; ++j)
    scale[j] = (((scales_l[j / 2] >> (4 * (j % 2))) & 0xf) | (((scales_h >> (2 * j)) & 3) << 4)) - 32;
}

// Per super-block: the 8 sub-block sums times their 6-bit scales (ls - 32) in int32 lanes (at most
// 8 * 32 * 4 * 127 * 127 in magnitude), then one float multiply by d_w * d_x.
float dot_iq4_xs(const std::byte* w, const std::byte* xr, int64_t k, const ActLayout& L) noexcept {
  const Act256 a = act256(xr, L);
  constexpr int64_t kB = sizeof(BlockIQ4_XS);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < k / 256; ++b) {
    const std::byte* p = w + b * kB;
    int32_t scale[8];
    iq4_xs_scales(p, scale);
    const std::byte* qs = p + offsetof(BlockIQ4_XS, qs);
    const int8_t* xq = a.q + 256 * b;
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const __m256i s = mul_sum_s8(iq4_levels32(qs + 16 * j), loadu(xq + 32 * j));
      sumi = _mm256_add_epi32(sumi, _mm256_mullo_epi32(s, _mm256_set1_epi32(scale[j])));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half_at(p) * a.d[b]), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc);
}

#if SKAINET_X86_VNNI
// One IQ4_XS block into the K tiles' decoded form (k_tiles.hpp, KStepWide): the levels + 128 as
// unsigned bytes (a sign-bit flip), the sub-block's scale per four elements, and the offset's term.
struct IQ4_XSDecode {
  static constexpr int64_t kBytes = sizeof(BlockIQ4_XS);
  static void block(const std::byte* p, uint8_t* q, int32_t* sc, float* m, float& d) noexcept {
    int32_t scale[8];
    iq4_xs_scales(p, scale);
    d = half_at(p);
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int j = 0; j < 8; ++j) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * j),
                          _mm256_xor_si256(iq4_levels32(p + offsetof(BlockIQ4_XS, qs) + 16 * j), flip));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(sc + 8 * j), _mm256_set1_epi32(scale[j]));
      m[2 * j] = m[2 * j + 1] = 128.0f * d * static_cast<float>(scale[j]);
    }
  }
};
#endif

}  // namespace
}  // namespace skainet::kernels::x86
