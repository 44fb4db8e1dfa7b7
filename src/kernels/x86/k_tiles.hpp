// K formats (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) against several Q8x256 activation rows (prefill), each weight block
// decoded once per matmul call, as simd_tiles.hpp does for the legacy formats. Decoding a K block
// (6-bit scales unpacked, nibbles split, fifth or high bits merged) costs more than the products it
// feeds for one activation row; done once per call it is shared by every row of the prompt.
// Included after simd_tiles.hpp by the ISA units; internal linkage like it. Q2_K's and Q3_K's decoders
// live with their one-row dots (simd_q23_k.hpp), which share their bit and scale unpacking.
//
// The decoded form is the same for the five formats, so one multiply serves them:
//   w[e] = d * sc[e / 2] * q[e] - m[e / 16]      (q unsigned, sc an int16 per pair of elements)
// Q4_K/Q5_K: sc = the 6-bit scale of e's 32-element sub-block, m = dmin * its 6-bit min.
// Q6_K:      sc = the int8 scale of e's 16-element sub-block, m = 32 * d * that scale (the -32 offset).
// Q2_K:      q = 2 bits, sc = the 4-bit scale of e's 16-element sub-block, m = dmin * its 4-bit min.
// Q3_K:      q = 2 bits + 4 * the hmask bit (so 0..7 for the signed -4..3), sc = its 6-bit scale - 32,
//            m = 4 * d * sc (the -4 offset).
// The dot with an activation row (x[e] = dx * qx[e] per block of 256) is then
//   d * dx * sum_e(sc * q * qx)  -  sum_t(m[t] * dx * bsum16[t]),
// the first an exact integer sum per block on vpmaddubsw + vpmaddwd (the scale rides vpmaddwd, as
// in the one-row dots), the second a float dot product against the activation's ds16 (dx * bsum16,
// stored once per row by quantize_q8x256). No pair saturates vpmaddubsw: q <= 63, |qx| <= 127.
// IQ4_XS (AVX-512 VNNI only, KStepWide): q = its signed level + 128 (up to 241), sc = its 6-bit
//            scale - 32 per 32-element sub-block, m = 128 * d * sc (the +128 offset).
#pragma once

#include <algorithm>

namespace skainet::kernels::x86 {
namespace {

// The integer products of one step of a tile (32 or 64 elements): q x qx pair sums times sc, one
// Scale per kElemsPerScale elements.
#if SKAINET_X86_VNNI
struct KStep {
  static constexpr int kElems = 64, kTileW = 2, kTileX = 4, kElemsPerScale = 2;
  using I = __m512i;
  using Scale = int16_t;
  static I load(const void* p) noexcept { return _mm512_loadu_si512(p); }
  static I zero() noexcept { return _mm512_setzero_si512(); }
  static I add(I a, I b) noexcept { return _mm512_add_epi32(a, b); }
  static I scaled_dot(I q, I x, I sc) noexcept { return _mm512_madd_epi16(_mm512_maddubs_epi16(q, x), sc); }
};
// For q up to 255 (IQ4_XS's levels + 128), where vpmaddubsw's int16 pairs would saturate: vpdpbusd
// sums four products straight into int32, and the scale (one int32 per four elements) multiplies
// those. A block's sum stays within int32: 4 steps x 4 x 255 x 127 x 32.
struct KStepWide : KStep {
  static constexpr int kElemsPerScale = 4;
  using Scale = int32_t;
  static I scaled_dot(I q, I x, I sc) noexcept { return _mm512_mullo_epi32(_mm512_dpbusd_epi32(zero(), q, x), sc); }
};
#else
struct KStep {
  static constexpr int kElems = 32, kTileW = 2, kTileX = 2, kElemsPerScale = 2;
  using I = __m256i;
  using Scale = int16_t;
  static I load(const void* p) noexcept { return loadu(p); }
  static I zero() noexcept { return _mm256_setzero_si256(); }
  static I add(I a, I b) noexcept { return _mm256_add_epi32(a, b); }
  static I scaled_dot(I q, I x, I sc) noexcept { return mul_sum_scaled(q, x, sc); }
};
#endif

// RW weight rows' blocks [b0, b1) in the decoded form (about 18 KiB for 2 rows: stays in L1 while
// every group of activation rows passes over it).
template <class S, int RW>
struct DecodedK {
  static constexpr int64_t kBlocks = 16, kScales = 256 / S::kElemsPerScale;  // kScales per block
  alignas(64) uint8_t q[RW][kBlocks * 256];
  alignas(64) typename S::Scale sc[RW][kBlocks * kScales];
  alignas(64) float m[RW][kBlocks * 16];
  float d[RW][kBlocks];
  int64_t b0 = 0, b1 = 0;
};

inline void store32(void* p, __m256i v) noexcept { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }

// One Q4_K (kFifthBit false) or Q5_K block into the decoded form; q, sc, m point at the block's part.
template <bool kFifthBit>
void decode_q45_k(const std::byte* p, uint8_t* q, int16_t* sc, float* m, float& d) noexcept {
  using Block = std::conditional_t<kFifthBit, BlockQ5_K, BlockQ4_K>;
  const __m256i low4 = _mm256_set1_epi8(0x0f), sixteen = _mm256_set1_epi8(0x10);
  uint32_t u[4];
  k4_scales(p + offsetof(Block, scales), u);
  uint8_t s[8], mn[8];
  std::memcpy(s, u, 8);
  std::memcpy(mn, u + 2, 8);
  d = half_at(p + offsetof(Block, d));
  const float dmin = half_at(p + offsetof(Block, dmin));
  __m256i hbits = _mm256_setzero_si256();
  if constexpr (kFifthBit) hbits = loadu(p + offsetof(BlockQ5_K, qh));
  for (int c = 0; c < 4; ++c) {  // elements 64c .. 64c + 63: sub-blocks 2c (low nibbles), 2c + 1 (high)
    const __m256i v = loadu(p + offsetof(Block, qs) + 32 * c);
    __m256i lo = _mm256_and_si256(v, low4);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    if constexpr (kFifthBit) {  // as in dot_q45_k
      lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(hbits, 4), sixteen));
      hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(hbits, 3), sixteen));
      hbits = _mm256_srli_epi16(hbits, 2);
    }
    store32(q + 64 * c, lo);
    store32(q + 64 * c + 32, hi);
    store32(sc + 32 * c, scale1(s[2 * c]));
    store32(sc + 32 * c + 16, scale1(s[2 * c + 1]));
  }
  for (int t = 0; t < 16; ++t) m[t] = dmin * static_cast<float>(mn[t / 2]);
}

