// AMX-INT8 prefill for Q4_0, Q8_0 and Q4_K weights in the kernel-feed order
// (BlockOrder::Interleaved16): the tile unit multiplies 16 activation rows by 32 elements of a 16-row
// weight group (a Q4_0/Q8_0 block, a Q4_K sub-block) per instruction.
//
// Why the feed order is already AMX's: a B tile holds, per tile row t, 4 consecutive bytes of K for
// each of 16 columns, and a group block of the feed order holds, per 64-byte line c, the 4-byte chunk
// c of each of 16 weight rows (kernels/feed_layout.hpp). So a group block's quants become a B tile
// of K = 32 with one vector operation per line: Q8_0's unsigned storage flipped back to signed,
// Q4_0's nibbles split and moved to -8..7. That is done once per group and chunk of blocks, for every
// 16 activation rows after it. The activation rows (Q8x32, isa.hpp) are the A tile: 16 rows of a
// block's 32 signed bytes, one stride apart. Signed times signed leaves no offset term.
//
// Q4_K's chunks hold two sub-blocks, in their low and high nibbles (feed_tiles.hpp, FeedQ4_K): each
// becomes a B tile of 0..15, and its mins are subtracted apart, as the AVX-512 kernel does.
//
// Every format scales each 32 elements of the weight (and Q4_0/Q8_0 of the activation too), so each
// 16 x 16 integer tile is stored and finished on AVX-512 (conversion, the 16 row scales, the
// activation rows' scales): that, not the tile multiply, is the cost per tile. Two accumulator tiles alternate so that one
// block's multiply runs while the one before is finished. Whatever the tiles do not cover (fewer than
// 16 activation rows left, the row-major tail after the groups, an output with strided columns) goes
// to the AVX-512 feed kernel, which is also the one-row (decode) path.
#if defined(SKAINET_X86_KERNELS)

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/x86/amx_tiles.hpp"
#include "kernels/x86/feed_formats.hpp"

namespace skainet::kernels::x86 {
namespace {

constexpr int64_t kTile = kInterleaveRows;  // activation rows per A tile, weight rows per B tile (16)
constexpr int64_t kBlock = 32;              // elements (and activation bytes) per block: K of a tile
constexpr int64_t kTileBytes = 8 * 64;      // one B tile of K = 32: 8 rows of 16 x 4 bytes

// B tiles of a group made at a time: 64 are 32 KiB, reused by every 16 activation rows.
constexpr int64_t kChunkTiles = 64;

// How the quant lines of a Q4_0/Q8_0 group block become a signed B tile.
struct AmxQ4_0 : FeedQ4_0 {
  // 4 lines: chunk c of the 16 rows, low nibbles elements 4c.., high nibbles 16 + 4c..: tile rows c
  // and 4 + c, each nibble minus 8.
  static void b_tile(const std::byte* q, std::byte* tile) noexcept {
    const __m512i low4 = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);
    for (int c = 0; c < 4; ++c) {
      const __m512i w = _mm512_loadu_si512(q + 64 * c);
      _mm512_store_si512(tile + 64 * c, _mm512_sub_epi8(_mm512_and_si512(w, low4), eight));
      _mm512_store_si512(tile + 64 * (4 + c), _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(w, 4), low4), eight));
    }
  }
};
struct AmxQ8_0 : FeedQ8_0 {
  // 8 lines, chunk c of the 16 rows, stored unsigned (kFeedQ8_0.flip): tile row c, flipped back.
  static void b_tile(const std::byte* q, std::byte* tile) noexcept {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(kFeedQ8_0.flip));
    for (int c = 0; c < 8; ++c) _mm512_store_si512(tile + 64 * c, _mm512_xor_si512(_mm512_loadu_si512(q + 64 * c), flip));
  }
};

// Tile registers: two accumulators, and an A and a B for each, so two blocks are in flight. The tile
// intrinsics paste their register number into the assembly text, so these are macros.
#define SKAINET_TMM_C0 0
#define SKAINET_TMM_C1 1
#define SKAINET_TMM_A0 2
#define SKAINET_TMM_A1 3
#define SKAINET_TMM_B0 4
#define SKAINET_TMM_B1 5

