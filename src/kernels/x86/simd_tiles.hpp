// Register-tiled matmul for several activation rows (prefill): RW weight rows times RX activation
// rows per tile, RW * RX accumulators held in registers, so each weight block is decoded once for RX
// rows and each activation block loaded once for RW rows. Legacy formats (Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0) against Q8x32 activations go further: a tile's weight blocks are decoded once per call
// (DecodedRows) and reused by every group of activation rows; k_tiles.hpp does the same for the K
// formats. The one-row path (decode) stays in simd_int8.hpp's gemv. Included after simd_int8.hpp by the ISA units;
// internal linkage like it.
//
// The sums are the same exact integer block dot products as the one-row kernels, scaled per block in
// float; only the order of the float additions differs, so a row's result may differ from the
// one-row path's in the last bits.
#pragma once

#include <algorithm>

namespace skainet::kernels::x86 {
namespace {

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
    const __m256i first = D::quants(p);
    return blocks == 2 ? _mm512_inserti64x4(_mm512_castsi256_si512(first), D::quants(p + D::kBytes), 1)
                       : _mm512_zextsi256_si512(first);
  }
  static I activations(const int8_t* q, int blocks) noexcept {
    return _mm512_maskz_loadu_epi8(blocks == 2 ? ~__mmask64{0} : __mmask64{0xffffffff}, q);
  }
  static constexpr int kFloats = 16;
  static F set1(float a) noexcept { return _mm512_set1_ps(a); }
  static F load(const float* p) noexcept { return _mm512_loadu_ps(p); }
  static F fnma(F a, F b, F c) noexcept { return _mm512_fnmadd_ps(a, b, c); }
  static F halves(float a, float b) noexcept {
    return _mm512_castpd_ps(
        _mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(a)), _mm256_castps_pd(_mm256_set1_ps(b)), 1));
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
    if constexpr (!kSigned)
      return {q, _mm512_setzero_si512()};
    else
      return {q, _mm512_sub_epi32(_mm512_setzero_si512(),
                                  _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(-128), q))};
  }
  template <bool kSigned>
  static I prepare_x(I x) noexcept {
    if constexpr (!kSigned)
      return x;
    else
      return _mm512_xor_si512(x, _mm512_set1_epi8(-128));
  }
  template <bool kSigned>
  static I dot(const W& w, I x) noexcept {
    if constexpr (!kSigned)
      return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.q, x);
    else
      return _mm512_dpbusd_epi32(w.start, x, w.q);
  }
};
#else
struct Vec {
  static constexpr int kTileW = 2, kTileX = 4, kBlocks = 1;
  using I = __m256i;
  using F = __m256;
  static F zero() noexcept { return _mm256_setzero_ps(); }
  template <class D>
  static I weights(const std::byte* p, int) noexcept {
    return D::quants(p);
  }
  static I activations(const int8_t* q, int) noexcept { return loadu(q); }
  static constexpr int kFloats = 8;
  static F set1(float a) noexcept { return _mm256_set1_ps(a); }
  static F load(const float* p) noexcept { return _mm256_loadu_ps(p); }
  static F fnma(F a, F b, F c) noexcept { return _mm256_fnmadd_ps(a, b, c); }
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
    if constexpr (!kSigned)
      return {q, q};
    else
      return {_mm256_sign_epi8(q, q), q};
  }
  template <bool kSigned>
  static I prepare_x(I x) noexcept {
    return x;
  }
  template <bool kSigned>
  static I dot(const W& w, I x) noexcept {
    if constexpr (!kSigned)
      return mul_sum(w.q, x);
    else
      return mul_sum(w.q, _mm256_sign_epi8(x, w.sign));
  }
};
#endif

