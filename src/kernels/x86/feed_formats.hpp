// The kernel-feed formats as the x86 kernels read them (kernels/feed_layout.hpp has their layouts):
// each one's activation, group block and head sizes, and Q4_K's scale unpacking for 16 rows. Shared by
// the AVX2/AVX-512 feed kernels (feed_tiles.hpp) and the AMX tiles (matmul_amx.cpp); internal linkage
// like isa.hpp's helpers.
#pragma once

#include <immintrin.h>

#include <cstddef>

#include "kernels/feed_layout.hpp"
#include "kernels/x86/isa.hpp"
#include "skainet/core/blocks.hpp"

namespace skainet::kernels::x86 {
namespace {

// The formats (their layouts: kernels/feed_layout.hpp): the activation, bytes of one block of a
// 16-row group and of its 16 heads; for Q4_0/Q8_0 the shift that turns -sum(q_x) into the offset term.
struct FeedQ4_0 {
  static constexpr Act kAct = Act::Q8x32;
  static constexpr int64_t kElems = 32;
  static constexpr int64_t kGroupBlock = kInterleaveRows * sizeof(BlockQ4_0);
  static constexpr int64_t kHeadBytes = feed_heads_bytes(kFeedQ4_0);
  static constexpr int kOffsetShift = 3;  // quants are stored 0..15 for -8..7
};
struct FeedQ8_0 {
  static constexpr Act kAct = Act::Q8x32;
  static constexpr int64_t kElems = 32;
  static constexpr int64_t kGroupBlock = kInterleaveRows * sizeof(BlockQ8_0);
  static constexpr int64_t kHeadBytes = feed_heads_bytes(kFeedQ8_0);
  static constexpr int kOffsetShift = 7;  // quants are stored 0..255 for -128..127 (kFeedQ8_0.flip)
};
// Q4_K against Q8x256: a group block is the 16 rows' heads as 4 words each (d | dmin << 16, then
// the 12 bytes of packed 6-bit scales), 64-byte vectors of one word for 16 rows, then 32 quant chunks.
// Chunk c holds qs bytes 4c..4c+3: low nibbles are elements 64 (c / 8) + 4 (c % 8).. of sub-block
// 2 (c / 8), high nibbles the same 32 elements on, of sub-block 2 (c / 8) + 1.
struct FeedQ4_K {
  static constexpr Act kAct = Act::Q8x256;
  static constexpr int64_t kElems = 256;
  static constexpr int64_t kGroupBlock = kInterleaveRows * sizeof(BlockQ4_K);
  static constexpr int64_t kHeadBytes = feed_heads_bytes(kFeedQ4_K);
};

// Q6_K against Q8x256: a group block is the 16 rows' heads in 2-byte units (units 0..7: scales 2u,
// 2u + 1; unit 8: d), 32 bytes per unit, then 48 quant chunks: 32 of ql (chunk 16h + 8 (t & 1) + m:
// elements 128h + 32t + 4m.., low nibbles for t < 2, high for t >= 2) and 16 of qh (chunk 32 + 8h + m,
// bits 2t, 2t + 1 of the same elements).
struct FeedQ6_K {
  static constexpr Act kAct = Act::Q8x256;
  static constexpr int64_t kElems = 256;
  static constexpr int64_t kGroupBlock = kInterleaveRows * sizeof(BlockQ6_K);
  static constexpr int64_t kHeadBytes = feed_heads_bytes(kFeedQ6_K);
  static constexpr int64_t kD =
      kInterleaveRows * (offsetof(BlockQ6_K, d) - offsetof(BlockQ6_K, scales));  // d's head unit
  static constexpr int64_t kQhChunk = offsetof(BlockQ6_K, qh) / kFeedChunk;      // the first qh chunk
};

// The 6-bit scales and mins of 8 sub-blocks from Q4_K's three packed words (as k4_scales, here for
// a lane per row): sc0..3 | sc4..7 | mn0..3 | mn4..7, a byte per sub-block in each lane.
template <class I, class Ops>
inline void k4_scale_words(I s0, I s1, I s2, I (&out)[4]) noexcept {
  const I low6 = Ops::set1(0x3f3f3f3f), low4 = Ops::set1(0x0f0f0f0f), low2 = Ops::set1(0x03030303);
  out[0] = Ops::and_(s0, low6);
  out[1] = Ops::or_(Ops::and_(s2, low4), Ops::slli(Ops::and_(Ops::srli(s0, 6), low2), 4));
  out[2] = Ops::and_(s1, low6);
  out[3] = Ops::or_(Ops::and_(Ops::srli(s2, 4), low4), Ops::slli(Ops::and_(Ops::srli(s1, 6), low2), 4));
}

#if defined(__AVX512F__)

struct Ops512 {
  static __m512i set1(int v) noexcept { return _mm512_set1_epi32(v); }
  static __m512i and_(__m512i a, __m512i b) noexcept { return _mm512_and_si512(a, b); }
  static __m512i or_(__m512i a, __m512i b) noexcept { return _mm512_or_si512(a, b); }
  static __m512i srli(__m512i a, int n) noexcept { return _mm512_srli_epi32(a, n); }
  static __m512i slli(__m512i a, int n) noexcept { return _mm512_slli_epi32(a, n); }
};

// The heads of one Q4_K group block, a lane per row: d, dmin and the scale words (as k4_scale_words).
inline void feed_k4_heads(const std::byte* head, __m512& d, __m512& dmin, __m512i (&u)[4]) noexcept {
  const __m512i w0 = _mm512_loadu_si512(head);
  d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(w0));
  dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(w0, 16)));
  k4_scale_words<__m512i, Ops512>(_mm512_loadu_si512(head + 64), _mm512_loadu_si512(head + 128),
                                  _mm512_loadu_si512(head + 192), u);
}

// The 16 rows' sub-block scales of one Q4_K group block as floats, a lane per row: d * sc and dmin * mn.
inline void feed_k4_scales(const std::byte* head, __m512 (&dsc)[8], __m512 (&dmn)[8]) noexcept {
  __m512 d, dmin;
  __m512i u[4];
  feed_k4_heads(head, d, dmin, u);
  const __m512i byte = _mm512_set1_epi32(0xff);
  SKAINET_UNROLL
  for (int s = 0; s < 4; ++s) {
    const auto at = [&](__m512i v) noexcept {
      return _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(v, 8 * s), byte));
    };
    dsc[s] = _mm512_mul_ps(d, at(u[0]));
    dsc[4 + s] = _mm512_mul_ps(d, at(u[1]));
    dmn[s] = _mm512_mul_ps(dmin, at(u[2]));
    dmn[4 + s] = _mm512_mul_ps(dmin, at(u[3]));
  }
}

#endif

}  // namespace
}  // namespace skainet::kernels::x86
