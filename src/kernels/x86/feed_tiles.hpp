// Matmul kernels for weights in the kernel-feed order BlockOrder::Interleaved16 (format.hpp; made by
// kernels::ref::repack_rows at load): Q4_0 and Q8_0 against Q8x32 activations. Included by the ISA
// units after simd_int8.hpp; internal linkage like it.
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

#include "kernels/x86/simd_tiles.hpp"

namespace skainet::kernels::x86 {
namespace {

inline int32_t load_i32(const void* p) noexcept {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The two formats: bytes of one block of one row, and of one block of a 16-row group (16 F16
// scales, then the quants in 4-byte chunks across the rows); the shift that turns -sum(q_x) into the
// offset term.
struct FeedQ4_0 {
  static constexpr int64_t kRowBlock = sizeof(BlockQ4_0);
  static constexpr int64_t kGroupBlock = kInterleaveRows * kRowBlock;
  static constexpr int kOffsetShift = 3;  // quants are stored 0..15 for -8..7
};
struct FeedQ8_0 {
  static constexpr int64_t kRowBlock = sizeof(BlockQ8_0);
  static constexpr int64_t kGroupBlock = kInterleaveRows * kRowBlock;
  static constexpr int kOffsetShift = 7;  // quants are stored 0..255 for -128..127
};

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
               __m512 (&acc)[RX]) noexcept {
  SKAINET_UNROLL
  for (int j = 0; j < RX; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const std::byte* p = group + b * F::kGroupBlock;
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    __m512i v[8];
    feed_weights(F{}, p + 2 * kInterleaveRows, v);
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
  for (int c = 0; c < 8; ++c) v[c] = _mm256_xor_si256(loadu(q + 64 * c + 32 * h), _mm256_set1_epi8(static_cast<char>(0x80)));
}

// The block's integer sums for 8 rows: Q4_0's pair sums stay below 2 * 15 * 127, so the 8 chunks add
// up in 16 bits (at most 30480) before one vpmaddwd; then the -8 offset term.
inline __m256i feed_block_sums(FeedQ4_0, const __m256i (&v)[8], const std::byte* xq, int32_t nsum) noexcept {
  __m256i s16 = _mm256_maddubs_epi16(v[0], _mm256_set1_epi32(load_i32(xq)));
  SKAINET_UNROLL
  for (int c = 1; c < 8; ++c) s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(v[c], _mm256_set1_epi32(load_i32(xq + 4 * c))));
  return _mm256_add_epi32(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)),
                          _mm256_slli_epi32(_mm256_set1_epi32(nsum), FeedQ4_0::kOffsetShift));
}
inline __m256i feed_block_sums(FeedQ8_0, const __m256i (&v)[8], const std::byte* xq, int32_t) noexcept {
  __m256i s = _mm256_setzero_si256();
  SKAINET_UNROLL
  for (int c = 0; c < 8; ++c) s = _mm256_add_epi32(s, mul_sum_s8(v[c], _mm256_set1_epi32(load_i32(xq + 4 * c))));
  return s;
}

template <class F, int RX>
void feed_tile(const std::byte* group, int64_t blocks, const std::byte* x, int64_t x_stride, const ActLayout& L,
               __m256 (&acc)[2][RX]) noexcept {
  SKAINET_UNROLL
  for (int h = 0; h < 2; ++h)
    SKAINET_UNROLL
    for (int j = 0; j < RX; ++j) acc[h][j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const std::byte* p = group + b * F::kGroupBlock;
    SKAINET_UNROLL
    for (int h = 0; h < 2; ++h) {
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * h)));
      __m256i v[8];
      feed_weights(F{}, p + 2 * kInterleaveRows, h, v);
      SKAINET_UNROLL
      for (int j = 0; j < RX; ++j) {
        const std::byte* xr = x + j * x_stride;
        const __m256i s = feed_block_sums(F{}, v, xr + 32 * b, load_i32(xr + L.n_off + 4 * b));
        float dx;
        std::memcpy(&dx, xr + L.d_off + 4 * b, 4);
        acc[h][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(dx)), acc[h][j]);
      }
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
    if (g.out_col == 4) std::memcpy(dst, t, sizeof t);
    else
      for (int i = 0; i < 16; ++i) std::memcpy(dst + i * g.out_col, &t[i], 4);
  }
}

constexpr int kFeedRx = 2;  // x rows per tile: 8 weight vectors + 2 x 2 accumulators in 16 registers

#endif

template <class F, int RX>
void feed_tile_store(const Gemv& g, const std::byte* group, int64_t blocks, int64_t o, int64_t r,
                     const ActLayout& L) noexcept {
#if SKAINET_X86_VNNI
  __m512 acc[RX];
#else
  __m256 acc[2][RX];
#endif
  feed_tile<F, RX>(group, blocks, g.x + r * g.x_stride, g.x_stride, L, acc);
  store_tile<RX>(acc, g, o, r);
}

// The leftover x rows of a group (fewer than kFeedRx), one tile width at a time.
template <class F, int RX>
void feed_rest(const Gemv& g, const std::byte* group, int64_t blocks, int64_t o, int64_t r, const ActLayout& L) noexcept {
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
  const ActLayout L = act_layout(Act::Q8x32, g.k);
  const int64_t blocks = g.k / 32;
  constexpr int64_t R = kInterleaveRows;
  int64_t o = 0;
  for (; o + R <= g.rows; o += R) {
    const std::byte* group = g.w + o * g.w_stride;
    int64_t r = 0;
    for (; r + kFeedRx <= g.n; r += kFeedRx) feed_tile_store<F, kFeedRx>(g, group, blocks, o, r, L);
    feed_rest<F, kFeedRx / 2>(g, group, blocks, o, r, L);
  }
  for (; o < g.rows; ++o)
    for (int64_t r = 0; r < g.n; ++r) {
      const float v = Dot(g.w + o * g.w_stride, g.x + r * g.x_stride, g.k, L);
      std::memcpy(g.out + r * g.out_row + o * g.out_col, &v, 4);
    }
}

}  // namespace
}  // namespace skainet::kernels::x86
