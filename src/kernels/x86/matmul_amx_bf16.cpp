// AMX-BF16 prefill for dense F16 and BF16 weights (file order): the tile unit multiplies 16 weight
// rows by 16 activation rows over 32 elements per instruction, 32 times the multiply-adds of an
// AVX-512 FMA.
//
// Exact enough to stand in for F32 arithmetic: BF16 keeps 8 significant bits, so both sides are
// split into two BF16 parts. An F16 weight (11 bits) is w = wh + wl exactly (wl = w - bf16(w) has at
// most 3 bits); an activation is x = xh + xl + e with |e| <= 2^-18 |x| (split_bf16_pairs). The tile
// unit forms each product of two BF16 exactly in F32 and accumulates in F32, so the three products
// wh xh + wh xl + wl xh give w x within (2^-18 + 2^-18) |w x|: the activation's rest e, and the
// dropped wl xl (|wl| <= 2^-9 |w|, |xl| <= 2^-9 |x|), which would cost a third more tile work for
// 2^-18. llama.cpp's F16 path rounds x to F16 (2^-11). A BF16 weight needs only its two products.
//
// The weight is the A tile (16 rows of 32 consecutive elements, the file's own order: an F16 chunk
// is converted to its two BF16 parts once per call, a BF16 weight is loaded from the file as is);
// the activation is the B tile, laid out once per call by split_bf16_pairs (isa.hpp, Act::Bf16Pairs).
// The accumulator is C[weight row][activation row], transposed into `out` once per 16 x 16 outputs.
// Whatever the tiles do not cover (fewer than 16 activation rows left, the weight rows after the last
// whole 16, k not a multiple of 32, strided output columns) goes to the AVX-512 kernel, which reads
// the F32 rows at the start of the prepared activation.
#if defined(SKAINET_X86_KERNELS)

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "kernels/x86/amx_tiles.hpp"
#include "kernels/x86/isa.hpp"

namespace skainet::kernels::x86 {
namespace {

constexpr int64_t kTile = 16;       // weight rows per A tile, activation rows per B tile
constexpr int64_t kStep = 32;       // elements of k per tile product
constexpr int64_t kChunk = 512;     // elements of k of an F16 weight converted at a time: 2 x 16 KiB
constexpr int64_t kBlockTiles = 4;  // activation tiles per weight tile in the tile registers
constexpr int64_t kSpanTiles = 16;  // activation tiles whose accumulators wait in memory (16 KiB)

// Tile registers: four accumulators (16 weight rows x 64 activation rows), the weight's two parts
// and the activation's two parts. The tile intrinsics paste their register number into the
// assembly text, so these are macros.
#define SKAINET_TMM_WH 4
#define SKAINET_TMM_WL 5
#define SKAINET_TMM_XH 6
#define SKAINET_TMM_XL 7

// Every tile 16 rows of 64 bytes: A 16 x 32 BF16, B 16 pairs x 16 columns, C 16 x 16 F32.
TileConfig full_tiles() noexcept {
  TileConfig c;
  for (int t = 0; t < 8; ++t) c.rows[t] = kTile, c.colsb[t] = 64;
  return c;
}

// 32 floats (lo: elements 0..15, hi: 16..31) as BF16 hi and lo parts, hi the nearest BF16 and lo
// the nearest BF16 to what is left.
inline void split(__m512 lo, __m512 hi, __m512i& h, __m512i& l) noexcept {
  const __m512bh top = _mm512_cvtne2ps_pbh(hi, lo);
  h = reinterpret_cast<const __m512i&>(top);
  const __m512 back_lo = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16));
  const __m512 back_hi =
      _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16));
  const __m512bh rest = _mm512_cvtne2ps_pbh(_mm512_sub_ps(hi, back_hi), _mm512_sub_ps(lo, back_lo));
  l = reinterpret_cast<const __m512i&>(rest);
}

// Act::Bf16Pairs (isa.hpp): row r's F32 copy, and for a row of a whole 16 its column of every B tile
// pair: the 16 pairs of a 32-element step go 64 bytes apart.
void split_bf16_pairs(const float* x, int64_t k, int64_t r, int64_t n, std::byte* prepared) noexcept {
  std::memcpy(prepared + r * act_layout(Act::Bf16Pairs, k).row_bytes, x, static_cast<size_t>(k) * 4);
  if (r >= n / kTile * kTile) return;
  std::byte* tiles =
      prepared + bf16_pairs_tiles_off(n, k) + (r / kTile) * (k / kStep) * 2 * kBf16PairTile + 4 * (r % kTile);
  const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(16));
  for (int64_t s = 0; s < k / kStep; ++s) {
    __m512i h, l;
    split(_mm512_loadu_ps(x + kStep * s), _mm512_loadu_ps(x + kStep * s + 16), h, l);
    std::byte* t = tiles + s * 2 * kBf16PairTile;
    _mm512_i32scatter_epi32(t, rows, h, 4);
    _mm512_i32scatter_epi32(t + kBf16PairTile, rows, l, 4);
  }
}

