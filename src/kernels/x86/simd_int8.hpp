// The 8-bit activation quantizers and the packed-weight dot products on 256-bit vectors, shared by
// the ISA units. The including unit defines SKAINET_X86_VNNI (1: vpdpbusd from AVX512-VNNI/VL,
// 0: AVX2 vpmaddubsw + vpmaddwd) and is compiled with the matching -m flags. Everything has internal
// linkage (see isa.hpp for why).
//
// Every dot product is an exact integer sum over a block of unsigned weight quants times signed
// activation quants, scaled once per block in float. vpmaddubsw saturates pairs at int16: weight
// quants here are at most 63 (or |w| <= 128 against |x| <= 127 for Q8_0), so no pair exceeds
// 2 * 128 * 127 = 32512 and nothing saturates.
#pragma once

#ifndef SKAINET_X86_VNNI
#error "define SKAINET_X86_VNNI before including simd_int8.hpp"
#endif

#include <immintrin.h>

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "kernels/x86/block_scales.hpp"
#include "kernels/x86/isa.hpp"
#include "skainet/core/blocks.hpp"

namespace skainet::kernels::x86 {
namespace {

// ---- small helpers ----

inline float hsum(__m256 v) noexcept {
  __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  a = _mm_add_ps(a, _mm_movehl_ps(a, a));
  a = _mm_add_ss(a, _mm_movehdup_ps(a));
  return _mm_cvtss_f32(a);
}

inline int hsum_i32(__m256i v) noexcept {
  __m128i a = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  a = _mm_add_epi32(a, _mm_shuffle_epi32(a, 0x4e));
  a = _mm_add_epi32(a, _mm_shuffle_epi32(a, 0xb1));
  return _mm_cvtsi128_si32(a);
}

inline float hmax(__m256 v) noexcept {
  __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  a = _mm_max_ps(a, _mm_movehl_ps(a, a));
  a = _mm_max_ss(a, _mm_movehdup_ps(a));
  return _mm_cvtss_f32(a);
}

inline __m256i loadu(const void* p) noexcept { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// ---- the u8 x s8 primitive: int32 lane i = sum of bytes 4i..4i+3 products (times a lane scale) ----

#if SKAINET_X86_VNNI
inline __m256i mul_sum(__m256i u, __m256i s) noexcept { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
#else
inline __m256i mul_sum(__m256i u, __m256i s) noexcept {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
#endif

// Scaled sums (the K formats' sub-block scales) on both levels: the int16 pair sums times an int16
// scale, pairwise added, so the scale rides the vpmaddwd; measured faster than vpdpbusd followed by
// vpmulld. sc from scale1 (one scale) or scale2 (bytes 0..15 get sc0, bytes 16..31 sc1).
inline __m256i scale1(int sc) noexcept { return _mm256_set1_epi16(static_cast<short>(sc)); }
inline __m256i scale2(int sc0, int sc1) noexcept {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(sc1)), _mm_set1_epi16(static_cast<short>(sc0)));
}
inline __m256i mul_sum_scaled(__m256i u, __m256i s, __m256i sc) noexcept {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), sc);
}

// Scales already in a vector (int16 lanes), splat by vpshufb: one shuffle a sub-block instead of
// scale1/scale2's extract, move and broadcast (the one-row Q4_K dot 10.3 -> 13.0 GB/s in L2/L3 on Zen 3,
// Q6_K 12.7 -> 14.8). one[j] copies int16 lane j of each 128-bit half to all eight of its lanes.
// pair[i] copies lane 2i to the low half and lane 2i + 1 to the high half (Q6_K's scale pairs).
struct alignas(32) Int16LaneSplat {
  uint8_t one[8][32];
  uint8_t pair[4][32];
  constexpr Int16LaneSplat() : one{}, pair{} {
    for (int j = 0; j < 8; ++j)
      for (int b = 0; b < 32; ++b) one[j][b] = static_cast<uint8_t>(2 * j + b % 2);
    for (int i = 0; i < 4; ++i)
      for (int b = 0; b < 32; ++b) pair[i][b] = static_cast<uint8_t>(2 * (2 * i + b / 16) + b % 2);
  }
};
inline constexpr Int16LaneSplat kInt16LaneSplat{};
inline __m256i splat_int16_lane(__m256i v, int j) noexcept {
  return _mm256_shuffle_epi8(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(kInt16LaneSplat.one[j])));
}
inline __m256i splat_int16_pair(__m256i v, int i) noexcept {
  return _mm256_shuffle_epi8(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(kInt16LaneSplat.pair[i])));
}

