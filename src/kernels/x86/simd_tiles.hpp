// Register-tiled matmul for several activation rows (prefill): RW weight rows times RX activation
// rows per tile, so each weight block is decoded once for RX rows and each activation block loaded
// once for RW rows, with RW * RX accumulators held in registers. Legacy formats (Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0) against Q8x32 activations; the one-row path (decode) stays in simd_int8.hpp's gemv.
// Included after simd_int8.hpp by the ISA units; internal linkage like it.
//
// The sums are the same exact integer block dot products as the one-row kernels, scaled per block in
// float; only the order of the float additions differs, so a row's result may differ from the
// one-row path's in the last bits.
#pragma once

#include <algorithm>

namespace skainet::kernels::x86 {
namespace {

// The tile loops must be fully unrolled for the accumulators to live in registers (GCC keeps an array
// of vectors in memory otherwise).
#define SKAINET_UNROLL _Pragma("GCC unroll 16")

// The vector a tile step works on: one 32-element block per 256-bit register (AVX2), or two
// consecutive blocks per 512-bit register (AVX-512: half the instructions per multiply-add). Per
// (weight row, activation row) pair and step the cost is one integer dot, one conversion, one scale
// multiply and one fused add; decoding weights and loading activations is shared across the tile.
//
// Signed weights (Q8_0): AVX2 multiplies |w| by x carrying w's sign; AVX-512 VNNI adds 128 to x (an
// unsigned byte) and starts the integer sum at -128 * (w summed per lane), which cancels it exactly.
#if SKAINET_X86_VNNI
struct Vec {
  static constexpr int kTileW = 4, kTileX = 4, kBlocks = 2;
  using I = __m512i;
  using F = __m512;
  static F zero() noexcept { return _mm512_setzero_ps(); }
  // Two (or, at the tail, one) blocks' quants of a weight row; the missing half reads as zeros.
  template <class D>
  static I weights(const std::byte* p, int blocks) noexcept {
    const I lo = _mm512_castsi256_si512(D::quants(p));
    return blocks == 2 ? _mm512_inserti64x4(lo, D::quants(p + D::kBytes), 1) : _mm512_zextsi256_si512(D::quants(p));
  }
  static I activations(const int8_t* q, int blocks) noexcept {
    return _mm512_maskz_loadu_epi8(blocks == 2 ? ~__mmask64{0} : __mmask64{0xffffffff}, q);
  }
  static F halves(float a, float b) noexcept {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(a)), _mm256_castps_pd(_mm256_set1_ps(b)), 1));
  }
  static F fma(F a, F b, F c) noexcept { return _mm512_fmadd_ps(a, b, c); }
  static F mul(F a, F b) noexcept { return _mm512_mul_ps(a, b); }
  static F cvt(I v) noexcept { return _mm512_cvtepi32_ps(v); }
  // Through memory: GCC 12's _mm512_reduce_add_ps, extract and cast intrinsics warn -Wuninitialized
  // when inlined here. Once per tile element and row, so the store costs nothing measurable.
  static float sum(F v) noexcept {
    alignas(64) float t[16];
    _mm512_store_ps(t, v);
    return hsum(_mm256_add_ps(_mm256_load_ps(t), _mm256_load_ps(t + 8)));
  }
  struct W {
    I q, start;
  };
  template <bool kSigned>
  static W prepare(I q) noexcept {
    if constexpr (!kSigned) return {q, _mm512_setzero_si512()};
    else return {q, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(-128), q))};
  }
  template <bool kSigned>
  static I prepare_x(I x) noexcept {
    if constexpr (!kSigned) return x;
    else return _mm512_xor_si512(x, _mm512_set1_epi8(-128));
  }
  template <bool kSigned>
  static I dot(const W& w, I x) noexcept {
    if constexpr (!kSigned) return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.q, x);
    else return _mm512_dpbusd_epi32(w.start, x, w.q);
  }
};
#else
struct Vec {
  static constexpr int kTileW = 2, kTileX = 4, kBlocks = 1;
  using I = __m256i;
  using F = __m256;
  static F zero() noexcept { return _mm256_setzero_ps(); }
  template <class D>
  static I weights(const std::byte* p, int) noexcept { return D::quants(p); }
  static I activations(const int8_t* q, int) noexcept { return loadu(q); }
  static F halves(float a, float) noexcept { return _mm256_set1_ps(a); }
  static F fma(F a, F b, F c) noexcept { return _mm256_fmadd_ps(a, b, c); }
  static F mul(F a, F b) noexcept { return _mm256_mul_ps(a, b); }
  static F cvt(I v) noexcept { return _mm256_cvtepi32_ps(v); }
  static float sum(F v) noexcept { return hsum(v); }
  struct W {
    I q, sign;
  };
  template <bool kSigned>
  static W prepare(I q) noexcept {
    if constexpr (!kSigned) return {q, q};
    else return {_mm256_sign_epi8(q, q), q};
  }
  template <bool kSigned>
  static I prepare_x(I x) noexcept {
    return x;
  }
  template <bool kSigned>
  static I dot(const W& w, I x) noexcept {
    if constexpr (!kSigned) return mul_sum(w.q, x);
    else return mul_sum(w.q, _mm256_sign_epi8(x, w.sign));
  }
};
#endif
constexpr int kTileW = Vec::kTileW, kTileX = Vec::kTileX;

// Q8_0 as a "decoder" for the tile: signed quants, no offset term.
struct Q8_0Dec {
  static constexpr int64_t kBytes = sizeof(BlockQ8_0);
  static constexpr bool kSigned = true;
  static __m256i quants(const std::byte* b) noexcept { return loadu(b + 2); }
};

