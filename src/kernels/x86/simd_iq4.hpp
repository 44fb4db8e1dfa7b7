// IQ4_NL, IQ4_XS and MXFP4 one-row dot products on 256-bit vectors (IQ4_XS's on 512 in the AVX-512 unit),
// for both ISA units (included after simd_int8.hpp, whose helpers and SKAINET_X86_VNNI choice they
// use). The 4-bit indices become the
// signed levels kIq4nlValues with one byte shuffle, then a signed x signed integer dot per 32
// elements (|level| <= 127 against |x| <= 127: no int16 pair saturates). IQ4_NL dots against a
// Q8x32 activation (as llama.cpp's against Q8_0), IQ4_XS against Q8x256 (llama.cpp: Q8_K); on
// AVX-512 VNNI IQ4_XS's prefill decodes each block once per call into the K tiles' form.
#pragma once

#include "kernels/x86/block_scales.hpp"

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

// MXFP4 as IQ4_NL with its own 16 levels (|level| <= 12) and the E8M0 scale in the block's first
// byte: the same signed dot and legacy prefill tiles (llama.cpp dots it against Q8_0 likewise).
struct MXFP4Dec {
  static constexpr int64_t kBytes = sizeof(BlockMXFP4);
  static constexpr bool kSigned = true;
  static __m256i quants(const std::byte* b) noexcept {
    const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values));
    return _mm256_shuffle_epi8(_mm256_set_m128i(table, table), nibbles32(b + offsetof(BlockMXFP4, qs)));
  }
  static float scale(const std::byte* b) noexcept { return e8m0_half_at(b + offsetof(BlockMXFP4, e)); }
};

float dot_mxfp4(const std::byte* w, const std::byte* xr, int64_t k, const ActLayout& L) noexcept {
  return dot_signed<MXFP4Dec>(w, xr, k, L);
}

// The one-row IQ4_XS dot's loop over blocks: `block(acc, d_w * d_x, scale, qs, xq)` adds one block's
// integer sum (its sub-blocks' level x x sums times their 6-bit scales - 32) times d_w * d_x to the
// level's float accumulator.
template <class F, class Block>
F iq4_xs_blocks(const std::byte* w, const std::byte* xr, int64_t k, const ActLayout& L, F acc, Block&& block) noexcept {
  const Act256 a = act256(xr, L);
  for (int64_t b = 0; b < k / 256; ++b) {
    const std::byte* p = w + b * static_cast<int64_t>(sizeof(BlockIQ4_XS));
    int32_t scale[8];
    iq4_xs_scales(p, scale);
    acc = block(acc, half_at(p) * a.d[b], scale, p + offsetof(BlockIQ4_XS, qs), a.q + 256 * b);
  }
  return acc;
}

#if !SKAINET_X86_VNNI
// Per super-block: the 8 sub-block sums times their scales in int32 lanes (at most 8 * 32 * 4 * 127 *
// 127 in magnitude), then one float multiply.
float dot_iq4_xs(const std::byte* w, const std::byte* xr, int64_t k, const ActLayout& L) noexcept {
  const auto block = [](__m256 acc, float dd, const int32_t* scale, const std::byte* qs, const int8_t* xq) noexcept {
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const __m256i s = mul_sum_s8(iq4_levels32(qs + 16 * j), loadu(xq + 32 * j));
      sumi = _mm256_add_epi32(sumi, _mm256_mullo_epi32(s, _mm256_set1_epi32(scale[j])));
    }
    return _mm256_fmadd_ps(_mm256_set1_ps(dd), _mm256_cvtepi32_ps(sumi), acc);
  };
  return hsum(iq4_xs_blocks(w, xr, k, L, _mm256_setzero_ps(), block));
}
#else
// The one-row IQ4_XS dot on 512-bit vectors, 64 elements (two sub-blocks) a step: the levels' signs
// move onto x (vpmaddubsw takes |level| <= 127 unsigned against x negated where the level is
// negative: no pair saturates), and vpmaddwd multiplies the int16 pair sums by the sub-block's scale
// - 32 (an int16 per pair) into int32. Exact integer sums as the 256-bit one; one float FMA per block.
float dot_iq4_xs(const std::byte* w, const std::byte* xr, int64_t k, const ActLayout& L) noexcept {
  const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const auto block = [&](__m512 acc, float dd, const int32_t* scale, const std::byte* qs, const int8_t* xq) noexcept {
    __m512i sumi = _mm512_setzero_si512();
    for (int j = 0; j < 8; j += 2) {
      // Sub-blocks j, j + 1: 128-bit lanes (j low nibbles, j high, j + 1 low, j + 1 high).
      const __m512i v = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 16 * j)));
      const __m512i twice = _mm512_shuffle_i64x2(v, v, 0x50);  // lanes 0, 0, 1, 1
      const __m512i idx = _mm512_mask_blend_epi64(0xcc, _mm512_and_si512(twice, low4),
                                                  _mm512_and_si512(_mm512_srli_epi16(twice, 4), low4));
      const __m512i level = _mm512_shuffle_epi8(table, idx);
      const __m512i x = _mm512_loadu_si512(xq + 32 * j);
      const __m512i x_signed = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(level), _mm512_setzero_si512(), x);
      const __m512i pairs = _mm512_maddubs_epi16(_mm512_abs_epi8(level), x_signed);
      const __m512i sc = _mm512_mask_blend_epi16(0xffff0000u, _mm512_set1_epi16(static_cast<int16_t>(scale[j])),
                                                 _mm512_set1_epi16(static_cast<int16_t>(scale[j + 1])));
      sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(pairs, sc));
    }
    return _mm512_fmadd_ps(_mm512_set1_ps(dd), _mm512_cvtepi32_ps(sumi), acc);
  };
  return _mm512_reduce_add_ps(iq4_xs_blocks(w, xr, k, L, _mm512_setzero_ps(), block));
}

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