// Signed x signed through the unsigned primitive: |w| times x carrying w's sign.
inline __m256i mul_sum_s8(__m256i w, __m256i x) noexcept {
  return mul_sum(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

// ---- activation quantizers ----

// 32 floats -> 32 int8 (round to nearest even, the MXCSR default) times `mul`; returns their sum.
inline int quantize32(const float* x, __m256 mul, int8_t* q, int* sum16_lo, int* sum16_hi) noexcept {
  const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), mul));
  const __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), mul));
  const __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), mul));
  const __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), mul));
  const int lo = hsum_i32(_mm256_add_epi32(i0, i1));
  const int hi = hsum_i32(_mm256_add_epi32(i2, i3));
  if (sum16_lo) *sum16_lo = lo;
  if (sum16_hi) *sum16_hi = hi;
  // packs interleave the 128-bit lanes; the permute puts the 4-byte groups back in order.
  __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
  p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), p);
  return lo + hi;
}

// max |x[i]| over n floats (n a multiple of 8).
inline float abs_max(const float* x, int n) noexcept {
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_loadu_ps(x + i)));
  return hmax(m);
}

// x in blocks of kBlock floats, as an activation row at dst (act_layout L): for block b (floats p),
// `block(b, p, amax, mul, q, d)` writes its quants q and scale d, given its absolute maximum and the
// multiplier 127 / amax (0 for a block of zeros).
template <int kBlock, class Block>
void quantize_blocks(const float* x, int64_t k, std::byte* dst, const ActLayout& L, Block&& block) noexcept {
  auto* qs = reinterpret_cast<int8_t*>(dst);
  auto* d = reinterpret_cast<float*>(dst + L.d_off);
  for (int64_t b = 0; b < k / kBlock; ++b) {
    const float* p = x + kBlock * b;
    const float amax = abs_max(p, kBlock);
    block(b, p, amax, _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f), qs + kBlock * b, d[b]);
  }
}

void quantize_q8x32(const float* x, int64_t k, std::byte* dst) noexcept {
  const ActLayout L = act_layout(Act::Q8x32, k);
  auto* ds = reinterpret_cast<float*>(dst + L.s_off);
  auto* nsum = reinterpret_cast<int32_t*>(dst + L.n_off);
  quantize_blocks<32>(x, k, dst, L, [&](int64_t b, const float* p, float amax, __m256 mul, int8_t* q, float& d) {
    const int sum = quantize32(p, mul, q, nullptr, nullptr);
    // As llama.cpp's Q8_0 activation blocks: the scale stored as F16. Keeping it in F32 is more exact
    // but shifts every dot product by up to 2^-11 relative against the peer, enough to flip a greedy
    // token now and then. d * sum uses the same rounded d, so the offset terms of Q4_0/Q5_0 stay
    // exactly (q - 8) * q8 sums.
    d = _cvtsh_ss(_cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT));
    ds[b] = d * static_cast<float>(sum);
    nsum[b] = -sum;
  });
}

void quantize_q8x256(const float* x, int64_t k, std::byte* dst) noexcept {
  const ActLayout L = act_layout(Act::Q8x256, k);
  auto* bsums = reinterpret_cast<int16_t*>(dst + L.s_off);
  auto* ds16 = reinterpret_cast<float*>(dst + L.ds16_off);
  quantize_blocks<256>(x, k, dst, L, [&](int64_t b, const float* p, float amax, __m256 mul, int8_t* q, float& d) {
    int16_t* sums = bsums + 16 * b;
    for (int j = 0; j < 8; ++j) {
      int lo, hi;
      quantize32(p + 32 * j, mul, q + 32 * j, &lo, &hi);
      sums[2 * j] = static_cast<int16_t>(lo);
      sums[2 * j + 1] = static_cast<int16_t>(hi);
    }
    d = amax / 127.0f;
    for (int t = 0; t < 16; ++t) ds16[16 * b + t] = d * static_cast<float>(sums[t]);
  });
}