template <class D>
constexpr bool is_signed() noexcept {
  if constexpr (requires { D::kSigned; })
    return D::kSigned;
  else
    return false;
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

// A chunk's sums into out[j * out_row + i]: the first chunk of k stores, later ones add.
template <int RW, int RX>
void store_sums(const typename Vec::F (&acc)[RW][RX], float* out, int64_t out_row, bool first) noexcept {
  SKAINET_UNROLL
  for (int j = 0; j < RX; ++j) {
    SKAINET_UNROLL
    for (int i = 0; i < RW; ++i) {
      const float v = Vec::sum(acc[i][j]);
      float& o = out[j * out_row + i];
      o = first ? v : o + v;
    }
  }
}

// RW weight rows' blocks [b0, b0 + steps * kBlocks), decoded once: quants ready for the integer dot,
// per-block scales spread over their lanes, offset coefficients. Every group of x rows then reuses
// them, so a weight block is decoded once per matmul call instead of once per group (a chunk of
// kSteps steps stays in L1: 16-24 KiB with 4 rows on AVX-512).
template <int RW>
struct DecodedRows {
  static constexpr int64_t kSteps = 32;
  typename Vec::W q[kSteps][RW];
  typename Vec::F scale[kSteps][RW];
  alignas(32) float coef[RW][kSteps * Vec::kBlocks];
  int64_t b0 = 0, b1 = 0;  // the blocks held
};

template <class D, int RW>
void decode_rows(const std::byte* w, int64_t w_stride, int64_t b0, int64_t b1, DecodedRows<RW>& t) noexcept {
  constexpr bool kSigned = is_signed<D>();
  t.b0 = b0;
  t.b1 = b1;
  for (int64_t b = b0, step = 0; b < b1; b += Vec::kBlocks, ++step) {
    const int blocks = static_cast<int>(std::min<int64_t>(Vec::kBlocks, b1 - b));
    SKAINET_UNROLL
    for (int i = 0; i < RW; ++i) {
      const std::byte* p = w + i * w_stride + b * D::kBytes;
      const float s0 = block_scale<D>(p), s1 = blocks == 2 ? block_scale<D>(p + D::kBytes) : 0.0f;
      t.scale[step][i] = Vec::halves(s0, s1);
      t.q[step][i] = Vec::template prepare<kSigned>(Vec::template weights<D>(p, blocks));
      if constexpr (!kSigned) {
        t.coef[i][b - b0] = D::coef(p, s0);
        if (blocks == 2) t.coef[i][b - b0 + 1] = D::coef(p + D::kBytes, s1);
      }
    }
  }
}

// out[j * out_row + i] += dot over the decoded blocks of weight row i and x row j, i < RW, j < RX.
template <class D, int RW, int RX>
void multiply_rows(const DecodedRows<RW>& t, const std::byte* x, int64_t x_stride, const ActLayout& L, float* out,
                   int64_t out_row, bool first) noexcept {
  constexpr bool kSigned = is_signed<D>();
  typename Vec::F acc[RW][RX];
  SKAINET_UNROLL
  for (int i = 0; i < RW; ++i) {
    SKAINET_UNROLL
    for (int j = 0; j < RX; ++j) acc[i][j] = Vec::zero();
  }
  for (int64_t b = t.b0, step = 0; b < t.b1; b += Vec::kBlocks, ++step) {
    const int blocks = static_cast<int>(std::min<int64_t>(Vec::kBlocks, t.b1 - b));
    SKAINET_UNROLL
    for (int j = 0; j < RX; ++j) {
      const std::byte* xr = x + j * x_stride;
      const auto xq =
          Vec::template prepare_x<kSigned>(Vec::activations(reinterpret_cast<const int8_t*>(xr) + 32 * b, blocks));
      const float* d = reinterpret_cast<const float*>(xr + L.d_off) + b;
      const typename Vec::F dx = Vec::halves(d[0], blocks == 2 ? d[1] : 0.0f);
      SKAINET_UNROLL
      for (int i = 0; i < RW; ++i)
        acc[i][j] =
            Vec::fma(Vec::mul(t.scale[step][i], dx), Vec::cvt(Vec::template dot<kSigned>(t.q[step][i], xq)), acc[i][j]);
    }
  }
  SKAINET_UNROLL
  for (int j = 0; j < RX; ++j) {
    const float* ds = reinterpret_cast<const float*>(x + j * x_stride + L.s_off) + t.b0;
    SKAINET_UNROLL
    for (int i = 0; i < RW; ++i) {
      // The offset terms (coef * ds per block) as one float dot product over the chunk's blocks.
      float v = Vec::sum(acc[i][j]);
      if constexpr (!kSigned) v += dot_floats(t.coef[i], ds, t.b1 - t.b0);
      float& o = out[j * out_row + i];
      o = first ? v : o + v;
    }
  }
}

// The legacy formats' gemv contract for several x rows: per tile of RW weight rows and chunk of
// blocks, decode once, then multiply by the x rows RX at a time (the leftovers one at a time); partial
// sums of later chunks add into out. Leftover weight rows (rows % RW) take the one-row dot.
template <class D, DotFn Dot>
void gemm_legacy_rows(const Gemv& g) noexcept {
  if (g.n < 2 || g.out_col != 4) return gemv<Dot, Act::Q8x32>(g);
  constexpr int RW = Vec::kTileW, RX = Vec::kTileX;
  const ActLayout L = act_layout(Act::Q8x32, g.k);
  const int64_t nb = g.k / 32, rows_tiled = g.rows - g.rows % RW, out_row = g.out_row / 4;
  DecodedRows<RW> t;
  for (int64_t o = 0; o < rows_tiled; o += RW) {
    float* out = reinterpret_cast<float*>(g.out) + o;
    for (int64_t b0 = 0; b0 < nb; b0 += DecodedRows<RW>::kSteps * Vec::kBlocks) {
      decode_rows<D, RW>(g.w + o * g.w_stride, g.w_stride, b0,
                         std::min(nb, b0 + DecodedRows<RW>::kSteps * Vec::kBlocks), t);
      int64_t r = 0;
      for (; r + RX <= g.n; r += RX)
        multiply_rows<D, RW, RX>(t, g.x + r * g.x_stride, g.x_stride, L, out + r * out_row, out_row, b0 == 0);
      for (; r < g.n; ++r)
        multiply_rows<D, RW, 1>(t, g.x + r * g.x_stride, g.x_stride, L, out + r * out_row, out_row, b0 == 0);
    }
  }
  dot_rows<Dot>(g, rows_tiled, L);
}

using TileFn = void (*)(const std::byte*, int64_t, const std::byte*, int64_t, int64_t, const ActLayout&,
                        float*) noexcept;

// gemv's contract (isa.hpp) with full TW x TX tiles where they fit; the leftover weight rows and
// activation rows go through the one-row dot product.
template <TileFn Tile, int TW, int TX, DotFn Dot, Act A>
void gemm(const Gemv& g) noexcept {
  if (g.n < 2) return gemv<Dot, A>(g);
  const ActLayout L = act_layout(A, g.k);
  const auto store = [&](int64_t o, int64_t r, float v) noexcept {
    std::memcpy(g.out + r * g.out_row + o * g.out_col, &v, 4);
  };
  const int64_t rows_tiled = g.rows - g.rows % TW, n_tiled = g.n - g.n % TX;
  float t[TW * TX];
  for (int64_t o = 0; o < rows_tiled; o += TW) {
    const std::byte* w = g.w + o * g.w_stride;
    for (int64_t r = 0; r < n_tiled; r += TX) {
      Tile(w, g.w_stride, g.x + r * g.x_stride, g.x_stride, g.k, L, t);
      for (int i = 0; i < TW; ++i)
        for (int j = 0; j < TX; ++j) store(o + i, r + j, t[i * TX + j]);
    }
    for (int64_t r = n_tiled; r < g.n; ++r)
      for (int i = 0; i < TW; ++i) store(o + i, r, Dot(w + i * g.w_stride, g.x + r * g.x_stride, g.k, L));
  }
  for (int64_t o = rows_tiled; o < g.rows; ++o)
    for (int64_t r = 0; r < g.n; ++r) store(o, r, Dot(g.w + o * g.w_stride, g.x + r * g.x_stride, g.k, L));
}

// The table entries: legacy formats on Vec's tile (K formats: k_tiles.hpp).
template <class D, DotFn Dot>
constexpr GemvFn gemm_legacy = &gemm_legacy_rows<D, Dot>;

}  // namespace
}  // namespace skainet::kernels::x86
