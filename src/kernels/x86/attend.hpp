// One query's attention for the query heads that share a KV head (isa.hpp's Attend): a decode step
// then reads each visible cell of the cache, and converts it from its type (F32, F16, BF16 or a
// quantized one), once per KV head rather than once per query head (4 to 8 times fewer for
// grouped-query models), and never takes the one-row matmul's per-call route. Two kernels per cache
// type, the rows' attend_keys (the scores) and attend_values (probabilities times values); the
// dispatch runs the softmax between them, so K and V may be of different types (-ctk, -ctv).
// Included by the ISA units (avx_unit.hpp); internal linkage like the other kernel headers.
//
// The numbers are the reference's within float rounding, not the per-head matmul's bit for bit: each
// score sums its products in eight lanes then across them (sum8), the order that lets eight cells'
// scores leave in one vector. The softmax is softmax_row, and each output element sums probability
// times value over the cells in order as gemm_t does.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/x86/block_scales.hpp"
#include "skainet/compute/kernels.hpp"
#include "skainet/core/blocks.hpp"

namespace skainet::kernels::x86 {
namespace {

// A KV head's part of a cell (hd elements of the cache's type, hd a multiple of 8 and, for a packed
// type, of its 32-element blocks) as hd floats; D > 0: hd = D, unrolled.
struct KvF32 {
  static int64_t bytes(int64_t hd) noexcept { return 4 * hd; }
  template <int64_t D>
  static void row(const std::byte* p, int64_t hd, float* out) noexcept {
    SKAINET_UNROLL
    for (int64_t c = 0; c < (D > 0 ? D : hd); c += 8)
      _mm256_store_ps(out + c, _mm256_loadu_ps(reinterpret_cast<const float*>(p) + c));
  }
};
struct KvF16 {
  static int64_t bytes(int64_t hd) noexcept { return 2 * hd; }
  template <int64_t D>
  static void row(const std::byte* p, int64_t hd, float* out) noexcept {
    SKAINET_UNROLL
    for (int64_t c = 0; c < (D > 0 ? D : hd); c += 8)
      _mm256_store_ps(out + c, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * c))));
  }
};
struct KvBF16 {
  static int64_t bytes(int64_t hd) noexcept { return 2 * hd; }
  template <int64_t D>
  static void row(const std::byte* p, int64_t hd, float* out) noexcept {
    SKAINET_UNROLL
    for (int64_t c = 0; c < (D > 0 ? D : hd); c += 8) {
      const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * c)));
      _mm256_store_ps(out + c, _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
    }
  }
};
// Q8_0 blocks (blocks.hpp): an F16 scale, then 32 signed bytes.
struct KvQ8_0 {
  static int64_t bytes(int64_t hd) noexcept { return hd / 32 * static_cast<int64_t>(sizeof(BlockQ8_0)); }
  template <int64_t D>
  static void row(const std::byte* p, int64_t hd, float* out) noexcept {
    SKAINET_UNROLL
    for (int64_t b = 0; b < (D > 0 ? D : hd) / 32; ++b) {
      const std::byte* block = p + b * static_cast<int64_t>(sizeof(BlockQ8_0));
      const __m256 d = _mm256_set1_ps(half_at(block + offsetof(BlockQ8_0, d)));
      const std::byte* qs = block + offsetof(BlockQ8_0, qs);
      SKAINET_UNROLL
      for (int c = 0; c < 32; c += 8) {
        const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + c)));
        _mm256_store_ps(out + 32 * b + c, _mm256_mul_ps(d, _mm256_cvtepi32_ps(q)));
      }
    }
  }
};
// Q4_0 blocks: an F16 scale, then 16 bytes whose low nibbles are elements 0-15 and high ones 16-31,
// each less 8.
struct KvQ4_0 {
  static int64_t bytes(int64_t hd) noexcept { return hd / 32 * static_cast<int64_t>(sizeof(BlockQ4_0)); }
  template <int64_t D>
  static void row(const std::byte* p, int64_t hd, float* out) noexcept {
    const __m128i low4 = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
    SKAINET_UNROLL
    for (int64_t b = 0; b < (D > 0 ? D : hd) / 32; ++b) {
      const std::byte* block = p + b * static_cast<int64_t>(sizeof(BlockQ4_0));
      const __m256 d = _mm256_set1_ps(half_at(block + offsetof(BlockQ4_0, d)));
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + offsetof(BlockQ4_0, qs)));
      const __m128i halves[2] = {_mm_sub_epi8(_mm_and_si128(q, low4), eight),
                                 _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), low4), eight)};
      SKAINET_UNROLL
      for (int h = 0; h < 2; ++h) {
        _mm256_store_ps(out + 32 * b + 16 * h, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(halves[h]))));
        _mm256_store_ps(out + 32 * b + 16 * h + 8,
                        _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(halves[h], 8)))));
      }
    }
  }
};
// The other packed cache types (Q4_1, Q5_0, Q5_1, IQ4_NL): the reference's dequantization. Their
// cells are still read once per KV head; only the conversion is scalar.
template <GgmlType T>
struct KvRef {
  static int64_t bytes(int64_t hd) noexcept { return hd / type_traits(T).block_elements * type_traits(T).block_bytes; }
  template <int64_t D>
  static void row(const std::byte* p, int64_t hd, float* out) noexcept {
    ref::dequantize_row(T, p, out, D > 0 ? D : hd);
  }
};

