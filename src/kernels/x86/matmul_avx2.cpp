// AVX2 + FMA + F16C kernels: 256-bit float dot products for dense weights, vpmaddubsw int8 dot
// products for packed ones (simd_int8.hpp).
#if defined(SKAINET_X86_KERNELS)

#define SKAINET_X86_VNNI 0
#include "kernels/x86/avx_unit.hpp"

namespace skainet::kernels::x86 {
namespace {

// Eight lanes of weights as floats from element i of a dense row.
struct F32Load {
  static constexpr int64_t kBytes = 4;
  static __m256 at(const std::byte* w, int64_t i) noexcept {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(w) + i);
  }
  static float one(const std::byte* w, int64_t i) noexcept {
    float v;
    std::memcpy(&v, w + 4 * i, 4);
    return v;
  }
};
struct F16Load {
  static constexpr int64_t kBytes = 2;
  static __m256 at(const std::byte* w, int64_t i) noexcept {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i)));
  }
  static float one(const std::byte* w, int64_t i) noexcept { return half_at(w + 2 * i); }
};
struct BF16Load {
  static constexpr int64_t kBytes = 2;
  static __m256 at(const std::byte* w, int64_t i) noexcept {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static float one(const std::byte* w, int64_t i) noexcept {
    uint16_t h;
    std::memcpy(&h, w + 2 * i, 2);
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
};

// A decode step's dense row streams from memory: asked for this far ahead of the FMAs, as the
// hardware prefetchers alone left the 1.1B F16 file's decode at 88% of the read ceiling (96-98% with).
inline constexpr int64_t kDensePrefetchBytes = 1024;

template <class W>
float dot_dense(const std::byte* w, const std::byte* xb, int64_t k, const ActLayout&) noexcept {
  const auto* x = reinterpret_cast<const float*>(xb);
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    SKAINET_UNROLL
    for (int64_t line = 0; line < 32 * W::kBytes; line += 64)
      _mm_prefetch(reinterpret_cast<const char*>(w) + i * W::kBytes + kDensePrefetchBytes + line, _MM_HINT_T0);
    a0 = _mm256_fmadd_ps(W::at(w, i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(W::at(w, i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(W::at(w, i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(W::at(w, i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  for (; i + 8 <= k; i += 8) a0 = _mm256_fmadd_ps(W::at(w, i), _mm256_loadu_ps(x + i), a0);
  float tail = 0.0f;
  for (; i < k; ++i) {
    float xv;
    std::memcpy(&xv, xb + 4 * i, 4);
    tail += W::one(w, i) * xv;
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))) + tail;
}

// Dense weights against several x rows (prefill): 2 weight rows x 4 x rows of 8-lane accumulators,
// each weight vector converted once for 4 x rows; the k % 8 tail in scalar. Leftover rows take the
// one-row dot.
template <class W>
void tile_dense(const std::byte* w, int64_t w_stride, const std::byte* x, int64_t x_stride, int64_t k, const ActLayout&,
                float* out) noexcept {
  __m256 acc[2][4];
  SKAINET_UNROLL
  for (int i = 0; i < 2; ++i) {
    SKAINET_UNROLL
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  const int64_t kv = k - k % 8;
  for (int64_t e = 0; e < kv; e += 8) {
    const __m256 w0 = W::at(w, e), w1 = W::at(w + w_stride, e);
    SKAINET_UNROLL
    for (int j = 0; j < 4; ++j) {
      const __m256 xv = _mm256_loadu_ps(reinterpret_cast<const float*>(x + j * x_stride) + e);
      acc[0][j] = _mm256_fmadd_ps(w0, xv, acc[0][j]);
      acc[1][j] = _mm256_fmadd_ps(w1, xv, acc[1][j]);
    }
  }
  SKAINET_UNROLL
  for (int i = 0; i < 2; ++i) {
    SKAINET_UNROLL
    for (int j = 0; j < 4; ++j) {
      float tail = 0.0f;
      for (int64_t e = kv; e < k; ++e)
        tail += W::one(w + i * w_stride, e) * reinterpret_cast<const float*>(x + j * x_stride)[e];
      out[i * 4 + j] = hsum(acc[i][j]) + tail;
    }
  }
}

// Dense weights with a short k (attention's scores against the K cache, where k is the head
// dimension; small models' projections, k <= 256) against several x rows. The tiles above end every (weight
// row, x row) pair in a horizontal sum, which at k <= 128 costs as much as the products (stories260K's
// heads of 8: one FMA, then the sum). Instead, as the AVX-512 unit does, 16 weight rows are transposed
// to floats once per call (wt[c] holds element c of the 16 rows) and each x row runs k broadcast FMAs
// into 2 vectors of 16 outputs: 6 x rows at a time, 12 accumulators, no horizontal work at all.
constexpr int64_t kShortK = 256;  // 16 rows of it: 16 KiB, half of L1
constexpr int64_t kShortRows = 16;

template <int R>
void short_k_rows(const float (&wt)[kShortK][kShortRows], const Gemv& g, int64_t r, int64_t o0, int64_t rows) noexcept {
  __m256 acc[R][2];
  SKAINET_UNROLL
  for (int j = 0; j < R; ++j) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
  for (int64_t c = 0; c < g.k; ++c) {
    const __m256 w0 = _mm256_load_ps(wt[c]), w1 = _mm256_load_ps(wt[c] + 8);
    SKAINET_UNROLL
    for (int j = 0; j < R; ++j) {
      const __m256 xv = _mm256_broadcast_ss(reinterpret_cast<const float*>(g.x + (r + j) * g.x_stride) + c);
      acc[j][0] = _mm256_fmadd_ps(xv, w0, acc[j][0]);
      acc[j][1] = _mm256_fmadd_ps(xv, w1, acc[j][1]);
    }
  }
  SKAINET_UNROLL
  for (int j = 0; j < R; ++j) {
    float* out = reinterpret_cast<float*>(g.out + (r + j) * g.out_row) + o0;
    if (rows == kShortRows) {
      _mm256_storeu_ps(out, acc[j][0]);
      _mm256_storeu_ps(out + 8, acc[j][1]);
    } else {
      alignas(32) float part[kShortRows];
      _mm256_store_ps(part, acc[j][0]);
      _mm256_store_ps(part + 8, acc[j][1]);
      std::memcpy(out, part, static_cast<size_t>(rows) * 4);
    }
  }
}

// Weight rows [o0, o0 + rows) as floats in wt[c][i] (element c of row i), rows past them 0.
template <class W>
void transpose_rows(const Gemv& g, int64_t o0, int64_t rows, float (&wt)[kShortK][kShortRows]) noexcept {
  alignas(32) float row[kShortK];
  const int64_t kv = g.k - g.k % 8;
  for (int64_t i = 0; i < kShortRows; ++i) {
    const std::byte* w = g.w + (o0 + i) * g.w_stride;
    if (i < rows) {
      for (int64_t c = 0; c < kv; c += 8) _mm256_store_ps(row + c, W::at(w, c));
      for (int64_t c = kv; c < g.k; ++c) row[c] = W::one(w, c);
    }
    for (int64_t c = 0; c < g.k; ++c) wt[c][i] = i < rows ? row[c] : 0.0f;
  }
}

template <class W>
void gemm_short_k(const Gemv& g) noexcept {
  alignas(32) float wt[kShortK][kShortRows];
  for (int64_t o0 = 0; o0 < g.rows; o0 += kShortRows) {
    const int64_t rows = std::min(kShortRows, g.rows - o0);
    transpose_rows<W>(g, o0, rows, wt);
    in_row_tiles<6>(g.n, [&]<int R>(int64_t r) noexcept { short_k_rows<R>(wt, g, r, o0, rows); });
  }
}

// The dense entries: short k with several x rows as above, else the 2 x 4 tiles.
template <class W>
void gemm_dense(const Gemv& g) noexcept {
  if (g.n >= 2 && g.k <= kShortK && g.out_col == 4) return gemm_short_k<W>(g);
  gemm<&tile_dense<W>, 2, 4, &dot_dense<W>, Act::None>(g);
}

// GemmT on up to 2 x rows and 32 output columns at a time (4 vectors; 16 registers hold 8
// accumulators, the weight row and the broadcast). Columns past the last multiple of 8 in scalar.
template <class W, int R>
void gemm_t_rows(const GemmT& g, int64_t r0, int64_t o0, int vecs) noexcept {
  __m256 acc[R][4];
  SKAINET_UNROLL
  for (int r = 0; r < R; ++r) {
    SKAINET_UNROLL
    for (int v = 0; v < 4; ++v) acc[r][v] = _mm256_setzero_ps();
  }
  const std::byte* x0 = g.x + r0 * g.x_stride;
  for (int64_t c = 0; c < g.k; ++c) {
    const std::byte* wc = g.w + c * g.w_stride;
    __m256 wv[4];
    SKAINET_UNROLL
    for (int v = 0; v < 4; ++v) wv[v] = v < vecs ? W::at(wc, o0 + 8 * v) : _mm256_setzero_ps();
    SKAINET_UNROLL
    for (int r = 0; r < R; ++r) {
      const __m256 p = _mm256_set1_ps(reinterpret_cast<const float*>(x0 + r * g.x_stride)[c]);
      SKAINET_UNROLL
      for (int v = 0; v < 4; ++v) acc[r][v] = _mm256_fmadd_ps(p, wv[v], acc[r][v]);
    }
  }
  SKAINET_UNROLL
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < vecs; ++v)
      _mm256_storeu_ps(reinterpret_cast<float*>(g.out + (r0 + r) * g.out_row) + o0 + 8 * v, acc[r][v]);
}

template <class W>
void gemm_t(const GemmT& g) noexcept {
  const int64_t vec_cols = g.cols - g.cols % 8;
  for (int64_t o0 = 0; o0 < vec_cols; o0 += 32) {
    const int vecs = static_cast<int>(std::min<int64_t>(4, (vec_cols - o0) / 8));
    in_row_tiles<2>(g.n, [&]<int R>(int64_t r0) noexcept { gemm_t_rows<W, R>(g, r0, o0, vecs); });
  }
  for (int64_t r = 0; r < g.n; ++r)
    for (int64_t o = vec_cols; o < g.cols; ++o) {
      float acc = 0.0f;
      for (int64_t c = 0; c < g.k; ++c)
        acc += reinterpret_cast<const float*>(g.x + r * g.x_stride)[c] * W::one(g.w + c * g.w_stride, o);
      reinterpret_cast<float*>(g.out + r * g.out_row)[o] = acc;
    }
}

// The rows of the types whose kernels are this level's own (isa.hpp; avx_unit.hpp holds the rest); the
// activation a row names is the one its kernels' dot products read.
constexpr FormatKernels kOwnFormats[] = {
    {.type = GgmlType::F32,
     .gemv = &gemm_dense<F32Load>,
     .transposed = &gemm_t<F32Load>,
     .attend_keys = &attend_keys<KvF32>,
     .attend_values = &attend_values<KvF32>},
    {.type = GgmlType::F16,
     .gemv = &gemm_dense<F16Load>,
     .transposed = &gemm_t<F16Load>,
     .attend_keys = &attend_keys<KvF16>,
     .attend_values = &attend_values<KvF16>},
    {.type = GgmlType::BF16,
     .gemv = &gemm_dense<BF16Load>,
     .attend_keys = &attend_keys<KvBF16>,
     .attend_values = &attend_values<KvBF16>},
    {.type = GgmlType::Q4_0,
     .act = Act::Q8x32,
     .gemv = gemm_legacy<Q4_0Dec, &dot_legacy<Q4_0Dec>>,
     .feed = &gemm_feed<FeedQ4_0, &dot_legacy<Q4_0Dec>>,
     .attend_keys = &attend_keys<KvQ4_0>,
     .attend_values = &attend_values<KvQ4_0>},
    {.type = GgmlType::IQ4_XS, .act = Act::Q8x256, .gemv = &gemv<&dot_iq4_xs, Act::Q8x256>},
};

constexpr auto kFormats = with_shared_formats(kOwnFormats);

}  // namespace

constinit const IsaKernels kAvx2Kernels = isa_kernels("avx2", kFormats);

}  // namespace skainet::kernels::x86

#endif  // SKAINET_X86_KERNELS
