// AVX-512 (F, BW, VL, VNNI) kernels: 512-bit float dot products with masked tails for dense
// weights; the int8 dot products of simd_int8.hpp on vpdpbusd (one instruction for the u8 x s8
// multiply and the 4-way add that AVX2 spends three on).
#if defined(SKAINET_X86_KERNELS)

#define SKAINET_X86_VNNI 1
#include "kernels/x86/avx_unit.hpp"
#include "kernels/x86/transpose_dwords.hpp"

namespace skainet::kernels::x86 {
namespace {

inline __mmask16 tail_mask(int64_t left) noexcept {
  return left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1u);
}

// Sixteen lanes of weights as floats from element i; masked lanes read nothing.
struct F32Load {
  static constexpr int64_t kBytes = 4;  // per element
  static __m512 at(const std::byte* w, int64_t i, __mmask16 m) noexcept {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(w) + i);
  }
};
struct F16Load {
  static constexpr int64_t kBytes = 2;
  static __m512 at(const std::byte* w, int64_t i, __mmask16 m) noexcept {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w + 2 * i));
  }
};
struct BF16Load {
  static constexpr int64_t kBytes = 2;
  static __m512 at(const std::byte* w, int64_t i, __mmask16 m) noexcept {
    const __m256i h = _mm256_maskz_loadu_epi16(m, w + 2 * i);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};

template <class W>
float dot_dense(const std::byte* w, const std::byte* xb, int64_t k, const ActLayout&) noexcept {
  const auto* x = reinterpret_cast<const float*>(xb);
  const __mmask16 all = 0xffff;
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= k; i += 64) {
    prefetch_ahead(
        w + i * W::kBytes,
        64 * W::kBytes);  // per 64 elements: F16 decode 12.2 -> 13.4 t/s against a whole row ahead (dot_rows)
    a0 = _mm512_fmadd_ps(W::at(w, i, all), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(W::at(w, i + 16, all), _mm512_loadu_ps(x + i + 16), a1);
    a2 = _mm512_fmadd_ps(W::at(w, i + 32, all), _mm512_loadu_ps(x + i + 32), a2);
    a3 = _mm512_fmadd_ps(W::at(w, i + 48, all), _mm512_loadu_ps(x + i + 48), a3);
  }
  for (; i < k; i += 16) {
    const __mmask16 m = tail_mask(k - i);
    a0 = _mm512_fmadd_ps(W::at(w, i, m), _mm512_maskz_loadu_ps(m, x + i), a0);
  }
  return Vec::sum(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

// Q4_0 against Q8x32 for one x row (decode), two blocks per 512-bit register: the two blocks' 32
// nibble bytes become [lo0 hi0 lo1 hi1] with one shift, one lane shuffle and one mask; their two F16
// scales convert together and spread over the lanes with one permute. The -8 offsets fold into a
// two-lane sum of s * ds.
float dot_q4_0_x2(const std::byte* w, const std::byte* xr, int64_t k, const ActLayout& L) noexcept {
  constexpr int64_t kB = sizeof(BlockQ4_0);
  const Act32 a = act32(xr, L);
  const int64_t nb = k / 32;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  __m512 acc = _mm512_setzero_ps();
  __m128 offset = _mm_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const std::byte* p = w + b * kB;
    const __m256i qs =
        _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(p + kB + 2), reinterpret_cast<const __m128i*>(p + 2));
    __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(qs), _mm256_srli_epi16(qs, 4), 1);
    q = _mm512_and_si512(_mm512_shuffle_i64x2(q, q, _MM_SHUFFLE(3, 1, 2, 0)), low4);
    const __m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, _mm512_loadu_si512(a.q + 32 * b));
    uint16_t h0, h1;
    std::memcpy(&h0, p, 2);
    std::memcpy(&h1, p + kB, 2);
    const __m128 sw = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(h0 | (uint32_t{h1} << 16))));
    const __m128 dx = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(a.d + b)));
    const __m512 scale = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_mul_ps(sw, dx)));
    acc = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(sum), acc);
    offset = _mm_fmadd_ps(sw, _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(a.sums + b))), offset);
  }
  float tail = 0.0f;
  if (b < nb) {  // an odd last block
    const std::byte* p = w + b * kB;
    const float s = half_at(p);
    tail =
        s * (a.d[b] * static_cast<float>(hsum_i32(mul_sum(nibbles32(p + 2), loadu(a.q + 32 * b)))) - 8.0f * a.sums[b]);
  }
  alignas(16) float o[4];
  _mm_store_ps(o, offset);
  return Vec::sum(acc) - 8.0f * (o[0] + o[1]) + tail;
}