// Cells a task reads ahead of the one it converts. A task's cells are a short run each (its group's
// head_dim elements) a whole cache row apart, from memory at long contexts, a stride the hardware
// prefetchers follow too late: without this a 2,048-cell cache read at a fifth of the memory's rate.
inline constexpr int64_t kPrefetchCells = 32;

inline void prefetch_cell(const std::byte* cell, int64_t bytes) noexcept {
  for (int64_t o = 0; o < bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(cell + o), _MM_HINT_T0);
}

// Both products read the cache a block at a time, converted to floats: 16 KiB, beside the query or
// the probabilities in L1.
inline constexpr int64_t kBlockFloats = 4096;

// Cells [j0, j0 + m) of keys or values (cell j at base + j * stride) as rows of hd floats in out,
// each asking for the cell kPrefetchCells ahead while the task has one. D > 0: hd = D, unrolled.
template <class W, int64_t D>
void convert_cells(const Attend& a, const std::byte* base, int64_t stride, int64_t j0, int64_t m, float* out) noexcept {
  const int64_t hd = D > 0 ? D : a.head_dim, bytes = W::bytes(hd);
  for (int64_t j = 0; j < m; ++j) {
    const std::byte* row = base + (j0 + j) * stride;
    if (j0 + j + kPrefetchCells < a.end) prefetch_cell(row + kPrefetchCells * stride, bytes);
    W::template row<D>(row, hd, out + j * hd);
  }
}

// The eight sums of a[0..8) as one vector, lane c holding a[c]'s: pairs added by hadd within each
// 128-bit half twice, then the two halves' partial sums added across.
[[gnu::always_inline]] inline __m256 sum8(const __m256 a[8]) noexcept {
  const __m256 s0123 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
  const __m256 s4567 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20), _mm256_permute2f128_ps(s0123, s4567, 0x31));
}

// q · key_c for eight converted keys (rows of hd floats from kb): eight accumulators, one per key, so
// eight independent chains keep both FMA pipes busy and the query is loaded once per 8 elements; the
// scores come out as one vector, stored whole. D = 64 unrolls it; D = 0 takes hd at run time.
template <int64_t D>
[[gnu::always_inline]] inline __m256 dot8(const float* kb, int64_t hd, const float* q) noexcept {
  if constexpr (D > 0) hd = D;
  __m256 acc[8];
  SKAINET_UNROLL
  for (int c = 0; c < 8; ++c) acc[c] = _mm256_setzero_ps();
  SKAINET_UNROLL
  for (int64_t d = 0; d < hd; d += 8) {
    const __m256 qv = _mm256_loadu_ps(q + d);
    SKAINET_UNROLL
    for (int c = 0; c < 8; ++c) acc[c] = _mm256_fmadd_ps(_mm256_load_ps(kb + c * hd + d), qv, acc[c]);
  }
  return sum8(acc);
}

