// Matmul kernels for weights in the kernel-feed order BlockOrder::Interleaved16 (format.hpp; made by
// kernels::ref::repack_rows at load): Q4_0 and Q8_0 against Q8x32 activations, Q4_K and Q6_K against
// Q8x256; and Q4_K in file order against many x rows, through the same tiles (gemm_q4_k_as_feed, with
// k_tiles.hpp's K tiles for what it leaves). Included by the ISA units after simd_int8.hpp and
// k_tiles.hpp; internal linkage like them.
//
// Why the order pays: in file order one 32-element block of one row fills a register, so every block
// of every (weight row, activation row) pair ends in its own conversion, scale and horizontal work.
// Interleaved, one 32-bit lane holds 4 quants of one row and a 512-bit register 16 rows, so 8
// vpdpbusd (the activation's 4 bytes broadcast from memory) finish one block for 16 rows, and the
// conversion, the scale (16 row scales times the activation's) and the fused add are paid once per
// 16 rows. The offset of Q4_0 (-8) and of Q8_0's unsigned storage (+128, see repack.cpp) start the
// integer sum as -8 (or -128) times the activation block's quant sum, so the sum is exact.
// AVX2 runs the same layout as two 8-row halves on vpmaddubsw.
#pragma once

#include "kernels/x86/feed_formats.hpp"
#include "kernels/x86/simd_tiles.hpp"

namespace skainet::kernels::x86 {
namespace {

inline int32_t load_i32(const void* p) noexcept {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline int32_t bsum16_at(const std::byte* xr, const ActLayout& L, int64_t i) noexcept {
  int16_t v;
  std::memcpy(&v, xr + L.s_off + 2 * i, 2);
  return v;
}

// f.template operator()<h, t>() for the 8 quarters (h, t) of a Q6_K block, in order.
template <class F>
inline void each_quarter(const F& f) noexcept {
  f.template operator()<0, 0>(), f.template operator()<0, 1>(), f.template operator()<0, 2>(),
      f.template operator()<0, 3>();
  f.template operator()<1, 0>(), f.template operator()<1, 1>(), f.template operator()<1, 2>(),
      f.template operator()<1, 3>();
}

#if SKAINET_X86_VNNI

// The 8 weight vectors of one group block: vector c multiplies activation bytes 4c..4c+3 of the
// block. Q4_0: chunks 0..3 hold elements 4c.. (low nibbles) and 16 + 4c.. (high nibbles).
inline void feed_weights(FeedQ4_0, const std::byte* q, __m512i (&v)[8]) noexcept {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  SKAINET_UNROLL
  for (int c = 0; c < 4; ++c) {
    const __m512i w = _mm512_loadu_si512(q + 64 * c);
    v[c] = _mm512_and_si512(w, low4);
    v[4 + c] = _mm512_and_si512(_mm512_srli_epi16(w, 4), low4);
  }
}
inline void feed_weights(FeedQ8_0, const std::byte* q, __m512i (&v)[8]) noexcept {
  SKAINET_UNROLL
  for (int c = 0; c < 8; ++c) v[c] = _mm512_loadu_si512(q + 64 * c);
}

// acc[j][row] += dot(group row, x row j) over all blocks, for RX x rows.
template <class F, int RX>
void feed_tile(const std::byte* group, int64_t blocks, const std::byte* x, int64_t x_stride, const ActLayout& L,
               bool first, __m512 (&acc)[RX]) noexcept {
  SKAINET_UNROLL
  for (int j = 0; j < RX; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const std::byte* p = group + b * F::kGroupBlock;
    if (first) prefetch_ahead(p, F::kGroupBlock);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    __m512i v[8];
    feed_weights(F{}, p + F::kHeadBytes, v);
    SKAINET_UNROLL
    for (int j = 0; j < RX; ++j) {
      const std::byte* xr = x + j * x_stride;
      const std::byte* xq = xr + 32 * b;
      __m512i s = _mm512_slli_epi32(_mm512_set1_epi32(load_i32(xr + L.n_off + 4 * b)), F::kOffsetShift);
      SKAINET_UNROLL
      for (int c = 0; c < 8; ++c) s = _mm512_dpbusd_epi32(s, v[c], _mm512_set1_epi32(load_i32(xq + 4 * c)));
      float dx;
      std::memcpy(&dx, xr + L.d_off + 4 * b, 4);
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc[j]);
    }
  }
}

// acc[j][row] += dot(group row, x row j) for Q4_K: per sub-block 8 vpdpbusd for 16 rows, then one
// conversion and FMA with the rows' d * sc times the activation's d; the mins against dx * bsum.
template <int RX>
void feed_tile_q4_k(const std::byte* group, int64_t blocks, const std::byte* x, int64_t x_stride, const ActLayout& L,
                    __m512 (&acc)[RX]) noexcept {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  SKAINET_UNROLL
  for (int j = 0; j < RX; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const std::byte* p = group + b * FeedQ4_K::kGroupBlock;
    if constexpr (RX == 1) prefetch_ahead(p, FeedQ4_K::kGroupBlock);
    __m512 dsc[8], dmn[8];
    feed_k4_scales(p, dsc, dmn);
    SKAINET_UNROLL
    for (int j = 0; j < RX; ++j) {
      const float* ds16 = reinterpret_cast<const float*>(x + j * x_stride + L.ds16_off) + 16 * b;
      SKAINET_UNROLL
      for (int sb = 0; sb < 8; ++sb)
        acc[j] = _mm512_fnmadd_ps(dmn[sb], _mm512_set1_ps(ds16[2 * sb] + ds16[2 * sb + 1]), acc[j]);
    }
    const std::byte* q = p + FeedQ4_K::kHeadBytes;
    SKAINET_NO_UNROLL
    for (int sb = 0; sb < 8; ++sb) {
      const int g = sb / 2, shift = 4 * (sb % 2);
      __m512i v[8];
      SKAINET_UNROLL
      for (int c = 0; c < 8; ++c)
        v[c] = _mm512_and_si512(_mm512_srli_epi16(_mm512_loadu_si512(q + 64 * (8 * g + c)), shift), low4);
      SKAINET_UNROLL
      for (int j = 0; j < RX; ++j) {
        const std::byte* xr = x + j * x_stride;
        const std::byte* xq = xr + 256 * b + 32 * sb;
        __m512i s = _mm512_setzero_si512();
        SKAINET_UNROLL
        for (int c = 0; c < 8; ++c) s = _mm512_dpbusd_epi32(s, v[c], _mm512_set1_epi32(load_i32(xq + 4 * c)));
        float dx;
        std::memcpy(&dx, xr + L.d_off + 4 * b, 4);
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dsc[sb], _mm512_set1_ps(dx)), acc[j]);
      }
    }
  }
}

