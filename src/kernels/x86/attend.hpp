// One query's attention for the query heads that share a KV head (isa.hpp's Attend): a decode step
// then reads each visible cell of the cache, and converts it from F16, once per KV head rather than
// once per query head (4 to 8 times fewer for grouped-query models), and never takes the one-row
// matmul's per-call route. Included by the ISA units after softmax.hpp; internal linkage like it.
//
// The numbers are the per-head matmul's, bit for bit: each score is matmul_avx2.cpp's dot_dense (the
// same four accumulators, horizontal sum and scalar tail), the softmax is softmax_row, and each output
// element sums probability times value over the cells in order as its gemm_t does.
#pragma once

#include <algorithm>
#include <cstdint>

namespace skainet::kernels::x86 {
namespace {

// Eight cache elements as floats.
struct KvF32 {
  static constexpr int64_t kBytes = 4;
  static __m256 at(const std::byte* p) noexcept { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
};
struct KvF16 {
  static constexpr int64_t kBytes = 2;
  static __m256 at(const std::byte* p) noexcept {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};

// key · x in dot_dense's order: four accumulators over steps of 32 elements, the steps of 8 after
// them into the first, its horizontal sum, plus its (empty) scalar tail. Inlined, or the key would
// leave its registers for every head.
template <int64_t D>
[[gnu::always_inline]] inline float key_dot(const __m256* key, const float* x, int64_t hd) noexcept {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t i = 0;
  SKAINET_UNROLL
  for (; i + 32 <= hd; i += 32) {
    a0 = _mm256_fmadd_ps(key[i / 8], _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(key[i / 8 + 1], _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(key[i / 8 + 2], _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(key[i / 8 + 3], _mm256_loadu_ps(x + i + 24), a3);
  }
  SKAINET_UNROLL
  for (; i + 8 <= hd; i += 8) a0 = _mm256_fmadd_ps(key[i / 8], _mm256_loadu_ps(x + i), a0);
  const float tail = 0.0f;
  return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))) + tail;
}

// The raw scores q_h · k_j of every head, cell by cell: each key converted once for all the heads.
// D = 64 keeps the key in 8 registers; D = 0 takes head_dim at run time (the key then sits on the
// stack, read once per head from L1).
template <class W, int64_t D>
void attend_scores(const Attend& a) noexcept {
  const int64_t hd = D > 0 ? D : a.head_dim;
  __m256 key[kAttendMaxHeadDim / 8];
  for (int64_t j = a.begin; j < a.end; ++j) {
    const std::byte* row = a.k + j * a.kv_stride;
    SKAINET_UNROLL
    for (int64_t c = 0; c < hd; c += 8) key[c / 8] = W::at(row + c * W::kBytes);
    float* s = a.scores + j;
    for (int64_t h = 0; h < a.heads; ++h) s[h * a.scores_stride] = key_dot<D>(key, a.q + h * hd, hd);
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

// out_h = sum_j p_h[j] value_j: the values converted to floats a block at a time (16 KiB, beside the
// probabilities in L1), then read by every head two at a time.
template <class W>
void attend_values(const Attend& a) noexcept {
  constexpr int64_t kBlockFloats = 4096;
  alignas(32) float vb[kBlockFloats];
  const int64_t hd = a.head_dim, block = kBlockFloats / hd;
  std::fill(a.out, a.out + a.heads * hd, 0.0f);
  for (int64_t j0 = a.begin; j0 < a.end; j0 += block) {
    const int64_t m = std::min(block, a.end - j0);
    for (int64_t j = 0; j < m; ++j) {
      const std::byte* row = a.v + (j0 + j) * a.kv_stride;
      for (int64_t c = 0; c < hd; c += 8) _mm256_store_ps(vb + j * hd + c, W::at(row + c * W::kBytes));
    }
    int64_t h = 0;
    for (; h + 2 <= a.heads; h += 2) attend_values_heads<2>(a, h, vb, j0, m);
    if (h < a.heads) attend_values_heads<1>(a, h, vb, j0, m);
  }
}

template <class W>
void attend(const Attend& a) noexcept {
  if (a.head_dim == 64)
    attend_scores<W, 64>(a);
  else
    attend_scores<W, 0>(a);
  for (int64_t h = 0; h < a.heads; ++h) {
    float* s = a.scores + h * a.scores_stride;
    softmax_row(s, s, a.begin, a.end, a.cells, a.scale, a.softcap);
  }
  attend_values<W>(a);
}

}  // namespace
}  // namespace skainet::kernels::x86