// Tiles of K elements (32, or Q6_K's 16): A 16 rows of K bytes, B K / 4 rows of 16 x 4 bytes.
TileConfig tile_config(int k) noexcept {
  TileConfig c;
  for (int t : {SKAINET_TMM_C0, SKAINET_TMM_C1}) c.rows[t] = kTile, c.colsb[t] = 4 * kTile;
  for (int t : {SKAINET_TMM_A0, SKAINET_TMM_A1}) c.rows[t] = kTile, c.colsb[t] = static_cast<uint16_t>(k);
  for (int t : {SKAINET_TMM_B0, SKAINET_TMM_B1}) c.rows[t] = static_cast<uint8_t>(k / 4), c.colsb[t] = 4 * kTile;
  return c;
}

// Starts tile product C = A x B (A from a, its rows a_stride apart; B from b): a macro, for the register
// numbers.
#define SKAINET_TILE_PRODUCT(C, A, B, a, a_stride, b) \
  do {                                                 \
    _tile_loadd(A, a, a_stride);                       \
    _tile_loadd(B, b, 64);                             \
    _tile_zero(C);                                     \
    _tile_dpbssd(C, A, B);                             \
  } while (false)

// Tile products i = 0 .. n-1 (A from a(i), its rows a_stride apart; B from b(i)), each handed to
// finish(i, its 16 x 16 int32 tile) while product i + 1 runs in the other accumulator.
template <class APtr, class BPtr, class Finish>
inline void multiply_pipelined(int64_t n, const APtr& a, int64_t a_stride, const BPtr& b, const Finish& finish,
                               int32_t (&c)[2][kTile][kTile]) noexcept {
  SKAINET_TILE_PRODUCT(SKAINET_TMM_C0, SKAINET_TMM_A0, SKAINET_TMM_B0, a(0), a_stride, b(0));
  for (int64_t i = 0; i < n; i += 2) {
    if (i + 1 < n) SKAINET_TILE_PRODUCT(SKAINET_TMM_C1, SKAINET_TMM_A1, SKAINET_TMM_B1, a(i + 1), a_stride, b(i + 1));
    _tile_stored(SKAINET_TMM_C0, c[0], 64);
    finish(i, c[0]);
    if (i + 1 >= n) break;
    if (i + 2 < n) SKAINET_TILE_PRODUCT(SKAINET_TMM_C0, SKAINET_TMM_A0, SKAINET_TMM_B0, a(i + 2), a_stride, b(i + 2));
    _tile_stored(SKAINET_TMM_C1, c[1], 64);
    finish(i + 1, c[1]);
  }
}

// out[r][o] for the first `groups` groups of weight rows and the first `rows` (a multiple of 16)
// activation rows; out columns contiguous. Q4_0 and Q8_0: block b's tile times the 16 row scales
// times each activation row's.
template <class F>
void amx_tiles(const Gemv& g, int64_t groups, int64_t rows) noexcept {
  const ActLayout L = act_layout(Act::Q8x32, g.k);
  const int64_t blocks = g.k / kBlock;
  const Tiles tiles(tile_config(kBlock));
  alignas(64) int32_t c[2][kTile][kTile];
  alignas(64) std::byte bt[kChunkTiles][kTileBytes];
  for (int64_t gi = 0; gi < groups; ++gi) {
    const std::byte* group = g.w + gi * kTile * g.w_stride;
    for (int64_t b0 = 0; b0 < blocks; b0 += kChunkTiles) {
      const int64_t nb = std::min(kChunkTiles, blocks - b0);
      for (int64_t b = 0; b < nb; ++b) F::b_tile(group + (b0 + b) * F::kGroupBlock + F::kHeadBytes, bt[b]);
      for (int64_t r = 0; r < rows; r += kTile) {
        const std::byte* x = g.x + r * g.x_stride;
        auto* out = reinterpret_cast<float*>(g.out + r * g.out_row) + gi * kTile;
        const int64_t out_row = g.out_row / 4;
        __m512 acc[kTile];
        for (int m = 0; m < kTile; ++m) acc[m] = b0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(out + m * out_row);
        const auto finish = [&](int64_t b, const int32_t (&tile)[kTile][kTile]) noexcept {
          const std::byte* scales = group + (b0 + b) * F::kGroupBlock;
          const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales)));
          for (int m = 0; m < kTile; ++m) {
            float dx;
            std::memcpy(&dx, x + m * g.x_stride + L.d_off + 4 * (b0 + b), 4);
            acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(tile[m])), _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc[m]);
          }
        };
        multiply_pipelined(
            nb, [&](int64_t b) noexcept { return x + kBlock * (b0 + b); }, g.x_stride,
            [&](int64_t b) noexcept { return bt[b]; }, finish, c);
        for (int m = 0; m < kTile; ++m) _mm512_storeu_ps(out + m * out_row, acc[m]);
      }
    }
  }
}