// acc[j][row] += dot(group row, x row j) for Q6_K: per 32 elements, the 16 rows' 6-bit quants rebuilt
// once (ql nibble | 2 qh bits), then per 16-element sub-block 4 vpdpbusd from -32 * the activation's
// sum of those 16 quants (exact), one conversion and FMA with d * sc times the activation's d.
template <int RX>
void feed_tile_q6_k(const std::byte* group, int64_t blocks, const std::byte* x, int64_t x_stride, const ActLayout& L,
                    __m512 (&acc)[RX]) noexcept {
  const __m512i low4 = _mm512_set1_epi8(0x0f), low2 = _mm512_set1_epi8(0x03);
  SKAINET_UNROLL
  for (int j = 0; j < RX; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const std::byte* p = group + b * FeedQ6_K::kGroupBlock;
    if constexpr (RX == 1) prefetch_ahead(p, FeedQ6_K::kGroupBlock);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + FeedQ6_K::kD)));
    __m512 dsc[16];
    SKAINET_UNROLL
    for (int u = 0; u < 8; ++u) {
      const __m512i v = _mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * u)));
      dsc[2 * u] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(v, 24), 24)));
      dsc[2 * u + 1] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(v, 16), 24)));
    }
    const std::byte* q = p + FeedQ6_K::kHeadBytes;
    // The block's sum per x row before its d_x: one FMA per sub-block instead of a multiply and an FMA.
    __m512 blk[RX];
    SKAINET_UNROLL
    for (int j = 0; j < RX; ++j) blk[j] = _mm512_setzero_ps();
    // h and t as constants: the nibble choice and the qh shift become immediates, no branches.
    const auto quarter = [&]<int h, int t>() noexcept {
      __m512i v[8];
      SKAINET_UNROLL
      for (int m = 0; m < 8; ++m) {
        const __m512i ql = _mm512_loadu_si512(q + 64 * (16 * h + 8 * (t & 1) + m));
        const __m512i qh = _mm512_loadu_si512(q + 64 * (FeedQ6_K::kQhChunk + 8 * h + m));
        const __m512i nib = _mm512_and_si512(t < 2 ? ql : _mm512_srli_epi16(ql, 4), low4);  // constant t
        v[m] = _mm512_or_si512(nib, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 2 * t), low2), 4));
      }
      const int sb = 8 * h + 2 * t;  // the sub-blocks of chunks 0..3 and 4..7
      SKAINET_UNROLL
      for (int j = 0; j < RX; ++j) {
        const std::byte* xr = x + j * x_stride;
        const std::byte* xq = xr + 256 * b + 32 * (4 * h + t);
        SKAINET_UNROLL
        for (int half = 0; half < 2; ++half) {
          __m512i s = _mm512_set1_epi32(-32 * bsum16_at(xr, L, 16 * b + sb + half));
          SKAINET_UNROLL
          for (int m = 4 * half; m < 4 * half + 4; ++m)
            s = _mm512_dpbusd_epi32(s, v[m], _mm512_set1_epi32(load_i32(xq + 4 * m)));
          blk[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), dsc[sb + half], blk[j]);
        }
      }
    };
    each_quarter(quarter);
    SKAINET_UNROLL
    for (int j = 0; j < RX; ++j) {
      float dx;
      std::memcpy(&dx, x + j * x_stride + L.d_off + 4 * b, 4);
      acc[j] = _mm512_fmadd_ps(blk[j], _mm512_set1_ps(dx), acc[j]);
    }
  }
}