// Dense weights against several x rows (prefill): 4 weight rows x 4 x rows of 16-lane accumulators,
// each weight vector converted once for 4 x rows and each x vector loaded once for 4 weight rows.
// Leftover rows take the one-row dot.
template <class W>
void tile_dense(const std::byte* w, int64_t w_stride, const std::byte* x, int64_t x_stride, int64_t k, const ActLayout&,
                float* out) noexcept {
  __m512 acc[4][4];
  SKAINET_UNROLL
  for (int i = 0; i < 4; ++i) {
    SKAINET_UNROLL
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t e = 0; e < k; e += 16) {
    const __mmask16 m = tail_mask(k - e);
    __m512 wv[4];
    SKAINET_UNROLL
    for (int i = 0; i < 4; ++i) wv[i] = W::at(w + i * w_stride, e, m);
    SKAINET_UNROLL
    for (int j = 0; j < 4; ++j) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(x + j * x_stride) + e);
      SKAINET_UNROLL
      for (int i = 0; i < 4; ++i) acc[i][j] = _mm512_fmadd_ps(wv[i], xv, acc[i][j]);
    }
  }
  SKAINET_UNROLL
  for (int i = 0; i < 4; ++i) {
    SKAINET_UNROLL
    for (int j = 0; j < 4; ++j) out[i * 4 + j] = Vec::sum(acc[i][j]);
  }
}

// F16/BF16 weights against several x rows (prefill): a tile of 6 weight rows is converted to floats
// once per call, a chunk of k at a time, and every group of 4 x rows multiplies the converted chunk
// from L1: 6 x 4 accumulators and nothing but loads and FMAs in the inner loop. (In tile_dense the
// conversion, two uops on the FMA ports per vector, is paid for every 4 x rows: a third of its time.)
// 6 x 4 rather than 4 x 6: the x rows stream from L2 once per weight tile, and 4 x loads per 24 FMAs
// instead of 6 keep that stream under what L2 delivers.
constexpr int kConvertedRows = 6;
constexpr int64_t kConvertedChunk = 1024;  // floats per row: 6 rows are 24 KiB

template <int RX>
void multiply_converted(const float (&wf)[kConvertedRows][kConvertedChunk], int64_t len, const std::byte* x,
                        int64_t x_stride, float* out, int64_t out_row, bool first) noexcept {
  constexpr int RW = kConvertedRows;
  __m512 acc[RW][RX];
  SKAINET_UNROLL
  for (int i = 0; i < RW; ++i) {
    SKAINET_UNROLL
    for (int j = 0; j < RX; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t e = 0; e < len; e += 16) {
    const __mmask16 m = tail_mask(len - e);
    __m512 xv[RX];
    SKAINET_UNROLL
    for (int j = 0; j < RX; ++j) xv[j] = _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(x + j * x_stride) + e);
    SKAINET_UNROLL
    for (int i = 0; i < RW; ++i) {
      const __m512 wv = _mm512_load_ps(&wf[i][e]);
      SKAINET_UNROLL
      for (int j = 0; j < RX; ++j) acc[i][j] = _mm512_fmadd_ps(wv, xv[j], acc[i][j]);
    }
  }
  store_sums<RW, RX>(acc, out, out_row, first);
}

template <class W>
void gemm_converted(const Gemv& g) noexcept {
  constexpr int RW = kConvertedRows;
  if (g.n < 2 || g.out_col != 4) return gemm<&tile_dense<W>, 4, 4, &dot_dense<W>, Act::None>(g);
  const int64_t rows_tiled = g.rows - g.rows % RW, out_row = g.out_row / 4;
  alignas(64) float wf[RW][kConvertedChunk];
  for (int64_t o = 0; o < rows_tiled; o += RW) {
    float* out = reinterpret_cast<float*>(g.out) + o;
    for (int64_t e0 = 0; e0 < g.k; e0 += kConvertedChunk) {
      const int64_t len = std::min(kConvertedChunk, g.k - e0);
      for (int i = 0; i < RW; ++i)
        for (int64_t e = 0; e < len; e += 16)
          _mm512_store_ps(&wf[i][e], W::at(g.w + (o + i) * g.w_stride, e0 + e, tail_mask(len - e)));
      const std::byte* x = g.x + 4 * e0;
      int64_t r = 0;
      for (; r + 4 <= g.n; r += 4)
        multiply_converted<4>(wf, len, x + r * g.x_stride, g.x_stride, out + r * out_row, out_row, e0 == 0);
      for (; r + 2 <= g.n; r += 2)
        multiply_converted<2>(wf, len, x + r * g.x_stride, g.x_stride, out + r * out_row, out_row, e0 == 0);
      if (r < g.n) multiply_converted<1>(wf, len, x + r * g.x_stride, g.x_stride, out + r * out_row, out_row, e0 == 0);
    }
  }
  dot_rows<&dot_dense<W>>(g, rows_tiled, ActLayout{});
}