// The A tiles of 16 weight rows over elements [k0, k0 + len): where the hi and lo parts are and
// their row stride.
struct WeightTiles {
  const std::byte* hi;
  const std::byte* lo;  // null: the weight is exact in BF16
  int64_t stride;
};

struct F16Weight {
  static constexpr bool kLo = true;
  // Converted into buf: hi rows at buf, lo rows after them, kChunk elements a row.
  static WeightTiles at(const std::byte* rows, int64_t w_stride, int64_t k0, int64_t len, uint16_t* buf) noexcept {
    uint16_t* lo = buf + kTile * kChunk;
    for (int64_t i = 0; i < kTile; ++i) {
      const std::byte* w = rows + i * w_stride + 2 * k0;
      for (int64_t e = 0; e < len; e += kStep) {
        const __m512i v = _mm512_loadu_si512(w + 2 * e);
        __m512i h, l;
        split(_mm512_cvtph_ps(_mm512_castsi512_si256(v)), _mm512_cvtph_ps(_mm512_extracti64x4_epi64(v, 1)), h, l);
        _mm512_store_si512(buf + i * kChunk + e, h);
        _mm512_store_si512(lo + i * kChunk + e, l);
      }
    }
    return {reinterpret_cast<const std::byte*>(buf), reinterpret_cast<const std::byte*>(lo), 2 * kChunk};
  }
};

struct BF16Weight {
  static constexpr bool kLo = false;
  static WeightTiles at(const std::byte* rows, int64_t w_stride, int64_t k0, int64_t, uint16_t*) noexcept {
    return {rows + 2 * k0, nullptr, w_stride};
  }
};

// Accumulator j (tile register j) += the weight tile times activation tile j of this step.
#define SKAINET_BF16_PRODUCTS(j)                                          \
  if constexpr (NT > (j)) {                                               \
    const std::byte* xh = x + (j)*x_tile_stride;                          \
    _tile_loadd(SKAINET_TMM_XH, xh, 64);                                  \
    _tile_loadd(SKAINET_TMM_XL, xh + kBf16PairTile, 64);                  \
    _tile_dpbf16ps(j, SKAINET_TMM_WH, SKAINET_TMM_XH);                    \
    _tile_dpbf16ps(j, SKAINET_TMM_WH, SKAINET_TMM_XL);                    \
    if constexpr (kLo) _tile_dpbf16ps(j, SKAINET_TMM_WL, SKAINET_TMM_XH); \
  }
#define SKAINET_BF16_ACC(j, op) \
  if constexpr (NT > (j)) op;

// NT activation tiles against one weight tile over `steps` steps of 32: the accumulators start at
// zero or from acc, and go back to acc. x: the hi B tile of the first activation tile's first step.
template <int NT, bool kLo>
void multiply_block(const WeightTiles& w, int64_t steps, const std::byte* x, int64_t x_tile_stride,
                    float (*acc)[kTile][kTile], bool first) noexcept {
  if (first) {
    SKAINET_BF16_ACC(0, _tile_zero(0))
    SKAINET_BF16_ACC(1, _tile_zero(1)) SKAINET_BF16_ACC(2, _tile_zero(2)) SKAINET_BF16_ACC(3, _tile_zero(3))
  } else {
    SKAINET_BF16_ACC(0, _tile_loadd(0, acc[0], 64))
    SKAINET_BF16_ACC(1, _tile_loadd(1, acc[1], 64)) SKAINET_BF16_ACC(2, _tile_loadd(2, acc[2], 64))
        SKAINET_BF16_ACC(3, _tile_loadd(3, acc[3], 64))
  }
  for (int64_t s = 0; s < steps; ++s, x += 2 * kBf16PairTile) {
    _tile_loadd(SKAINET_TMM_WH, w.hi + 64 * s, w.stride);
    if constexpr (kLo) _tile_loadd(SKAINET_TMM_WL, w.lo + 64 * s, w.stride);
    SKAINET_BF16_PRODUCTS(0) SKAINET_BF16_PRODUCTS(1) SKAINET_BF16_PRODUCTS(2) SKAINET_BF16_PRODUCTS(3)
  }
  SKAINET_BF16_ACC(0, _tile_stored(0, acc[0], 64))
  SKAINET_BF16_ACC(1, _tile_stored(1, acc[1], 64)) SKAINET_BF16_ACC(2, _tile_stored(2, acc[2], 64))
      SKAINET_BF16_ACC(3, _tile_stored(3, acc[3], 64))
}

