// One query's attention for the query heads that share a KV head (isa.hpp's Attend): a decode step
// then reads each visible cell of the cache, and converts it from its type (F32, F16, BF16 or a
// quantized one), once per KV head rather than once per query head (4 to 8 times fewer for
// grouped-query models), and never takes the one-row matmul's per-call route. Two kernels per cache
// type, the rows' attend_keys (the scores) and attend_values (probabilities times values); the
// dispatch runs the softmax between them, so K and V may be of different types (-ctk, -ctv).
// Included by the ISA units (avx_unit.hpp); internal linkage like the other kernel headers.
//
// The numbers are the reference's within float rounding, not the per-head matmul's bit for bit: each
// score sums its products over the head's elements in order, one cell per vector lane (the keys
// transposed eight cells at a time), with fused multiply-adds. The softmax is softmax_row, and each
// output element sums probability times value over the cells in order as gemm_t does. The products
// run on Lanes: 16 floats a vector in the AVX-512 unit (twice the cells or elements per fused
// multiply-add, the half of a decode step's attention time that is arithmetic), 8 in the AVX2 unit.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/x86/block_scales.hpp"
#include "skainet/compute/kernels.hpp"
#include "skainet/core/blocks.hpp"

namespace skainet::kernels::x86 {
namespace {

// A KV head's part of a cell (hd elements of the cache's type, hd a multiple of 8 and, for a packed
// type, of its 32-element blocks) as hd floats; D > 0: hd = D, unrolled.
//
// The element-wise types (F32, F16, BF16) give any eight elements as a vector (vec8), which the
// scores read straight into their transposed octets; row() is the same for the three.
template <class W>
struct ElementWise {
  template <int64_t D>
  static void row(const std::byte* p, int64_t hd, float* out) noexcept {
    SKAINET_UNROLL
    for (int64_t c = 0; c < (D > 0 ? D : hd); c += 8) _mm256_store_ps(out + c, W::vec8(p, c));
  }
};
struct KvF32 : ElementWise<KvF32> {
  static int64_t bytes(int64_t hd) noexcept { return 4 * hd; }
  static __m256 vec8(const std::byte* p, int64_t c) noexcept {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p) + c);
  }
};
struct KvF16 : ElementWise<KvF16> {
  static int64_t bytes(int64_t hd) noexcept { return 2 * hd; }
  static __m256 vec8(const std::byte* p, int64_t c) noexcept {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * c)));
  }
};
struct KvBF16 : ElementWise<KvBF16> {
  static int64_t bytes(int64_t hd) noexcept { return 2 * hd; }
  static __m256 vec8(const std::byte* p, int64_t c) noexcept {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * c)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
};
template <class W>
constexpr bool kElementWise = std::is_base_of_v<ElementWise<W>, W>;

// The products' vectors (score_groups, attend_values_of): a score vector holds kCount cells, a value
// vector kCount elements of a head. The keys' octets stay eight cells wide (their transposition is
// 256-bit); in the AVX-512 unit two sit side by side, one in each half of a 16-float row.
#if defined(__AVX512F__)
struct Lanes {
  using V = __m512;
  static constexpr int64_t kCount = 16;
  // Heads per pass over a block's keys (two groups each) and values (four vectors each): as many
  // accumulators as the 32 registers leave room for.
  static constexpr int kScoreHeads = 8, kValueHeads = 4;
  static V zero() noexcept { return _mm512_setzero_ps(); }
  static V load(const float* p) noexcept { return _mm512_load_ps(p); }
  static V loadu(const float* p) noexcept { return _mm512_loadu_ps(p); }
  static V set1(float x) noexcept { return _mm512_set1_ps(x); }
  static V fmadd(V a, V b, V c) noexcept { return _mm512_fmadd_ps(a, b, c); }
  static void storeu(float* p, V v) noexcept { _mm512_storeu_ps(p, v); }
  // The first n < kCount floats at p (the rest zero), and v's first n stored at p.
  static V load_first(const float* p, int64_t n) noexcept { return _mm512_maskz_loadu_ps(first(n), p); }
  static void store_first(float* p, V v, int64_t n) noexcept { _mm512_mask_storeu_ps(p, first(n), v); }
  static __mmask16 first(int64_t n) noexcept { return static_cast<__mmask16>((1u << n) - 1); }
};
#else
struct Lanes {
  using V = __m256;
  static constexpr int64_t kCount = 8;
  static constexpr int kScoreHeads = 4, kValueHeads = 2;  // within 16 registers
  static V zero() noexcept { return _mm256_setzero_ps(); }
  static V load(const float* p) noexcept { return _mm256_load_ps(p); }
  static V loadu(const float* p) noexcept { return _mm256_loadu_ps(p); }
  static V set1(float x) noexcept { return _mm256_set1_ps(x); }
  static V fmadd(V a, V b, V c) noexcept { return _mm256_fmadd_ps(a, b, c); }
  static void storeu(float* p, V v) noexcept { _mm256_storeu_ps(p, v); }
  static V load_first(const float* p, int64_t n) noexcept {
    alignas(32) float part[8] = {};
    std::copy(p, p + n, part);
    return _mm256_load_ps(part);
  }
  static void store_first(float* p, V v, int64_t n) noexcept {
    alignas(32) float part[8];
    _mm256_store_ps(part, v);
    std::copy(part, part + n, p);
  }
};
#endif
// n floats at p, n > 0 and at most a whole vector; and v's first n stored at p.
inline Lanes::V load_part(const float* p, int64_t n) noexcept {
  return n >= Lanes::kCount ? Lanes::loadu(p) : Lanes::load_first(p, n);
}
inline void store_part(float* p, Lanes::V v, int64_t n) noexcept {
  if (n >= Lanes::kCount) return Lanes::storeu(p, v);
  Lanes::store_first(p, v, n);
}

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