template <int RX>
void store_tile(const __m512 (&acc)[RX], const Gemv& g, int64_t o, int64_t r) noexcept {
  SKAINET_UNROLL
  for (int j = 0; j < RX; ++j) {
    std::byte* dst = g.out + (r + j) * g.out_row + o * g.out_col;
    if (g.out_col == 4) {
      _mm512_storeu_ps(dst, acc[j]);
    } else {
      alignas(64) float t[16];
      _mm512_store_ps(t, acc[j]);
      for (int i = 0; i < 16; ++i) std::memcpy(dst + i * g.out_col, &t[i], 4);
    }
  }
}

template <class F>
constexpr int kFeedRx = 8;  // x rows per tile: 8 accumulators + 8 weight vectors fit the 32 registers

#else  // AVX2: two halves of 8 rows, vpmaddubsw

// Half h's weight vectors of one group block, unsigned, for vpmaddubsw against signed activations.
// Q8_0's are signed again (xor 0x80) and multiplied as |w| times x carrying w's sign, as in file order.
inline void feed_weights(FeedQ4_0, const std::byte* q, int h, __m256i (&v)[8]) noexcept {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  SKAINET_UNROLL
  for (int c = 0; c < 4; ++c) {
    const __m256i w = loadu(q + 64 * c + 32 * h);
    v[c] = _mm256_and_si256(w, low4);
    v[4 + c] = _mm256_and_si256(_mm256_srli_epi16(w, 4), low4);
  }
}
inline void feed_weights(FeedQ8_0, const std::byte* q, int h, __m256i (&v)[8]) noexcept {
  SKAINET_UNROLL
  for (int c = 0; c < 8; ++c)
    v[c] = _mm256_xor_si256(loadu(q + 64 * c + 32 * h), _mm256_set1_epi8(static_cast<char>(0x80)));
}