// ---- legacy formats against Q8x32 ----

// A prepared activation row as the dots read it (isa.hpp's ActLayout): the quants, the block scales
// and the sums, Sum per block of 32 (Q8x32: float d * sum(q)) or per 16 (Q8x256: int16 sum(q)).
template <class Sum>
struct ActRow {
  const int8_t* q;
  const float* d;
  const Sum* sums;
};
template <class Sum>
ActRow<Sum> act_row(const std::byte* row, const ActLayout& L) noexcept {
  return {reinterpret_cast<const int8_t*>(row), reinterpret_cast<const float*>(row + L.d_off),
          reinterpret_cast<const Sum*>(row + L.s_off)};
}

using Act32 = ActRow<float>;
inline Act32 act32(const std::byte* row, const ActLayout& L) noexcept { return act_row<float>(row, L); }

// 16 bytes of nibbles -> 32 quants: low nibbles are elements 0..15, high nibbles 16..31.
inline __m256i nibbles32(const std::byte* p) noexcept {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0f));
}

// Bit j of the 32-bit word -> 0x10 in byte j (the fifth bit of Q5_0/Q5_1 quants).
inline __m256i fifth_bits(const std::byte* p) noexcept {
  uint32_t qh;
  std::memcpy(&qh, p, 4);
  __m256i v = _mm256_set1_epi32(static_cast<int>(qh));
  v = _mm256_shuffle_epi8(v, _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(0x10));
}

// A legacy block as unsigned quants q and x_w = scale * q + coef: the block's dot with the
// activation is scale * dx * sum(q * qx) + coef * ds.
struct Q4_0Dec {
  static constexpr int64_t kBytes = sizeof(BlockQ4_0);
  static __m256i quants(const std::byte* b) noexcept { return nibbles32(b + 2); }
  static float coef(const std::byte*, float scale) noexcept { return -8.0f * scale; }
};
struct Q4_1Dec {
  static constexpr int64_t kBytes = sizeof(BlockQ4_1);
  static __m256i quants(const std::byte* b) noexcept { return nibbles32(b + 4); }
  static float coef(const std::byte* b, float) noexcept { return half_at(b + 2); }
};
struct Q5_0Dec {
  static constexpr int64_t kBytes = sizeof(BlockQ5_0);
  static __m256i quants(const std::byte* b) noexcept { return _mm256_or_si256(nibbles32(b + 6), fifth_bits(b + 2)); }
  static float coef(const std::byte*, float scale) noexcept { return -16.0f * scale; }
};
struct Q5_1Dec {
  static constexpr int64_t kBytes = sizeof(BlockQ5_1);
  static __m256i quants(const std::byte* b) noexcept { return _mm256_or_si256(nibbles32(b + 8), fifth_bits(b + 4)); }
  static float coef(const std::byte* b, float) noexcept { return half_at(b + 2); }
};

template <class D>
float dot_legacy(const std::byte* w, const std::byte* xr, int64_t k, const ActLayout& L) noexcept {
  const Act32 a = act32(xr, L);
  const int64_t nb = k / 32;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  float c0 = 0.0f, c1 = 0.0f;
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    const std::byte* p0 = w + b * D::kBytes;
    const std::byte* p1 = p0 + D::kBytes;
    const float s0 = half_at(p0), s1 = half_at(p1);
    const __m256i i0 = mul_sum(D::quants(p0), loadu(a.q + 32 * b));
    const __m256i i1 = mul_sum(D::quants(p1), loadu(a.q + 32 * b + 32));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(s0 * a.d[b]), _mm256_cvtepi32_ps(i0), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(s1 * a.d[b + 1]), _mm256_cvtepi32_ps(i1), acc1);
    c0 += D::coef(p0, s0) * a.sums[b];
    c1 += D::coef(p1, s1) * a.sums[b + 1];
  }
  if (b < nb) {
    const std::byte* p0 = w + b * D::kBytes;
    const float s0 = half_at(p0);
    const __m256i i0 = mul_sum(D::quants(p0), loadu(a.q + 32 * b));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(s0 * a.d[b]), _mm256_cvtepi32_ps(i0), acc0);
    c0 += D::coef(p0, s0) * a.sums[b];
  }
  return hsum(_mm256_add_ps(acc0, acc1)) + (c0 + c1);
}