// Dense weights with a short k (attention's scores against the K cache: k is the head dimension;
// small models' projections) against several x rows. A row-major dot product ends every (weight row,
// x row) pair in a horizontal sum, which at k <= 128 costs as much as the products. Instead a block of
// 16 or 32 weight rows is transposed to floats once per call (element c of the block's rows is one
// or two vectors) and each x row runs k broadcast FMAs into them: no horizontal work at all.
//
// The block is 32 rows (two vectors) where k <= 128 and more than 16 rows are left, else 16 (one
// vector: k up to 256, the 16 KiB either way). ops::matmul_into splits a 2-D weight between 16-row
// blocks, so a thread's share of a small model's projection is often just 16 rows: a 32-row block
// there left half of every product's lanes zero.
constexpr int64_t kShortK = 256;
constexpr int64_t kShortBlockFloats = kShortK * 16;

// Weight rows [o0, o0 + rows) (rows <= 16 V) as floats, element c of row i at wt[c * 16 V + i];
// rows past them and columns past k are 0 (up to k rounded up to 16).
template <class W, int V>
void transpose_block(const Gemv& g, int64_t o0, int64_t rows, float* wt) noexcept {
  for (int64_t c0 = 0; c0 < g.k; c0 += 16) {
    const __mmask16 m = tail_mask(g.k - c0);
    SKAINET_UNROLL
    for (int v = 0; v < V; ++v) {
      __m512 r[16];
      SKAINET_UNROLL
      for (int i = 0; i < 16; ++i) {
        const int64_t row = 16 * v + i;
        r[i] = row < rows ? W::at(g.w + (o0 + row) * g.w_stride, c0, m) : _mm512_setzero_ps();
      }
      transpose_floats(r);
      SKAINET_UNROLL
      for (int j = 0; j < 16; ++j) _mm512_store_ps(wt + (c0 + j) * 16 * V + 16 * v, r[j]);
    }
  }
}

// x rows [r, r + R) against the transposed block: R * V accumulators.
template <int V, int R>
void short_k_rows(const float* wt, const Gemv& g, int64_t r, int64_t o0, const __mmask16 (&m)[2]) noexcept {
  __m512 acc[R][V];
  SKAINET_UNROLL
  for (int j = 0; j < R; ++j) {
    SKAINET_UNROLL
    for (int v = 0; v < V; ++v) acc[j][v] = _mm512_setzero_ps();
  }
  for (int64_t c = 0; c < g.k; ++c) {
    __m512 w[V];
    SKAINET_UNROLL
    for (int v = 0; v < V; ++v) w[v] = _mm512_load_ps(wt + c * 16 * V + 16 * v);
    SKAINET_UNROLL
    for (int j = 0; j < R; ++j) {
      const __m512 xv = _mm512_set1_ps(reinterpret_cast<const float*>(g.x + (r + j) * g.x_stride)[c]);
      SKAINET_UNROLL
      for (int v = 0; v < V; ++v) acc[j][v] = _mm512_fmadd_ps(xv, w[v], acc[j][v]);
    }
  }
  SKAINET_UNROLL
  for (int j = 0; j < R; ++j) {
    float* out = reinterpret_cast<float*>(g.out + (r + j) * g.out_row) + o0;
    SKAINET_UNROLL
    for (int v = 0; v < V; ++v) _mm512_mask_storeu_ps(out + 16 * v, m[v], acc[j][v]);
  }
}

// Every x row against one block: R rows at a time (the accumulators and the block's vectors fill
// most of the 32 registers).
template <int V, int R>
void short_k_block(const float* wt, const Gemv& g, int64_t o0, int64_t rows) noexcept {
  const __mmask16 m[2] = {tail_mask(rows), tail_mask(std::max<int64_t>(rows - 16, 0))};
  in_row_tiles<R>(g.n, [&]<int T>(int64_t r) noexcept { short_k_rows<V, T>(wt, g, r, o0, m); });
}

template <class W>
void gemm_short_k(const Gemv& g) noexcept {
  alignas(64) float wt[kShortBlockFloats];
  for (int64_t o0 = 0; o0 < g.rows;) {
    const bool wide = g.rows - o0 > 16 && g.k <= kShortK / 2;
    const int64_t rows = std::min<int64_t>(wide ? 32 : 16, g.rows - o0);
    if (wide) {
      transpose_block<W, 2>(g, o0, rows, wt);
      short_k_block<2, 6>(wt, g, o0, rows);
    } else {
      transpose_block<W, 1>(g, o0, rows, wt);
      short_k_block<1, 8>(wt, g, o0, rows);
    }
    o0 += rows;
  }
}

// The dense entries: short k with several x rows as above, else the tiles.
template <class W, GemvFn Tiles>
void gemm_dense(const Gemv& g) noexcept {
  if (g.n >= 2 && g.k <= kShortK && g.out_col == 4) return gemm_short_k<W>(g);
  Tiles(g);
}