// The block's integer sums for 8 rows: Q4_0's pair sums stay below 2 * 15 * 127, so the 8 chunks add
// up in 16 bits (at most 30480) before one vpmaddwd; then the -8 offset term.
inline __m256i feed_block_sums(FeedQ4_0, const __m256i (&v)[8], const std::byte* xq, int32_t nsum) noexcept {
  __m256i s16 = _mm256_maddubs_epi16(v[0], _mm256_set1_epi32(load_i32(xq)));
  SKAINET_UNROLL
  for (int c = 1; c < 8; ++c)
    s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(v[c], _mm256_set1_epi32(load_i32(xq + 4 * c))));
  return _mm256_add_epi32(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)),
                          _mm256_slli_epi32(_mm256_set1_epi32(nsum), FeedQ4_0::kOffsetShift));
}
inline __m256i feed_block_sums(FeedQ8_0, const __m256i (&v)[8], const std::byte* xq, int32_t) noexcept {
  __m256i s = _mm256_setzero_si256();
  SKAINET_UNROLL
  for (int c = 0; c < 8; ++c) s = _mm256_add_epi32(s, mul_sum_s8(v[c], _mm256_set1_epi32(load_i32(xq + 4 * c))));
  return s;
}

// Half h of one block for RX x rows: its 8 weight vectors unpacked once, used for every x row.
template <class F, int RX>
inline void feed_half(const std::byte* p, int h, int64_t b, const std::byte* x, int64_t x_stride, const ActLayout& L,
                      __m256 (&acc)[RX]) noexcept {
  const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * h)));
  __m256i v[8];
  feed_weights(F{}, p + F::kHeadBytes, h, v);
  SKAINET_UNROLL
  for (int j = 0; j < RX; ++j) {
    const std::byte* xr = x + j * x_stride;
    const __m256i s = feed_block_sums(F{}, v, xr + 32 * b, load_i32(xr + L.n_off + 4 * b));
    float dx;
    std::memcpy(&dx, xr + L.d_off + 4 * b, 4);
    acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(dx)), acc[j]);
  }
}

// Up to 2 x rows: both halves per block, the group read once. From 4 x rows on, one half over all
// blocks and then the other: 8 weight vectors + RX accumulators stay in the 16 registers (both
// halves' accumulators live at once spill), and the second half reads the group from L1/L2.
// `first`: the group's first tile, which streams it from memory and asks for it ahead (the hardware
// prefetcher stops at each 4 KiB page).
template <class F, int RX>
void feed_tile(const std::byte* group, int64_t blocks, const std::byte* x, int64_t x_stride, const ActLayout& L,
               bool first, __m256 (&acc)[2][RX]) noexcept {
  SKAINET_UNROLL
  for (int h = 0; h < 2; ++h) {
    SKAINET_UNROLL
    for (int j = 0; j < RX; ++j) acc[h][j] = _mm256_setzero_ps();
  }
  if constexpr (RX < 4) {
    for (int64_t b = 0; b < blocks; ++b) {
      const std::byte* p = group + b * F::kGroupBlock;
      if (first) prefetch_ahead(p, F::kGroupBlock);
      feed_half<F, RX>(p, 0, b, x, x_stride, L, acc[0]);
      feed_half<F, RX>(p, 1, b, x, x_stride, L, acc[1]);
    }
  } else {
    SKAINET_UNROLL
    for (int h = 0; h < 2; ++h) {
      // Local accumulators: acc[h] indexed at run time would keep them in memory, each FMA waiting
      // on a store and a reload.
      __m256 a[RX];
      SKAINET_UNROLL
      for (int j = 0; j < RX; ++j) a[j] = _mm256_setzero_ps();
      for (int64_t b = 0; b < blocks; ++b) {
        const std::byte* p = group + b * F::kGroupBlock;
        if (first && h == 0) prefetch_ahead(p, F::kGroupBlock);
        feed_half<F, RX>(p, h, b, x, x_stride, L, a);
      }
      SKAINET_UNROLL
      for (int j = 0; j < RX; ++j) acc[h][j] = a[j];
    }
  }
}

struct Ops256 {
  static __m256i set1(int v) noexcept { return _mm256_set1_epi32(v); }
  static __m256i and_(__m256i a, __m256i b) noexcept { return _mm256_and_si256(a, b); }
  static __m256i or_(__m256i a, __m256i b) noexcept { return _mm256_or_si256(a, b); }
  static __m256i srli(__m256i a, int n) noexcept { return _mm256_srli_epi32(a, n); }
  static __m256i slli(__m256i a, int n) noexcept { return _mm256_slli_epi32(a, n); }
};