// Q8_0 as a "decoder": signed quants, no offset term (the prefill tiles use it too).
struct Q8_0Dec {
  static constexpr int64_t kBytes = sizeof(BlockQ8_0);
  static constexpr bool kSigned = true;
  static __m256i quants(const std::byte* b) noexcept { return loadu(b + 2); }
};

// A format of 32-element blocks with one scale (block_scale) and signed quants (Q8_0; IQ4_NL's and
// MXFP4's levels),
// against Q8x32: two blocks per iteration into two accumulators.
template <class D>
float dot_signed(const std::byte* w, const std::byte* xr, int64_t k, const ActLayout& L) noexcept {
  const Act32 a = act32(xr, L);
  const int64_t nb = k / 32;
  constexpr int64_t kB = D::kBytes;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    const std::byte* p0 = w + b * kB;
    const std::byte* p1 = p0 + kB;
    const __m256i i0 = mul_sum_s8(D::quants(p0), loadu(a.q + 32 * b));
    const __m256i i1 = mul_sum_s8(D::quants(p1), loadu(a.q + 32 * b + 32));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(block_scale<D>(p0) * a.d[b]), _mm256_cvtepi32_ps(i0), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(block_scale<D>(p1) * a.d[b + 1]), _mm256_cvtepi32_ps(i1), acc1);
  }
  if (b < nb) {
    const std::byte* p0 = w + b * kB;
    const __m256i i0 = mul_sum_s8(D::quants(p0), loadu(a.q + 32 * b));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(block_scale<D>(p0) * a.d[b]), _mm256_cvtepi32_ps(i0), acc0);
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

float dot_q8_0(const std::byte* w, const std::byte* xr, int64_t k, const ActLayout& L) noexcept {
  return dot_signed<Q8_0Dec>(w, xr, k, L);
}

// ---- K formats against Q8x256 ----

using Act256 = ActRow<int16_t>;
inline Act256 act256(const std::byte* row, const ActLayout& L) noexcept { return act_row<int16_t>(row, L); }

// The 6-bit scales and mins of Q4_K / Q5_K sub-blocks 0..7 (docs/formats.md), unpacked a 32-bit
// word (four sub-blocks) at a time: sc[0..7] in out[0..1], mn[0..7] in out[2..3].
inline void k4_scales(const std::byte* packed, uint32_t out[4]) noexcept {
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  uint32_t w[3];
  std::memcpy(w, packed, kKScaleBytes);
  out[0] = w[0] & kLow6;
  out[1] = (w[2] & kLow4) | (((w[0] >> 6) & kLow2) << 4);
  out[2] = w[1] & kLow6;
  out[3] = ((w[2] >> 4) & kLow4) | (((w[1] >> 6) & kLow2) << 4);
}