// The K formats: per 256-element block, kSubs sub-blocks of kK elements, each a tile product with
// its own scale (a lane per weight row); prepare() makes a block's B tiles and scales.
struct AmxQ4_K : FeedQ4_K {
  static constexpr int kSubs = 8, kK = 32;
  static constexpr bool kMins = true;
  // Sub-block s is the low (s even) or high nibbles of chunks 8 (s / 2) .. + 7: 0..15.
  static void prepare(const std::byte* p, std::byte* tiles, __m512 (&dsc)[8], __m512 (&dmn)[8]) noexcept {
    feed_k4_scales(p, dsc, dmn);
    const std::byte* q = p + kHeadBytes;
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    for (int h = 0; h < 4; ++h)
      for (int t = 0; t < 8; ++t) {
        const __m512i w = _mm512_loadu_si512(q + 64 * (8 * h + t));
        _mm512_store_si512(tiles + kTileBytes * (2 * h) + 64 * t, _mm512_and_si512(w, low4));
        _mm512_store_si512(tiles + kTileBytes * (2 * h + 1) + 64 * t, _mm512_and_si512(_mm512_srli_epi16(w, 4), low4));
      }
  }
};
struct AmxQ6_K : FeedQ6_K {
  static constexpr int kSubs = 16, kK = 16;
  static constexpr bool kMins = false;
  // Sub-block 8h + 2t + half is chunks m = 4 half .. + 3 of quarter (h, t) (feed_tiles.hpp's layout):
  // 4 bits of ql and 2 of qh, less 32. Scales: d times the int8 scale of the sub-block.
  static void prepare(const std::byte* p, std::byte* tiles, __m512 (&dsc)[16], __m512 (&)[1]) noexcept {
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kD)));
    for (int u = 0; u < 8; ++u) {
      const __m512i v = _mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * u)));
      dsc[2 * u] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(v, 24), 24)));
      dsc[2 * u + 1] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(v, 16), 24)));
    }
    const std::byte* q = p + kHeadBytes;
    const __m512i low4 = _mm512_set1_epi8(0x0f), low2 = _mm512_set1_epi8(0x03), bias = _mm512_set1_epi8(32);
    for (int h = 0; h < 2; ++h)
      for (int t = 0; t < 4; ++t)
        for (int m = 0; m < 8; ++m) {
          const __m512i ql = _mm512_loadu_si512(q + 64 * (16 * h + 8 * (t & 1) + m));
          const __m512i qh = _mm512_loadu_si512(q + 64 * (kQhChunk + 8 * h + m));
          const __m512i nib = _mm512_and_si512(t < 2 ? ql : _mm512_srli_epi16(ql, 4), low4);
          const __m512i hi = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 2 * t), low2), 4);
          const int sub = 8 * h + 2 * t + m / 4;
          _mm512_store_si512(tiles + (kTileBytes / 2) * sub + 64 * (m % 4), _mm512_sub_epi8(_mm512_or_si512(nib, hi), bias));
        }
  }
};

// Blocks whose B tiles are made at a time: 32 KiB of tiles (8 x 512 or 16 x 256 bytes a block), as
// for Q4_0/Q8_0.
constexpr int64_t kKChunkBlocks = 8;

