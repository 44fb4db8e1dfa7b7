// Q2_K and Q3_K one-row dot products against a Q8x256 activation (as llama.cpp's against Q8_K), on
// 256-bit vectors, for both ISA units (included after simd_int8.hpp and k_tiles.hpp), and their
// decoders for the K prefill tiles. Each 32 elements are two
// sub-blocks of 16: one int8 dot gives int32 lanes 0-3 for the first and 4-7 for the second, which
// are multiplied by the two sub-block scales before adding up; one float multiply per super-block.
// Q2_K's unsigned quants (0..3) take the u8 x s8 primitive and its mins the activation's sums of
// 16; Q3_K's signed quants (-4..3) the signed one.
#pragma once

#include "kernels/x86/block_scales.hpp"

namespace skainet::kernels::x86 {
namespace {

// Lanes 0-3 times s0, lanes 4-7 times s1.
inline __m256i scale_halves(__m256i v, int s0, int s1) noexcept {
  return _mm256_mullo_epi32(v, _mm256_setr_epi32(s0, s0, s0, s0, s1, s1, s1, s1));
}

// The 2-bit fields at bit 2s of the 32 bytes at p: elements 128h + 32s + 0..31 of a Q2_K/Q3_K block.
inline __m256i crumbs(const std::byte* p, int s) noexcept {
  return _mm256_and_si256(_mm256_srli_epi16(loadu(p), 2 * s), _mm256_set1_epi8(3));
}

// The third bit of elements 32c + 0..31 of a Q3_K block: 0xff where bit c of hmask[l] is set (the
// quant is its 2-bit field as it is), 0 where clear (the field minus 4).
inline __m256i q3_k_high(__m256i hmask, int c) noexcept {
  const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << c));
  return _mm256_cmpeq_epi8(_mm256_and_si256(hmask, bit), bit);
}

float dot_q2_k(const std::byte* w, const std::byte* xr, int64_t k, const ActLayout& L) noexcept {
  const Act256 a = act256(xr, L);
  float sum = 0.0f;
  for (int64_t b = 0; b < k / 256; ++b) {
    const std::byte* p = w + b * static_cast<int64_t>(sizeof(BlockQ2_K));
    const auto* sc = reinterpret_cast<const uint8_t*>(p + offsetof(BlockQ2_K, scales));
    const std::byte* qs = p + offsetof(BlockQ2_K, qs);
    const int8_t* xq = a.q + 256 * b;
    const int16_t* bsums = a.sums + 16 * b;
    __m256i sumi = _mm256_setzero_si256();
    int mins = 0;
    for (int c = 0; c < 8; ++c) {
      const __m256i s = mul_sum(crumbs(qs + 32 * (c / 4), c % 4), loadu(xq + 32 * c));
      sumi = _mm256_add_epi32(sumi, scale_halves(s, sc[2 * c] & 0xf, sc[2 * c + 1] & 0xf));
    }
    for (int j = 0; j < 16; ++j) mins += (sc[j] >> 4) * bsums[j];
    const float dx = a.d[b];
    sum += dx * half_at(p + offsetof(BlockQ2_K, d)) * static_cast<float>(hsum_i32(sumi)) -
           dx * half_at(p + offsetof(BlockQ2_K, dmin)) * static_cast<float>(mins);
  }
  return sum;
}

float dot_q3_k(const std::byte* w, const std::byte* xr, int64_t k, const ActLayout& L) noexcept {
  const Act256 a = act256(xr, L);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < k / 256; ++b) {
    const std::byte* p = w + b * static_cast<int64_t>(sizeof(BlockQ3_K));
    int sc[16];
    q3_k_scales(p, sc);
    const __m256i hmask = loadu(p + offsetof(BlockQ3_K, hmask));
    const std::byte* qs = p + offsetof(BlockQ3_K, qs);
    const int8_t* xq = a.q + 256 * b;
    __m256i sumi = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {
      const __m256i q = _mm256_sub_epi8(crumbs(qs + 32 * (c / 4), c % 4),
                                        _mm256_andnot_si256(q3_k_high(hmask, c), _mm256_set1_epi8(4)));
      const __m256i s = mul_sum_s8(q, loadu(xq + 32 * c));
      sumi = _mm256_add_epi32(sumi, scale_halves(s, sc[2 * c], sc[2 * c + 1]));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(a.d[b] * half_at(p + offsetof(BlockQ3_K, d))), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc);
}

// Prefill: one block into the K tiles' decoded form (k_tiles.hpp), in ggml's element order (element
// 32c + l from the 2-bit field c % 4 of qs[32 (c / 4) + l]).
void decode_q2_k(const std::byte* p, uint8_t* q, int16_t* sc, float* m, float& d) noexcept {
  const auto* s = reinterpret_cast<const uint8_t*>(p + offsetof(BlockQ2_K, scales));
  d = half_at(p + offsetof(BlockQ2_K, d));
  const float dmin = half_at(p + offsetof(BlockQ2_K, dmin));
  for (int c = 0; c < 8; ++c) store32(q + 32 * c, crumbs(p + offsetof(BlockQ2_K, qs) + 32 * (c / 4), c % 4));
  for (int t = 0; t < 16; t += 2) store32(sc + 8 * t, scale2(s[t] & 15, s[t + 1] & 15));
  for (int t = 0; t < 16; ++t) m[t] = dmin * static_cast<float>(s[t] >> 4);
}

// Q3_K's signed -4..3 as the unsigned field + 4 * its third bit (0..7), the -4 folded into the min
// term, m = 4 * d * sc.
void decode_q3_k(const std::byte* p, uint8_t* q, int16_t* sc, float* m, float& d) noexcept {
  int s[16];
  q3_k_scales(p, s);
  d = half_at(p + offsetof(BlockQ3_K, d));
  const __m256i hmask = loadu(p + offsetof(BlockQ3_K, hmask)), four = _mm256_set1_epi8(4);
  for (int c = 0; c < 8; ++c)
    store32(q + 32 * c, _mm256_or_si256(crumbs(p + offsetof(BlockQ3_K, qs) + 32 * (c / 4), c % 4),
                                        _mm256_and_si256(q3_k_high(hmask, c), four)));
  for (int t = 0; t < 16; t += 2) store32(sc + 8 * t, scale2(s[t], s[t + 1]));
  for (int t = 0; t < 16; ++t) m[t] = 4.0f * d * static_cast<float>(s[t]);
}

struct Q2_KDecode {
  static constexpr int64_t kBytes = sizeof(BlockQ2_K);
  static void block(const std::byte* p, uint8_t* q, int16_t* sc, float* m, float& d) noexcept {
    decode_q2_k(p, q, sc, m, d);
  }
};
struct Q3_KDecode {
  static constexpr int64_t kBytes = sizeof(BlockQ3_K);
  static void block(const std::byte* p, uint8_t* q, int16_t* sc, float* m, float& d) noexcept {
    decode_q3_k(p, q, sc, m, d);
  }
};

}  // namespace
}  // namespace skainet::kernels::x86