// k4_scales in one vector: bytes sc[0..7] then mn[0..7] (its out[0..3] in order). Reads 16 bytes from
// `packed`, the 12 of the scales and the first 4 of the quants after them. With X = words (w0, w2, w1,
// w2) and Y = (w0, w0, w1, w1), lane i is (X_i >> s_i & m_i) | (Y_i >> t_i & n_i), the scalar words'
// shifts and masks lane by lane; eight vector operations instead of scalar unpacking and four inserts.
inline __m128i k4_scales_vec(const std::byte* packed) noexcept {
  const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));
  const __m128i x = _mm_shuffle_epi32(w, 0x98), y = _mm_shuffle_epi32(w, 0x50);
  const __m128i low = _mm_and_si128(_mm_srlv_epi32(x, _mm_setr_epi32(0, 0, 0, 4)),
                                    _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
  const __m128i high =
      _mm_and_si128(_mm_srlv_epi32(y, _mm_setr_epi32(0, 2, 0, 2)), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  return _mm_or_si128(low, high);
}

template <bool kFifthBit>
float dot_q45_k(const std::byte* w, const std::byte* xr, int64_t k, const ActLayout& L) noexcept {
  using Block = std::conditional_t<kFifthBit, BlockQ5_K, BlockQ4_K>;
  constexpr int64_t kB = sizeof(Block);
  constexpr int64_t kQs = offsetof(Block, qs);
  const Act256 a = act256(xr, L);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_min = _mm_setzero_ps();
  for (int64_t b = 0; b < k / 256; ++b) {
    const std::byte* p = w + b * kB;
    // sc[0..7] then mn[0..7] as int16; the scales repeated in both 128-bit halves for the splats.
    const __m256i sc_mn = _mm256_cvtepu8_epi16(k4_scales_vec(p + 4));
    const __m256i sc = _mm256_permute4x64_epi64(sc_mn, 0x44);
    // d and dmin (the block's first two halves) times the activation's scale, converted together.
    int32_t halves;
    std::memcpy(&halves, p, sizeof halves);
    const __m128 d_dmin = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(halves)), _mm_set1_ps(a.d[b]));
    // mins: sum over sub-blocks of mn[j] * (its 32 activation quants), 4 lanes of int32.
    const __m256i bs = loadu(a.sums + 16 * b);
    const __m128i bs32 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    acc_min = _mm_fmadd_ps(_mm_shuffle_ps(d_dmin, d_dmin, 0x55),
                           _mm_cvtepi32_ps(_mm_madd_epi16(_mm256_extracti128_si256(sc_mn, 1), bs32)), acc_min);
    const int8_t* xq = a.q + 256 * b;
    __m256i hbits = _mm256_setzero_si256();
    if constexpr (kFifthBit) hbits = loadu(p + offsetof(BlockQ5_K, qh));
    __m256i sumi = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i v = loadu(p + kQs + 32 * c);
      __m256i lo = _mm256_and_si256(v, low4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
      if constexpr (kFifthBit) {
        // hbits is shifted right by 2c: bits 0 and 1 of each byte are the fifth bits of this pair of
        // sub-blocks (16-bit shifts drag bits across bytes, the 0x10 mask drops them).
        const __m256i sixteen = _mm256_set1_epi8(0x10);
        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(hbits, 4), sixteen));
        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(hbits, 3), sixteen));
        hbits = _mm256_srli_epi16(hbits, 2);
      }
      sumi = _mm256_add_epi32(sumi, mul_sum_scaled(lo, loadu(xq + 64 * c), splat_int16_lane(sc, 2 * c)));
      sumi = _mm256_add_epi32(sumi, mul_sum_scaled(hi, loadu(xq + 64 * c + 32), splat_int16_lane(sc, 2 * c + 1)));
    }
    acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(d_dmin), _mm256_cvtepi32_ps(sumi), acc);
  }
  __m128 m = _mm_add_ps(acc_min, _mm_movehl_ps(acc_min, acc_min));
  m = _mm_add_ss(m, _mm_movehdup_ps(m));
  return hsum(acc) - _mm_cvtss_f32(m);
}

float dot_q4_k(const std::byte* w, const std::byte* xr, int64_t k, const ActLayout& L) noexcept {
  return dot_q45_k<false>(w, xr, k, L);
}
float dot_q5_k(const std::byte* w, const std::byte* xr, int64_t k, const ActLayout& L) noexcept {
  return dot_q45_k<true>(w, xr, k, L);
}