#undef SKAINET_BF16_PRODUCTS
#undef SKAINET_BF16_ACC

template <bool kLo>
void multiply_blocks(const WeightTiles& w, int64_t steps, const std::byte* x, int64_t x_tile_stride,
                     float (*acc)[kTile][kTile], int64_t tiles, bool first) noexcept {
  for (int64_t t = 0; t < tiles; t += kBlockTiles, x += kBlockTiles * x_tile_stride, acc += kBlockTiles) {
    switch (std::min(kBlockTiles, tiles - t)) {
      case 1: multiply_block<1, kLo>(w, steps, x, x_tile_stride, acc, first); break;
      case 2: multiply_block<2, kLo>(w, steps, x, x_tile_stride, acc, first); break;
      case 3: multiply_block<3, kLo>(w, steps, x, x_tile_stride, acc, first); break;
      default: multiply_block<4, kLo>(w, steps, x, x_tile_stride, acc, first); break;
    }
  }
}

// out[r][o] for the first `groups` 16s of weight rows and the first `rows` (a multiple of 16)
// activation rows, out columns contiguous, k a multiple of 32.
template <class W>
void dense_tiles(const Gemv& g, int64_t groups, int64_t rows) noexcept {
  const Tiles tiles(full_tiles());
  const int64_t steps = g.k / kStep, x_tile_stride = steps * 2 * kBf16PairTile;
  const std::byte* x_tiles = g.x + bf16_pairs_tiles_off(g.n, g.k);
  alignas(64) uint16_t buf[2 * kTile * kChunk];
  alignas(64) float acc[kSpanTiles][kTile][kTile];
  const __m512i column = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(kTile));
  for (int64_t gi = 0; gi < groups; ++gi) {
    const std::byte* w_rows = g.w + gi * kTile * g.w_stride;
    for (int64_t t0 = 0; t0 < rows / kTile; t0 += kSpanTiles) {
      const int64_t span = std::min(kSpanTiles, rows / kTile - t0);
      for (int64_t k0 = 0; k0 < g.k; k0 += kChunk) {
        const int64_t len = std::min(kChunk, g.k - k0);
        const WeightTiles w = W::at(w_rows, g.w_stride, k0, len, buf);
        multiply_blocks<W::kLo>(w, len / kStep, x_tiles + t0 * x_tile_stride + k0 / kStep * 2 * kBf16PairTile,
                                x_tile_stride, acc, span, k0 == 0);
      }
      // acc[t][i][m] is output row 16 (t0 + t) + m, column 16 gi + i.
      for (int64_t t = 0; t < span; ++t)
        for (int64_t m = 0; m < kTile; ++m) {
          float* out = reinterpret_cast<float*>(g.out + (kTile * (t0 + t) + m) * g.out_row) + gi * kTile;
          _mm512_storeu_ps(out, _mm512_i32gather_ps(column, &acc[t][0][m], 4));
        }
    }
  }
}

// The tiles read x's BF16 parts, the AVX-512 kernel its F32 rows (Act::Bf16Pairs).
void f16_tiles(const Gemv& g) noexcept {
  gemm_in_tiles<&dense_tiles<F16Weight>>(g, avx512_row<GgmlType::F16>().gemv, g.k % kStep == 0);
}
void bf16_tiles(const Gemv& g) noexcept {
  gemm_in_tiles<&dense_tiles<BF16Weight>>(g, avx512_row<GgmlType::BF16>().gemv, g.k % kStep == 0);
}

// Laid over the AVX-512 rows (isa.hpp) where the CPU has AMX-BF16.
constexpr FormatKernels kFormats[] = {
    {.type = GgmlType::F16, .tiles = &f16_tiles},
    {.type = GgmlType::BF16, .tiles = &bf16_tiles},
};

}  // namespace

#undef SKAINET_TMM_WH
#undef SKAINET_TMM_WL
#undef SKAINET_TMM_XH
#undef SKAINET_TMM_XL

const OverlayKernels kAmxBf16Kernels = {
    .formats = kFormats, .format_count = std::size(kFormats), .split_bf16_pairs = &split_bf16_pairs};

}  // namespace skainet::kernels::x86

#endif  // SKAINET_X86_KERNELS