// One Q6_K block into the decoded form (the quants rebuilt as in dot_q6_k).
void decode_q6_k(const std::byte* p, uint8_t* q, int16_t* sc, float* m, float& d) noexcept {
  const __m256i low4 = _mm256_set1_epi8(0x0f), bits45 = _mm256_set1_epi8(0x30);
  int8_t s[16];
  std::memcpy(s, p + offsetof(BlockQ6_K, scales), 16);
  d = half_at(p + offsetof(BlockQ6_K, d));
  for (int h = 0; h < 2; ++h) {
    const std::byte* ql = p + offsetof(BlockQ6_K, ql) + 64 * h;
    const __m256i qa = loadu(ql), qb = loadu(ql + 32), qh = loadu(p + offsetof(BlockQ6_K, qh) + 32 * h);
    uint8_t* o = q + 128 * h;
    store32(o, _mm256_or_si256(_mm256_and_si256(qa, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45)));
    store32(o + 32, _mm256_or_si256(_mm256_and_si256(qb, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45)));
    store32(o + 64, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), low4), _mm256_and_si256(qh, bits45)));
    store32(o + 96, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), low4),
                                    _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45)));
  }
  for (int t = 0; t < 16; t += 2) store32(sc + 8 * t, scale2(s[t], s[t + 1]));
  for (int t = 0; t < 16; ++t) m[t] = 32.0f * d * static_cast<float>(s[t]);
}

struct Q4_KDecode {
  static constexpr int64_t kBytes = sizeof(BlockQ4_K);
  static void block(const std::byte* p, uint8_t* q, int16_t* sc, float* m, float& d) noexcept {
    decode_q45_k<false>(p, q, sc, m, d);
  }
};
struct Q5_KDecode {
  static constexpr int64_t kBytes = sizeof(BlockQ5_K);
  static void block(const std::byte* p, uint8_t* q, int16_t* sc, float* m, float& d) noexcept {
    decode_q45_k<true>(p, q, sc, m, d);
  }
};
struct Q6_KDecode {
  static constexpr int64_t kBytes = sizeof(BlockQ6_K);
  static void block(const std::byte* p, uint8_t* q, int16_t* sc, float* m, float& d) noexcept {
    decode_q6_k(p, q, sc, m, d);
  }
};

template <class D, class S, int RW>
void decode_k_rows(const std::byte* w, int64_t w_stride, int64_t b0, int64_t b1, DecodedK<S, RW>& t) noexcept {
  t.b0 = b0;
  t.b1 = b1;
  constexpr int64_t kScales = DecodedK<S, RW>::kScales;
  for (int i = 0; i < RW; ++i)
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t j = b - b0;
      D::block(w + i * w_stride + b * D::kBytes, t.q[i] + 256 * j, t.sc[i] + kScales * j, t.m[i] + 16 * j, t.d[i][j]);
    }
}