// Per block: the sum over its sub-blocks of tile * scale, times each activation row's d, less (Q4_K)
// the mins: dmin * mn against the activation's d * sum of each 32.
template <class F>
void amx_tiles_k(const Gemv& g, int64_t groups, int64_t rows) noexcept {
  static_assert(F::kSubs * F::kK == 256 && kKChunkBlocks * F::kSubs * F::kK / 4 * 64 <= kChunkTiles * kTileBytes);
  constexpr int64_t kTileStride = F::kK / 4 * 64;  // bytes of one B tile
  const ActLayout L = act_layout(Act::Q8x256, g.k);
  const int64_t blocks = g.k / F::kElems;
  const Tiles tiles(tile_config(F::kK));
  alignas(64) int32_t c[2][kTile][kTile];
  alignas(64) std::byte bt[kChunkTiles * kTileBytes];
  __m512 dsc[kKChunkBlocks][F::kSubs], dmn[kKChunkBlocks][F::kMins ? 8 : 1];
  for (int64_t gi = 0; gi < groups; ++gi) {
    const std::byte* group = g.w + gi * kTile * g.w_stride;
    for (int64_t b0 = 0; b0 < blocks; b0 += kKChunkBlocks) {
      const int64_t nb = std::min(kKChunkBlocks, blocks - b0);
      for (int64_t b = 0; b < nb; ++b)
        F::prepare(group + (b0 + b) * F::kGroupBlock, bt + F::kSubs * kTileStride * b, dsc[b], dmn[b]);
      for (int64_t r = 0; r < rows; r += kTile) {
        const std::byte* x = g.x + r * g.x_stride;
        auto* out = reinterpret_cast<float*>(g.out + r * g.out_row) + gi * kTile;
        const int64_t out_row = g.out_row / 4;
        __m512 acc[kTile];
        for (int m = 0; m < kTile; ++m) acc[m] = _mm512_setzero_ps();
        // Tile product i of the chunk is sub-block i % kSubs of block i / kSubs; its activation bytes
        // follow on.
        const auto finish = [&](int64_t i, const int32_t (&tile)[kTile][kTile]) noexcept {
          const int64_t b = i / F::kSubs, s = i % F::kSubs;
          for (int m = 0; m < kTile; ++m) acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(tile[m])), dsc[b][s], acc[m]);
          if (s < F::kSubs - 1) return;
          for (int m = 0; m < kTile; ++m) {
            const std::byte* xr = x + m * g.x_stride;
            float dx;
            std::memcpy(&dx, xr + L.d_off + 4 * (b0 + b), 4);
            __m512 sum = b0 + b == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(out + m * out_row);
            sum = _mm512_fmadd_ps(acc[m], _mm512_set1_ps(dx), sum);
            if constexpr (F::kMins) {
              const float* ds16 = reinterpret_cast<const float*>(xr + L.ds16_off) + 16 * (b0 + b);
              for (int t = 0; t < 8; ++t) sum = _mm512_fnmadd_ps(dmn[b][t], _mm512_set1_ps(ds16[2 * t] + ds16[2 * t + 1]), sum);
            }
            _mm512_storeu_ps(out + m * out_row, sum);
            acc[m] = _mm512_setzero_ps();
          }
        };
        const std::byte* xq = x + F::kElems * b0;
        multiply_pipelined(
            F::kSubs * nb, [&](int64_t i) noexcept { return xq + F::kK * i; }, g.x_stride,
            [&](int64_t i) noexcept { return bt + kTileStride * i; }, finish, c);
      }
    }
  }
}

void q4_0_feed(const Gemv& g) noexcept { gemm_in_tiles<&amx_tiles<AmxQ4_0>>(g, kAvx512Kernels.q4_0_feed, true); }
void q8_0_feed(const Gemv& g) noexcept { gemm_in_tiles<&amx_tiles<AmxQ8_0>>(g, kAvx512Kernels.q8_0_feed, true); }
void q4_k_feed(const Gemv& g) noexcept { gemm_in_tiles<&amx_tiles_k<AmxQ4_K>>(g, kAvx512Kernels.q4_k_feed, true); }
void q6_k_feed(const Gemv& g) noexcept { gemm_in_tiles<&amx_tiles_k<AmxQ6_K>>(g, kAvx512Kernels.q6_k_feed, true); }

}  // namespace

#undef SKAINET_TILE_PRODUCT
#undef SKAINET_TMM_C0
#undef SKAINET_TMM_C1
#undef SKAINET_TMM_A0
#undef SKAINET_TMM_A1
#undef SKAINET_TMM_B0
#undef SKAINET_TMM_B1

const AmxFeedKernels kAmxFeedKernels = {&q4_0_feed, &q8_0_feed, &q4_k_feed, &q6_k_feed};

}  // namespace skainet::kernels::x86

#endif  // SKAINET_X86_KERNELS