// The raw scores q_h · k_j of every head, eight cells at a time: a block of keys converted once into
// floats (the rows past the visible end zeroed), then each head's
// scores of eight cells summed in registers and stored as one vector. A score per cell and head, as
// the per-head matmul gave, cost a horizontal sum and a scalar store a head's row apart.
template <class W, int64_t D>
void attend_scores(const Attend& a) noexcept {
  alignas(32) float kb[kBlockFloats];
  const int64_t hd = D > 0 ? D : a.head_dim, block = kBlockFloats / hd / 8 * 8;
  for (int64_t j0 = a.begin; j0 < a.end; j0 += block) {
    const int64_t m = std::min(block, a.end - j0), padded = (m + 7) / 8 * 8;
    convert_cells<W, D>(a, a.k, a.k_stride, j0, m, kb);
    std::fill(kb + m * hd, kb + padded * hd, 0.0f);
    for (int64_t h = 0; h < a.heads; ++h) {
      float* s = a.scores + h * a.scores_stride + j0;
      const float* q = a.q + h * hd;
      int64_t c0 = 0;
      for (; c0 + 8 <= m; c0 += 8) _mm256_storeu_ps(s + c0, dot8<D>(kb + c0 * hd, hd, q));
      if (c0 < m) {
        alignas(32) float last[8];
        _mm256_store_ps(last, dot8<D>(kb + c0 * hd, hd, q));
        std::copy(last, last + (m - c0), s + c0);
      }
    }
  }
}

// out[h][d0, d0 + 8V) += sum_j p_h[j0 + j] value_j for R heads from h over the m converted values in
// vb (rows of hd floats): R * V accumulators, each value vector loaded once for the R heads.
template <int R, int V>
void attend_values_of(const Attend& a, int64_t h, int64_t d0, const float* vb, int64_t j0, int64_t m) noexcept {
  const int64_t hd = a.head_dim;
  __m256 acc[R][V];
  SKAINET_UNROLL
  for (int r = 0; r < R; ++r) {
    SKAINET_UNROLL
    for (int v = 0; v < V; ++v) acc[r][v] = _mm256_loadu_ps(a.out + (h + r) * hd + d0 + 8 * v);
  }
  const float* p = a.scores + h * a.scores_stride + j0;
  for (int64_t j = 0; j < m; ++j) {
    __m256 val[V];
    SKAINET_UNROLL
    for (int v = 0; v < V; ++v) val[v] = _mm256_load_ps(vb + j * hd + d0 + 8 * v);
    SKAINET_UNROLL
    for (int r = 0; r < R; ++r) {
      const __m256 pr = _mm256_set1_ps(p[r * a.scores_stride + j]);
      SKAINET_UNROLL
      for (int v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_ps(pr, val[v], acc[r][v]);
    }
  }
  SKAINET_UNROLL
  for (int r = 0; r < R; ++r) {
    SKAINET_UNROLL
    for (int v = 0; v < V; ++v) _mm256_storeu_ps(a.out + (h + r) * hd + d0 + 8 * v, acc[r][v]);
  }
}

template <int R>
void attend_values_heads(const Attend& a, int64_t h, const float* vb, int64_t j0, int64_t m) noexcept {
  for (int64_t d0 = 0; d0 < a.head_dim; d0 += 32) {
    switch (std::min<int64_t>(4, (a.head_dim - d0) / 8)) {
      case 4: attend_values_of<R, 4>(a, h, d0, vb, j0, m); break;
      case 3: attend_values_of<R, 3>(a, h, d0, vb, j0, m); break;
      case 2: attend_values_of<R, 2>(a, h, d0, vb, j0, m); break;
      default: attend_values_of<R, 1>(a, h, d0, vb, j0, m); break;
    }
  }
}

// out_h = sum_j p_h[j] value_j: the values converted to floats a block at a time, then read by every
// head two at a time. An AttendFn for FormatKernels::attend_values.
template <class W>
void attend_values(const Attend& a) noexcept {
  alignas(32) float vb[kBlockFloats];
  const int64_t hd = a.head_dim, block = kBlockFloats / hd;
  std::fill(a.out, a.out + a.heads * hd, 0.0f);
  for (int64_t j0 = a.begin; j0 < a.end; j0 += block) {
    const int64_t m = std::min(block, a.end - j0);
    convert_cells<W, 0>(a, a.v, a.v_stride, j0, m, vb);
    int64_t h = 0;
    for (; h + 2 <= a.heads; h += 2) attend_values_heads<2>(a, h, vb, j0, m);
    if (h < a.heads) attend_values_heads<1>(a, h, vb, j0, m);
  }
}

// The scores of a cache of keys W: an AttendFn for FormatKernels::attend_keys.
template <class W>
void attend_keys(const Attend& a) noexcept {
  if (a.head_dim == 64)
    attend_scores<W, 64>(a);
  else
    attend_scores<W, 0>(a);
}

}  // namespace
}  // namespace skainet::kernels::x86