// Asks for the cell kPrefetchCells after cell j (at base + j * stride) while the task has one.
inline void ask_ahead(const Attend& a, const std::byte* base, int64_t stride, int64_t j, int64_t bytes) noexcept {
  if (j + kPrefetchCells < a.end) prefetch_cell(base + (j + kPrefetchCells) * stride, bytes);
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
    ask_ahead(a, base, stride, j0 + j, bytes);
    W::template row<D>(base + (j0 + j) * stride, hd, out + j * hd);
  }
}

// Eight cells turned into their "octet": hd rows, row d holding the eight cells' element d (at
// octet + d * stride), so a score leaves the products with one cell per lane and no sum across lanes.
// load(i, c) gives cell i's elements c..c+8; each 8 x 8 tile is transposed in registers: unpack pairs,
// then shuffle quads, then join 128-bit halves.
template <class Load>
[[gnu::always_inline]] inline void transpose_octet(Load load, int64_t hd, float* octet, int64_t stride) noexcept {
  for (int64_t c = 0; c < hd; c += 8) {
    __m256 r[8], t[8];
    SKAINET_UNROLL
    for (int i = 0; i < 8; ++i) r[i] = load(i, c);
    SKAINET_UNROLL
    for (int i = 0; i < 8; i += 2) {
      t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    SKAINET_UNROLL
    for (int i = 0; i < 8; i += 4) {
      r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
      r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
      r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
      r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    // r[i] (i < 4) holds element c + i of cells 0-3 in its low half and c + i + 4 in its high half,
    // r[i + 4] the same of cells 4-7: joining halves gives whole columns.
    SKAINET_UNROLL
    for (int i = 0; i < 4; ++i) {
      _mm256_store_ps(octet + (c + i) * stride, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
      _mm256_store_ps(octet + (c + i + 4) * stride, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
    }
  }
}

// The octet of cells [j, j + n) of the keys (0 <= n <= 8; the missing cells zero), its rows
// `stride` floats apart: an element-wise type's whole octet straight from the cache, any other
// through its rows converted into `rows` first.
template <class W, int64_t D>
void key_octet(const Attend& a, int64_t j, int64_t n, float* rows, float* octet, int64_t stride) noexcept {
  const int64_t hd = D > 0 ? D : a.head_dim;
  if constexpr (kElementWise<W>) {
    if (n == 8) {
      const std::byte* cell = a.k + j * a.k_stride;
      for (int64_t i = 0; i < 8; ++i) ask_ahead(a, a.k, a.k_stride, j + i, W::bytes(hd));
      return transpose_octet([&](int i, int64_t c) { return W::vec8(cell + i * a.k_stride, c); }, hd, octet, stride);
    }
  }
  convert_cells<W, D>(a, a.k, a.k_stride, j, n, rows);
  std::fill(rows + n * hd, rows + 8 * hd, 0.0f);
  transpose_octet([&](int i, int64_t c) { return _mm256_load_ps(rows + i * hd + c); }, hd, octet, stride);
}

// Scores of R heads from h over O groups (Lanes::kCount cells each) of the transposed keys: R * O
// accumulators, one cell per lane, each summing q_h[d] * k[d] over d in order; every key vector is
// loaded once for the R heads and every query element broadcast once for the O groups.
template <int R, int O, int64_t D>
[[gnu::always_inline]] inline void score_groups(const float* q, int64_t hd, const float* kt,
                                                Lanes::V out[R][O]) noexcept {
  constexpr int64_t L = Lanes::kCount;
  if constexpr (D > 0) hd = D;
  SKAINET_UNROLL
  for (int r = 0; r < R; ++r) {
    SKAINET_UNROLL
    for (int o = 0; o < O; ++o) out[r][o] = Lanes::zero();
  }
#pragma GCC unroll 4
  for (int64_t d = 0; d < hd; ++d) {
    Lanes::V k[O];
    SKAINET_UNROLL
    for (int o = 0; o < O; ++o) {
      k[o] = Lanes::load(kt + (o * hd + d) * L);
      // Kept in a register for the R heads: folded into each FMA, the load would be repeated R times
      // and the loads, not the FMAs, would set the pace.
      __asm__("" : "+v"(k[o]));
    }
    SKAINET_UNROLL
    for (int r = 0; r < R; ++r) {
      const Lanes::V qd = Lanes::set1(q[r * hd + d]);
      SKAINET_UNROLL
      for (int o = 0; o < O; ++o) out[r][o] = Lanes::fmadd(qd, k[o], out[r][o]);
    }
  }
}

// R heads from h over the block's groups, two at a time (the last alone when their count is odd); a
// group's cells past m (the block's end) are not the task's to write.
template <int R, int64_t D>
void score_heads(const Attend& a, int64_t h, const float* kt, int64_t j0, int64_t m) noexcept {
  constexpr int64_t L = Lanes::kCount;
  const int64_t hd = D > 0 ? D : a.head_dim, groups = (m + L - 1) / L;
  const float* q = a.q + h * hd;
  float* s = a.scores + h * a.scores_stride + j0;
  int64_t o = 0;
  for (; o + 2 <= groups; o += 2) {
    Lanes::V acc[R][2];
    score_groups<R, 2, D>(q, hd, kt + o * L * hd, acc);
    SKAINET_UNROLL
    for (int r = 0; r < R; ++r) {
      store_part(s + r * a.scores_stride + L * o, acc[r][0], m - L * o);
      store_part(s + r * a.scores_stride + L * o + L, acc[r][1], m - L * o - L);
    }
  }
  if (o < groups) {
    Lanes::V acc[R][1];
    score_groups<R, 1, D>(q, hd, kt + o * L * hd, acc);
    SKAINET_UNROLL
    for (int r = 0; r < R; ++r) store_part(s + r * a.scores_stride + L * o, acc[r][0], m - L * o);
  }
}

// fn(h, R) over the heads in runs of R = N (a power of two) while N are left, then of the powers of
// two below it: a grouped-query task's 8 heads are one run, a lone head's task one of 1.
template <int N, class Fn>
void by_head_runs(int64_t heads, Fn&& fn) noexcept {
  int64_t h = 0;
  for (; h + N <= heads; h += N) fn(h, std::integral_constant<int, N>{});
  if constexpr (N > 1) {
    if (h < heads) by_head_runs<N / 2>(heads - h, [&](int64_t i, auto r) { fn(h + i, r); });
  }
}

// The raw scores q_h · k_j of every head, a block of cells at a time: the block's keys converted to
// floats eight cells at a time (the rows past the visible end zeroed) and transposed into octets, laid
// side by side in groups of Lanes::kCount cells, then the heads in runs (by_head_runs) over the groups.
// Summing across a vector's lanes per cell (or per eight cells) left each score waiting on a chain of
// horizontal adds; here a lane is a cell.
template <class W, int64_t D>
void attend_scores(const Attend& a) noexcept {
  constexpr int64_t L = Lanes::kCount;
  alignas(64) float rows[8 * kAttendMaxHeadDim];
  alignas(64) float kt[kBlockFloats];
  const int64_t hd = D > 0 ? D : a.head_dim, block = kBlockFloats / hd / L * L;
  for (int64_t j0 = a.begin; j0 < a.end; j0 += block) {
    const int64_t m = std::min(block, a.end - j0), octets = (m + L - 1) / L * (L / 8);
    for (int64_t o = 0; o < octets; ++o)
      key_octet<W, D>(a, j0 + 8 * o, std::clamp<int64_t>(m - 8 * o, 0, 8), rows, kt + 8 * o / L * L * hd + 8 * o % L,
                      L);
    by_head_runs<Lanes::kScoreHeads>(a.heads,
                                     [&](int64_t h, auto r) { score_heads<decltype(r)::value, D>(a, h, kt, j0, m); });
  }
}

// out[h][d0, d0 + V vectors) += sum_j p_h[j0 + j] value_j for R heads from h over the m converted
// values in vb (rows of hd floats; the last vector may pass the head's end, whose lanes are neither
// read from out nor written): R * V accumulators, each value vector loaded once for the R heads.
template <int R, int V>
void attend_values_of(const Attend& a, int64_t h, int64_t d0, const float* vb, int64_t j0, int64_t m) noexcept {
  constexpr int64_t L = Lanes::kCount;
  const int64_t hd = a.head_dim;
  Lanes::V acc[R][V];
  SKAINET_UNROLL
  for (int r = 0; r < R; ++r) {
    SKAINET_UNROLL
    for (int v = 0; v < V; ++v) acc[r][v] = load_part(a.out + (h + r) * hd + d0 + L * v, hd - d0 - L * v);
  }
  const float* p = a.scores + h * a.scores_stride + j0;
  for (int64_t j = 0; j < m; ++j) {
    Lanes::V val[V];
    SKAINET_UNROLL
    for (int v = 0; v < V; ++v) {
      val[v] = Lanes::loadu(vb + j * hd + d0 + L * v);
      __asm__("" : "+v"(val[v]));  // loaded once for the R heads (as the keys in score_groups)
    }
    SKAINET_UNROLL
    for (int r = 0; r < R; ++r) {
      const Lanes::V pr = Lanes::set1(p[r * a.scores_stride + j]);
      SKAINET_UNROLL
      for (int v = 0; v < V; ++v) acc[r][v] = Lanes::fmadd(pr, val[v], acc[r][v]);
    }
  }
  SKAINET_UNROLL
  for (int r = 0; r < R; ++r) {
    SKAINET_UNROLL
    for (int v = 0; v < V; ++v) store_part(a.out + (h + r) * hd + d0 + L * v, acc[r][v], hd - d0 - L * v);
  }
}

template <int R>
void attend_values_heads(const Attend& a, int64_t h, const float* vb, int64_t j0, int64_t m) noexcept {
  constexpr int64_t L = Lanes::kCount;
  for (int64_t d0 = 0; d0 < a.head_dim; d0 += 4 * L) {
    switch (std::min<int64_t>(4, (a.head_dim - d0 + L - 1) / L)) {
      case 4: attend_values_of<R, 4>(a, h, d0, vb, j0, m); break;
      case 3: attend_values_of<R, 3>(a, h, d0, vb, j0, m); break;
      case 2: attend_values_of<R, 2>(a, h, d0, vb, j0, m); break;
      default: attend_values_of<R, 1>(a, h, d0, vb, j0, m); break;
    }
  }
}

// out_h = sum_j p_h[j] value_j: the values converted to floats a block at a time, then read by the
// heads in runs. A head size that is not a whole number of vectors (a multiple of 8, attend_takes)
// reads up to kCount - 8 floats past a row (the next row's, or the zeroed slack after the block),
// into lanes that are not stored.
template <class W, int64_t D>
void attend_values_in(const Attend& a) noexcept {
  constexpr int64_t kSlack = Lanes::kCount - 8;
  alignas(64) float vb[kBlockFloats + kSlack];
  const int64_t hd = D > 0 ? D : a.head_dim, block = kBlockFloats / hd;
  std::fill(a.out, a.out + a.heads * hd, 0.0f);
  for (int64_t j0 = a.begin; j0 < a.end; j0 += block) {
    const int64_t m = std::min(block, a.end - j0);
    convert_cells<W, D>(a, a.v, a.v_stride, j0, m, vb);
    std::fill(vb + m * hd, vb + m * hd + kSlack, 0.0f);
    by_head_runs<Lanes::kValueHeads>(
        a.heads, [&](int64_t h, auto r) { attend_values_heads<decltype(r)::value>(a, h, vb, j0, m); });
  }
}

// fn(D) with D = 64 when the head size is 64 (the common one, whose loops are then unrolled), else
// D = 0 (the size taken at run time).
template <class Fn>
void by_head_dim(int64_t head_dim, Fn&& fn) noexcept {
  if (head_dim == 64)
    fn(std::integral_constant<int64_t, 64>{});
  else
    fn(std::integral_constant<int64_t, 0>{});
}

// The scores of a cache of keys W, and the values' product: FormatKernels::attend_keys and
// attend_values.
template <class W>
void attend_keys(const Attend& a) noexcept {
  by_head_dim(a.head_dim, [&](auto d) { attend_scores<W, decltype(d)::value>(a); });
}
template <class W>
void attend_values(const Attend& a) noexcept {
  by_head_dim(a.head_dim, [&](auto d) { attend_values_in<W, decltype(d)::value>(a); });
}

}  // namespace
}  // namespace skainet::kernels::x86