// 8 F16 values, the low (shift 0) or high (16) halves of 8 words.
inline __m256 halves_of(__m256i words, int shift) noexcept {
  const __m256i v = _mm256_and_si256(_mm256_srli_epi32(words, shift), _mm256_set1_epi32(0xffff));
  return _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

// Half h (rows 8h..8h+7) of a Q4_K group block's sub-block scales as floats: d * sc and dmin * mn.
inline void feed_k4_scales(const std::byte* head, int h, __m256 (&dsc)[8], __m256 (&dmn)[8]) noexcept {
  const __m256i w0 = loadu(head + 32 * h);
  const __m256 d = halves_of(w0, 0), dmin = halves_of(w0, 16);
  __m256i u[4];
  k4_scale_words<__m256i, Ops256>(loadu(head + 64 + 32 * h), loadu(head + 128 + 32 * h), loadu(head + 192 + 32 * h), u);
  const __m256i byte = _mm256_set1_epi32(0xff);
  SKAINET_UNROLL
  for (int s = 0; s < 4; ++s) {
    const auto at = [&](__m256i v) noexcept {
      return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v, 8 * s), byte));
    };
    dsc[s] = _mm256_mul_ps(d, at(u[0]));
    dsc[4 + s] = _mm256_mul_ps(d, at(u[1]));
    dmn[s] = _mm256_mul_ps(dmin, at(u[2]));
    dmn[4 + s] = _mm256_mul_ps(dmin, at(u[3]));
  }
}

// Q4_K for two halves of 8 rows: per sub-block the 8 chunks' pair sums add up in 16 bits (at most
// 8 * 2 * 15 * 127 = 30480) before one vpmaddwd, as for Q4_0.
template <int RX>
void feed_tile_q4_k(const std::byte* group, int64_t blocks, const std::byte* x, int64_t x_stride, const ActLayout& L,
                    __m256 (&acc)[2][RX]) noexcept {
  const __m256i low4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
  SKAINET_UNROLL
  for (int h = 0; h < 2; ++h) {
    SKAINET_UNROLL
    for (int j = 0; j < RX; ++j) acc[h][j] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const std::byte* p = group + b * FeedQ4_K::kGroupBlock;
    if constexpr (RX == 1) prefetch_ahead(p, FeedQ4_K::kGroupBlock);
    const std::byte* q = p + FeedQ4_K::kHeadBytes;
    SKAINET_UNROLL
    for (int h = 0; h < 2; ++h) {
      __m256 dsc[8], dmn[8];
      feed_k4_scales(p, h, dsc, dmn);
      SKAINET_UNROLL
      for (int j = 0; j < RX; ++j) {
        const float* ds16 = reinterpret_cast<const float*>(x + j * x_stride + L.ds16_off) + 16 * b;
        SKAINET_UNROLL
        for (int sb = 0; sb < 8; ++sb)
          acc[h][j] = _mm256_fnmadd_ps(dmn[sb], _mm256_set1_ps(ds16[2 * sb] + ds16[2 * sb + 1]), acc[h][j]);
      }
      SKAINET_NO_UNROLL
      for (int sb = 0; sb < 8; ++sb) {
        const int g = sb / 2, shift = 4 * (sb % 2);
        __m256i v[8];
        SKAINET_UNROLL
        for (int c = 0; c < 8; ++c)
          v[c] = _mm256_and_si256(_mm256_srli_epi16(loadu(q + 64 * (8 * g + c) + 32 * h), shift), low4);
        SKAINET_UNROLL
        for (int j = 0; j < RX; ++j) {
          const std::byte* xr = x + j * x_stride;
          const std::byte* xq = xr + 256 * b + 32 * sb;
          __m256i s16 = _mm256_maddubs_epi16(v[0], _mm256_set1_epi32(load_i32(xq)));
          SKAINET_UNROLL
          for (int c = 1; c < 8; ++c)
            s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(v[c], _mm256_set1_epi32(load_i32(xq + 4 * c))));
          float dx;
          std::memcpy(&dx, xr + L.d_off + 4 * b, 4);
          acc[h][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s16, ones)),
                                      _mm256_mul_ps(dsc[sb], _mm256_set1_ps(dx)), acc[h][j]);
        }
      }
    }
  }
}