template <class D>
constexpr bool is_signed() noexcept {
  if constexpr (requires { D::kSigned; }) return D::kSigned;
  else return false;
}

// sum_b a[b] * b_[b] over n floats.
inline float dot_floats(const float* a, const float* b, int64_t n) noexcept {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return hsum(acc) + tail;
}

// out[i * RX + j] = dot(weight row i, activation row j) for i < RW, j < RX.
template <class D, int RW, int RX>
void tile_legacy(const std::byte* w, int64_t w_stride, const std::byte* x, int64_t x_stride, int64_t k,
                 const ActLayout& L, float* out) noexcept {
  constexpr bool kSigned = is_signed<D>();
  constexpr bool kOffset = !kSigned;  // unsigned quants: x_w = scale * q + coef
  // The offset terms (coef * ds per block) are float dot products over blocks, done per chunk of
  // blocks after the integer loop rather than as scalars inside it.
  constexpr int64_t kChunk = 128;
  const int64_t nb = k / 32;
  typename Vec::F acc[RW][RX];
  float offset[RW][RX] = {};
  alignas(32) float coef[RW][kOffset ? kChunk : 1];
  SKAINET_UNROLL
  for (int i = 0; i < RW; ++i)
    SKAINET_UNROLL
    for (int j = 0; j < RX; ++j) acc[i][j] = Vec::zero();
  for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
    const int64_t b1 = std::min(nb, b0 + kChunk);
    for (int64_t b = b0; b < b1; b += Vec::kBlocks) {
      const int blocks = static_cast<int>(std::min<int64_t>(Vec::kBlocks, b1 - b));
      typename Vec::W wq[RW];
      typename Vec::F ws[RW];
      SKAINET_UNROLL
      for (int i = 0; i < RW; ++i) {
        const std::byte* p = w + i * w_stride + b * D::kBytes;
        const float s0 = half_at(p), s1 = blocks == 2 ? half_at(p + D::kBytes) : 0.0f;
        ws[i] = Vec::halves(s0, s1);
        wq[i] = Vec::template prepare<kSigned>(Vec::template weights<D>(p, blocks));
        if constexpr (kOffset) {
          coef[i][b - b0] = D::coef(p, s0);
          if (blocks == 2) coef[i][b - b0 + 1] = D::coef(p + D::kBytes, s1);
        }
      }
      SKAINET_UNROLL
      for (int j = 0; j < RX; ++j) {
        const std::byte* xr = x + j * x_stride;
        const auto xq = Vec::template prepare_x<kSigned>(Vec::activations(reinterpret_cast<const int8_t*>(xr) + 32 * b, blocks));
        const float* d = reinterpret_cast<const float*>(xr + L.d_off) + b;
        const typename Vec::F dx = Vec::halves(d[0], blocks == 2 ? d[1] : 0.0f);
        SKAINET_UNROLL
        for (int i = 0; i < RW; ++i)
          acc[i][j] = Vec::fma(Vec::mul(ws[i], dx), Vec::cvt(Vec::template dot<kSigned>(wq[i], xq)), acc[i][j]);
      }
    }
    if constexpr (kOffset)
      SKAINET_UNROLL
      for (int j = 0; j < RX; ++j) {
        const float* ds = reinterpret_cast<const float*>(x + j * x_stride + L.s_off) + b0;
        SKAINET_UNROLL
        for (int i = 0; i < RW; ++i) offset[i][j] += dot_floats(coef[i], ds, b1 - b0);
      }
  }
  SKAINET_UNROLL
  for (int i = 0; i < RW; ++i)
    SKAINET_UNROLL
    for (int j = 0; j < RX; ++j) out[i * RX + j] = Vec::sum(acc[i][j]) + offset[i][j];
}

// gemv's contract (isa.hpp) with full tiles where they fit; the leftover weight rows and activation
// rows go through the one-row dot product.
template <class D, DotFn Dot>
void gemm_legacy(const Gemv& g) noexcept {
  if (g.n < 2) return gemv<Dot, Act::Q8x32>(g);
  const ActLayout L = act_layout(Act::Q8x32, g.k);
  const auto store = [&](int64_t o, int64_t r, float v) noexcept { std::memcpy(g.out + r * g.out_row + o * g.out_col, &v, 4); };
  const int64_t rows_tiled = g.rows - g.rows % kTileW, n_tiled = g.n - g.n % kTileX;
  float t[kTileW * kTileX];
  for (int64_t o = 0; o < rows_tiled; o += kTileW) {
    const std::byte* w = g.w + o * g.w_stride;
    for (int64_t r = 0; r < n_tiled; r += kTileX) {
      tile_legacy<D, kTileW, kTileX>(w, g.w_stride, g.x + r * g.x_stride, g.x_stride, g.k, L, t);
      for (int i = 0; i < kTileW; ++i)
        for (int j = 0; j < kTileX; ++j) store(o + i, r + j, t[i * kTileX + j]);
    }
    for (int64_t r = n_tiled; r < g.n; ++r)
      for (int i = 0; i < kTileW; ++i) store(o + i, r, Dot(w + i * g.w_stride, g.x + r * g.x_stride, g.k, L));
  }
  for (int64_t o = rows_tiled; o < g.rows; ++o)
    for (int64_t r = 0; r < g.n; ++r) store(o, r, Dot(g.w + o * g.w_stride, g.x + r * g.x_stride, g.k, L));
}

}  // namespace
}  // namespace skainet::kernels::x86