// out[j * out_row + i] (+)= dot over the decoded blocks of weight row i and x row j, i < RW, j < RX:
// integer sums per block, one conversion and FMA per block and pair, then the min terms.
template <class S, int RW, int RX>
void multiply_k_rows(const DecodedK<S, RW>& t, const std::byte* x, int64_t x_stride, const ActLayout& L, float* out,
                     int64_t out_row, bool first) noexcept {
  constexpr int64_t kScales = DecodedK<S, RW>::kScales;
  typename Vec::F acc[RW][RX];
  SKAINET_UNROLL
  for (int i = 0; i < RW; ++i) {
    SKAINET_UNROLL
    for (int j = 0; j < RX; ++j) acc[i][j] = Vec::zero();
  }
  for (int64_t b = t.b0; b < t.b1; ++b) {
    const int64_t jb = b - t.b0;
    typename S::I sumi[RW][RX];
    SKAINET_UNROLL
    for (int i = 0; i < RW; ++i) {
      SKAINET_UNROLL
      for (int j = 0; j < RX; ++j) sumi[i][j] = S::zero();
    }
    SKAINET_NO_UNROLL  // unrolled, the steps' loads are hoisted and the accumulators spill
        for (int e = 0; e < 256; e += S::kElems) {
      typename S::I q[RW];
      SKAINET_UNROLL
      for (int i = 0; i < RW; ++i) q[i] = S::load(t.q[i] + 256 * jb + e);
      SKAINET_UNROLL
      for (int j = 0; j < RX; ++j) {
        const typename S::I xv = S::load(reinterpret_cast<const int8_t*>(x + j * x_stride) + 256 * b + e);
        SKAINET_UNROLL
        for (int i = 0; i < RW; ++i)
          sumi[i][j] =
              S::add(sumi[i][j], S::scaled_dot(q[i], xv, S::load(t.sc[i] + kScales * jb + e / S::kElemsPerScale)));
      }
    }
    SKAINET_UNROLL
    for (int j = 0; j < RX; ++j) {
      const float dx = reinterpret_cast<const float*>(x + j * x_stride + L.d_off)[b];
      SKAINET_UNROLL
      for (int i = 0; i < RW; ++i) acc[i][j] = Vec::fma(Vec::cvt(sumi[i][j]), Vec::set1(t.d[i][jb] * dx), acc[i][j]);
    }
  }
  // The min terms into the same accumulators: RW * RX independent FMA chains (one float dot
  // product per pair would wait on its own latency).
  for (int64_t e = 0; e < 16 * (t.b1 - t.b0); e += Vec::kFloats) {
    SKAINET_UNROLL
    for (int j = 0; j < RX; ++j) {
      const typename Vec::F xs =
          Vec::load(reinterpret_cast<const float*>(x + j * x_stride + L.ds16_off) + 16 * t.b0 + e);
      SKAINET_UNROLL
      for (int i = 0; i < RW; ++i) acc[i][j] = Vec::fnma(Vec::load(t.m[i] + e), xs, acc[i][j]);
    }
  }
  store_sums<RW, RX>(acc, out, out_row, first);
}

// gemv's contract (isa.hpp) for the K formats: per tile of RW weight rows and chunk of blocks, decode
// once, then multiply by the x rows RX at a time (the leftovers one at a time); leftover weight rows
// (rows % RW) and single x rows (decode) take the one-row dot.
template <class D, DotFn Dot, class S>
void gemm_k_rows(const Gemv& g) noexcept {
  if (g.n < 2 || g.out_col != 4) return gemv<Dot, Act::Q8x256>(g);
  constexpr int RW = S::kTileW, RX = S::kTileX;
  constexpr int64_t kChunk = DecodedK<S, RW>::kBlocks;
  const ActLayout L = act_layout(Act::Q8x256, g.k);
  const int64_t nb = g.k / 256, rows_tiled = g.rows - g.rows % RW, out_row = g.out_row / 4;
  DecodedK<S, RW> t;
  for (int64_t o = 0; o < rows_tiled; o += RW) {
    float* out = reinterpret_cast<float*>(g.out) + o;
    for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
      decode_k_rows<D, S, RW>(g.w + o * g.w_stride, g.w_stride, b0, std::min(nb, b0 + kChunk), t);
      int64_t r = 0;
      for (; r + RX <= g.n; r += RX)
        multiply_k_rows<S, RW, RX>(t, g.x + r * g.x_stride, g.x_stride, L, out + r * out_row, out_row, b0 == 0);
      for (; r < g.n; ++r)
        multiply_k_rows<S, RW, 1>(t, g.x + r * g.x_stride, g.x_stride, L, out + r * out_row, out_row, b0 == 0);
    }
  }
  dot_rows<Dot>(g, rows_tiled, L);
}

template <class D, DotFn Dot, class S = KStep>
constexpr GemvFn gemm_k = &gemm_k_rows<D, Dot, S>;

}  // namespace
}  // namespace skainet::kernels::x86