// Q6_K for two halves of 8 rows. Pair sums reach 2 * 63 * 127 = 16002, so two chunks add up in 16
// bits before each vpmaddwd.
template <int RX>
void feed_tile_q6_k(const std::byte* group, int64_t blocks, const std::byte* x, int64_t x_stride, const ActLayout& L,
                    __m256 (&acc)[2][RX]) noexcept {
  const __m256i low4 = _mm256_set1_epi8(0x0f), low2 = _mm256_set1_epi8(0x03), ones = _mm256_set1_epi16(1);
  SKAINET_UNROLL
  for (int h2 = 0; h2 < 2; ++h2) {
    SKAINET_UNROLL
    for (int j = 0; j < RX; ++j) acc[h2][j] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const std::byte* p = group + b * FeedQ6_K::kGroupBlock;
    if constexpr (RX == 1) prefetch_ahead(p, FeedQ6_K::kGroupBlock);
    const std::byte* q = p + FeedQ6_K::kHeadBytes;
    SKAINET_UNROLL
    for (int rh = 0; rh < 2; ++rh) {  // rows 8 rh .. 8 rh + 7
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + FeedQ6_K::kD + 16 * rh)));
      __m256 dsc[16];
      SKAINET_UNROLL
      for (int u = 0; u < 8; ++u) {
        const __m256i v =
            _mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32 * u + 16 * rh)));
        dsc[2 * u] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(v, 24), 24)));
        dsc[2 * u + 1] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(v, 16), 24)));
      }
      const auto quarter = [&]<int h, int t>() noexcept {
        __m256i v[8];
        SKAINET_UNROLL
        for (int m = 0; m < 8; ++m) {
          const __m256i ql = loadu(q + 64 * (16 * h + 8 * (t & 1) + m) + 32 * rh);
          const __m256i qh = loadu(q + 64 * (FeedQ6_K::kQhChunk + 8 * h + m) + 32 * rh);
          const __m256i nib = _mm256_and_si256(t < 2 ? ql : _mm256_srli_epi16(ql, 4), low4);
          v[m] = _mm256_or_si256(nib, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * t), low2), 4));
        }
        const int sb = 8 * h + 2 * t;
        SKAINET_UNROLL
        for (int j = 0; j < RX; ++j) {
          const std::byte* xr = x + j * x_stride;
          const std::byte* xq = xr + 256 * b + 32 * (4 * h + t);
          float dx;
          std::memcpy(&dx, xr + L.d_off + 4 * b, 4);
          SKAINET_UNROLL
          for (int half = 0; half < 2; ++half) {
            const auto pair = [&](int m) noexcept {
              return _mm256_add_epi16(_mm256_maddubs_epi16(v[m], _mm256_set1_epi32(load_i32(xq + 4 * m))),
                                      _mm256_maddubs_epi16(v[m + 1], _mm256_set1_epi32(load_i32(xq + 4 * m + 4))));
            };
            __m256i s = _mm256_set1_epi32(-32 * bsum16_at(xr, L, 16 * b + sb + half));
            s = _mm256_add_epi32(s, _mm256_madd_epi16(pair(4 * half), ones));
            s = _mm256_add_epi32(s, _mm256_madd_epi16(pair(4 * half + 2), ones));
            acc[rh][j] =
                _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dsc[sb + half], _mm256_set1_ps(dx)), acc[rh][j]);
          }
        }
      };
      each_quarter(quarter);
    }
  }
}