// GemmT on R x rows and V vectors of output columns (up to 64) at a time: each weight row c is loaded
// once and multiplied by every x row's x[r][c], R * V accumulators in registers. Fewer columns, more
// rows: a head of 8 (stories260K's values product) used to run 4 vectors for 8 live lanes.
template <class W, int V, int R>
void gemm_t_rows(const GemmT& g, int64_t r0, int64_t o0, const __mmask16 (&m)[4]) noexcept {
  __m512 acc[R][V];
  SKAINET_UNROLL
  for (int r = 0; r < R; ++r) {
    SKAINET_UNROLL
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  const std::byte* x0 = g.x + r0 * g.x_stride;
  for (int64_t c = 0; c < g.k; ++c) {
    const std::byte* wc = g.w + c * g.w_stride;
    __m512 wv[V];
    SKAINET_UNROLL
    for (int v = 0; v < V; ++v) wv[v] = W::at(wc, o0 + 16 * v, m[v]);
    SKAINET_UNROLL
    for (int r = 0; r < R; ++r) {
      const __m512 p = _mm512_set1_ps(reinterpret_cast<const float*>(x0 + r * g.x_stride)[c]);
      SKAINET_UNROLL
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(p, wv[v], acc[r][v]);
    }
  }
  SKAINET_UNROLL
  for (int r = 0; r < R; ++r) {
    SKAINET_UNROLL
    for (int v = 0; v < V; ++v)
      _mm512_mask_storeu_ps(reinterpret_cast<float*>(g.out + (r0 + r) * g.out_row) + o0 + 16 * v, m[v], acc[r][v]);
  }
}

// Every x row against V vectors of columns from o0: R rows at a time (R * V = 16 accumulators).
template <class W, int V>
void gemm_t_columns(const GemmT& g, int64_t o0, const __mmask16 (&m)[4]) noexcept {
  in_row_tiles<16 / V>(g.n, [&]<int T>(int64_t r0) noexcept { gemm_t_rows<W, V, T>(g, r0, o0, m); });
}

template <class W>
void gemm_t(const GemmT& g) noexcept {
  for (int64_t o0 = 0; o0 < g.cols; o0 += 64) {
    const int64_t left = g.cols - o0;
    const __mmask16 m[4] = {tail_mask(left), tail_mask(std::max<int64_t>(left - 16, 0)),
                            tail_mask(std::max<int64_t>(left - 32, 0)), tail_mask(std::max<int64_t>(left - 48, 0))};
    if (left > 32)
      gemm_t_columns<W, 4>(g, o0, m);
    else if (left > 16)
      gemm_t_columns<W, 2>(g, o0, m);
    else
      gemm_t_columns<W, 1>(g, o0, m);
  }
}

// The rows of the types whose kernels are this level's own (isa.hpp; avx_unit.hpp holds the rest); the
// activation a row names is the one its kernels' dot products read.
constexpr FormatKernels kOwnFormats[] = {
    {.type = GgmlType::F32,
     .gemv = &gemm_dense<F32Load, &gemm<&tile_dense<F32Load>, 4, 4, &dot_dense<F32Load>, Act::None>>,
     .transposed = &gemm_t<F32Load>,
     .attend_keys = &attend_keys<KvF32>,
     .attend_values = &attend_values<KvF32>},
    {.type = GgmlType::F16,
     .gemv = &gemm_dense<F16Load, &gemm_converted<F16Load>>,
     .transposed = &gemm_t<F16Load>,
     .attend_keys = &attend_keys<KvF16>,
     .attend_values = &attend_values<KvF16>},
    {.type = GgmlType::BF16,
     .gemv = &gemm_dense<BF16Load, &gemm_converted<BF16Load>>,
     .attend_keys = &attend_keys<KvBF16>,
     .attend_values = &attend_values<KvBF16>},
    {.type = GgmlType::Q4_0,
     .act = Act::Q8x32,
     .gemv = gemm_legacy<Q4_0Dec, &dot_q4_0_x2>,
     .feed = &gemm_feed<FeedQ4_0, &dot_q4_0_x2>,
     .attend_keys = &attend_keys<KvQ4_0>,
     .attend_values = &attend_values<KvQ4_0>},
    {.type = GgmlType::IQ4_XS, .act = Act::Q8x256, .gemv = gemm_k<IQ4_XSDecode, &dot_iq4_xs, KStepWide>},
};

constexpr auto kFormats = with_shared_formats(kOwnFormats);

}  // namespace

constinit const IsaKernels kAvx512Kernels = isa_kernels("avx512", kFormats);

}  // namespace skainet::kernels::x86

#endif  // SKAINET_X86_KERNELS