float dot_q6_k(const std::byte* w, const std::byte* xr, int64_t k, const ActLayout& L) noexcept {
  constexpr int64_t kB = sizeof(BlockQ6_K);
  const Act256 a = act256(xr, L);
  const __m256i low4 = _mm256_set1_epi8(0x0f), bits45 = _mm256_set1_epi8(0x30);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < k / 256; ++b) {
    const std::byte* p = w + b * kB;
    const int8_t* xq = a.q + 256 * b;
    // The -32 offset of every quant: 32 * sum of scale * (sum of its 16 activation quants).
    const __m256i sc16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + offsetof(BlockQ6_K, scales))));
    __m256i sumi = _mm256_slli_epi32(_mm256_madd_epi16(sc16, loadu(a.sums + 16 * b)), 5);
    sumi = _mm256_sub_epi32(_mm256_setzero_si256(), sumi);
    // each half's eight scales in both 128-bit halves, for the pair splats.
    const __m256i sc_halves[2] = {_mm256_permute4x64_epi64(sc16, 0x44), _mm256_permute4x64_epi64(sc16, 0xee)};
    for (int h = 0; h < 2; ++h) {
      const __m256i sc_h = sc_halves[h];
      const std::byte* ql = p + offsetof(BlockQ6_K, ql) + 64 * h;
      const __m256i qa = loadu(ql), qb = loadu(ql + 32), qh = loadu(p + offsetof(BlockQ6_K, qh) + 32 * h);
      const __m256i q1 =
          _mm256_or_si256(_mm256_and_si256(qa, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45));
      const __m256i q2 =
          _mm256_or_si256(_mm256_and_si256(qb, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45));
      const __m256i q3 =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), low4), _mm256_and_si256(qh, bits45));
      const __m256i q4 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), low4),
                                         _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45));
      const int8_t* x = xq + 128 * h;
      sumi = _mm256_add_epi32(sumi, mul_sum_scaled(q1, loadu(x), splat_int16_pair(sc_h, 0)));
      sumi = _mm256_add_epi32(sumi, mul_sum_scaled(q2, loadu(x + 32), splat_int16_pair(sc_h, 1)));
      sumi = _mm256_add_epi32(sumi, mul_sum_scaled(q3, loadu(x + 64), splat_int16_pair(sc_h, 2)));
      sumi = _mm256_add_epi32(sumi, mul_sum_scaled(q4, loadu(x + 96), splat_int16_pair(sc_h, 3)));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(a.d[b] * half_at(p + offsetof(BlockQ6_K, d))), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc);
}

// ---- the row loops ----

using DotFn = float (*)(const std::byte* w, const std::byte* x, int64_t k, const ActLayout& L) noexcept;

// One x row (decode) streams the weight at the memory's pace; the hardware prefetcher stops at every
// 4 KiB page, so the `bytes` from kPrefetchBytes past p on are asked for here (1 KiB ahead did as
// well, 4 KiB worse). For weight rows in file order as for a feed order's group blocks.
constexpr int64_t kPrefetchBytes = 2048;
inline void prefetch_ahead(const std::byte* p, int64_t bytes) noexcept {
  for (int64_t o = 0; o < bytes; o += 64)
    _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes + o), _MM_HINT_T0);
}

// Weight rows [from, g.rows), each read once and dotted with every x row while it sits in L1 (the
// whole of decode; the rows a prefill tile leaves over).
// Decode (one x row) asks for each quantized row's lines ahead (IQ4_XS 13.7 -> 26 t/s on the 1.1B
// file); the dense dots ask per 64 elements themselves (a whole 4 KiB row ahead was slower).
template <DotFn Dot, bool kPrefetchRows = true>
void dot_rows(const Gemv& g, int64_t from, const ActLayout& L) noexcept {
  for (int64_t o = from; o < g.rows; ++o) {
    const std::byte* wr = g.w + o * g.w_stride;
    if (kPrefetchRows && g.n == 1) prefetch_ahead(wr, g.w_stride);
    for (int64_t r = 0; r < g.n; ++r) {
      const float v = Dot(wr, g.x + r * g.x_stride, g.k, L);
      std::memcpy(g.out + r * g.out_row + o * g.out_col, &v, 4);
    }
  }
}

template <DotFn Dot, Act A>
void gemv(const Gemv& g) noexcept {
  dot_rows<Dot, A != Act::None>(g, 0, act_layout(A, g.k));
}

}  // namespace
}  // namespace skainet::kernels::x86