template <int RX>
void store_tile(const __m256 (&acc)[2][RX], const Gemv& g, int64_t o, int64_t r) noexcept {
  SKAINET_UNROLL
  for (int j = 0; j < RX; ++j) {
    std::byte* dst = g.out + (r + j) * g.out_row + o * g.out_col;
    alignas(32) float t[16];
    _mm256_store_ps(t, acc[0][j]);
    _mm256_store_ps(t + 8, acc[1][j]);
    if (g.out_col == 4)
      std::memcpy(dst, t, sizeof t);
    else
      for (int i = 0; i < 16; ++i) std::memcpy(dst + i * g.out_col, &t[i], 4);
  }
}

// x rows per tile: Q4_0 and Q8_0 run one half at a time (8 weight vectors + 4 accumulators in 16
// registers). Q4_K at 4 rows spills but still pays its scale unpacking half as often (n 4 and 16
// 1.3x, n 128 1.15x on one thread); Q6_K at 4 rows was no faster, so it stays at 2. (AVX2 reads
// Q6_K faster in file order, so it is not offered there: avx_unit.hpp; this tile reads a Q6_K
// weight repacked elsewhere, e.g. an exported module's.)
template <class F>
constexpr int kFeedRx = std::is_same_v<F, FeedQ6_K> ? 2 : 4;

#endif

template <class F, int RX>
void feed_tile_store(const Gemv& g, const std::byte* group, int64_t blocks, int64_t o, int64_t r,
                     const ActLayout& L) noexcept {
#if SKAINET_X86_VNNI
  __m512 acc[RX];
#else
  __m256 acc[2][RX];
#endif
  if constexpr (std::is_same_v<F, FeedQ4_K>)
    feed_tile_q4_k<RX>(group, blocks, g.x + r * g.x_stride, g.x_stride, L, acc);
  else if constexpr (std::is_same_v<F, FeedQ6_K>)
    feed_tile_q6_k<RX>(group, blocks, g.x + r * g.x_stride, g.x_stride, L, acc);
  else
    feed_tile<F, RX>(group, blocks, g.x + r * g.x_stride, g.x_stride, L, r == 0, acc);
  store_tile<RX>(acc, g, o, r);
}

// The leftover x rows of a group (fewer than kFeedRx), one tile width at a time.
template <class F, int RX>
void feed_rest(const Gemv& g, const std::byte* group, int64_t blocks, int64_t o, int64_t r,
               const ActLayout& L) noexcept {
  if constexpr (RX > 0) {
    if (g.n - r >= RX) {
      feed_tile_store<F, RX>(g, group, blocks, o, r, L);
      r += RX;
    }
    feed_rest<F, RX / 2>(g, group, blocks, o, r, L);
  }
}

// gemv's contract (isa.hpp) for an Interleaved16 weight: g.w is a group's first row (or a row of the
// row-major tail), so whole groups come first and the rows left over are the tail, read by the
// file-order dot product `Dot`.
template <class F, DotFn Dot>
void gemm_feed(const Gemv& g) noexcept {
  const ActLayout L = act_layout(F::kAct, g.k);
  const int64_t blocks = g.k / F::kElems;
  constexpr int64_t R = kInterleaveRows;
  int64_t o = 0;
  for (; o + R <= g.rows; o += R) {
    const std::byte* group = g.w + o * g.w_stride;
    int64_t r = 0;
    for (; r + kFeedRx<F> <= g.n; r += kFeedRx<F>) feed_tile_store<F, kFeedRx<F>>(g, group, blocks, o, r, L);
    feed_rest<F, kFeedRx<F> / 2>(g, group, blocks, o, r, L);
  }
  dot_rows<Dot>(g, o, L);
}

// The first eight 32-bit words of eight rows (row i at src + i * stride) transposed: word j of the
// eight rows, side by side, to dst + j * dst_stride.
inline void transpose_words_8x8(const std::byte* src, int64_t stride, std::byte* dst, int64_t dst_stride) noexcept {
  __m256i r[8], t[8];
  SKAINET_UNROLL
  for (int i = 0; i < 8; ++i) r[i] = loadu(src + i * stride);
  SKAINET_UNROLL
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);      // words 0, 1 | 4, 5 of rows i, i + 1
    t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);  // words 2, 3 | 6, 7
  }
  SKAINET_UNROLL
  for (int i = 0; i < 8; i += 4)
    for (int h = 0; h < 2; ++h) {
      r[i + 2 * h] = _mm256_unpacklo_epi64(t[i + h], t[i + h + 2]);      // word 2h | 2h + 4 of rows i..i + 3
      r[i + 2 * h + 1] = _mm256_unpackhi_epi64(t[i + h], t[i + h + 2]);  // word 2h + 1 | 2h + 5
    }
  SKAINET_UNROLL
  for (int j = 0; j < 4; ++j) {
    store32(dst + j * dst_stride, _mm256_permute2x128_si256(r[j], r[j + 4], 0x20));
    store32(dst + (j + 4) * dst_stride, _mm256_permute2x128_si256(r[j], r[j + 4], 0x31));
  }
}

// 16 Q4_K rows in file order (row r at src + r * stride) into one feed-order group of `blocks`
// blocks, as ref::repack_rows writes it (feed_layout.hpp): a row's block is 36 words (the d|dmin
// word, three words of scales, 32 quant chunks) and word j of row r goes to (16 j + r) * 4, so each
// block is a 16 x 36 transpose of words: eight-by-eight ones, the last overlapping (words 28..35).
// The reference's word-by-word copy was a tenth of moe7b's prefill.
inline void group_q4_k_to_feed(const std::byte* src, int64_t stride, int64_t blocks, std::byte* dst) noexcept {
  static_assert(kFeedQ4_K.head_unit == kFeedChunk && !kFeedQ4_K.head_last && kFeedQ4_K.flip == 0);
  constexpr int64_t kWords = sizeof(BlockQ4_K) / 4, kR = kInterleaveRows;
  static_assert(kWords * 4 == kFeedQ4_K.head_bytes + kFeedQ4_K.quant_bytes && kWords >= 8);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t r0 = 0; r0 < kR; r0 += 8)
      for (int64_t j = 0; j < kWords; j += 8) {
        const int64_t j0 = std::min(j, kWords - 8);  // 0, 8, 16, 24, then 28
        transpose_words_8x8(src + r0 * stride + b * static_cast<int64_t>(sizeof(BlockQ4_K)) + 4 * j0, stride,
                            dst + b * FeedQ4_K::kGroupBlock + (kR * j0 + r0) * 4, kR * 4);
      }
}

// Q4_K in file order against many x rows (prefill through a row-major weight: an expert's slice of
// a 3-D stack, or a weight the plan left unpacked): each 16-row group is put into the feed order on
// the stack (18 KiB at k 2048) and multiplied by the feed tiles, the repack shared by every x row.
// The K tiles' decoded form costs a vpmaddwd per 32 elements of one row, the feed tile one per 32
// elements of eight rows. On one AVX2 thread (bench_matmul_bench, k 2048, 2048 rows): n 128 15.1 ->
// 10.3 ms, n 16 even, n 4 0.59 -> 0.80 ms (the repack unshared), hence kMinRows. (Q6_K keeps its K
// tiles: see kFeedRx.) Rows past the last group, fewer x rows, or more blocks than the buffer holds
// take the K tiles.
inline void gemm_q4_k_as_feed(const Gemv& g) noexcept {
  constexpr int64_t R = kInterleaveRows, kMaxBlocks = 16, kMinRows = 16;
  const int64_t blocks = g.k / FeedQ4_K::kElems;
  if (g.n < kMinRows || g.out_col != 4 || blocks > kMaxBlocks || g.w_stride != blocks * int64_t{sizeof(BlockQ4_K)})
    return gemm_k_rows<Q4_KDecode, &dot_q4_k, KStep>(g);
  alignas(64) std::byte group[kMaxBlocks * FeedQ4_K::kGroupBlock];
  int64_t o = 0;
  for (; o + R <= g.rows; o += R) {
    group_q4_k_to_feed(g.w + o * g.w_stride, g.w_stride, blocks, group);
    Gemv one = weight_rows(g, o, R);
    one.w = group;
    gemm_feed<FeedQ4_K, &dot_q4_k>(one);
  }
  if (o < g.rows) gemm_k_rows<Q4_KDecode, &dot_q4_k, KStep>(weight_rows(g, o, g.rows - o));
}

}  // namespace
}  // namespace skainet::kernels::x86
