// AMX-INT8 prefill for Q4_0 and Q8_0 weights in the kernel-feed order (BlockOrder::Interleaved16):
// the tile unit multiplies 16 activation rows by one block of a 16-row weight group per instruction.
//
// Why the feed order is already AMX's: a B tile holds, per tile row t, 4 consecutive bytes of K for
// each of 16 columns, and a group block of the feed order holds, per 64-byte line c, the 4-byte chunk
// c of each of 16 weight rows (kernels/feed_layout.hpp). So a group block's quants become a B tile
// of K = 32 with one vector operation per line: Q8_0's unsigned storage flipped back to signed,
// Q4_0's nibbles split and moved to -8..7. That is done once per group and chunk of blocks, for every
// 16 activation rows after it. The activation rows (Q8x32, isa.hpp) are the A tile: 16 rows of a
// block's 32 signed bytes, one stride apart. Signed times signed leaves no offset term.
//
// Both formats scale every 32-element block of both operands, so each block's 16 x 16 integer tile
// is stored and finished on AVX-512 (conversion, the 16 row scales times each activation row's):
// that, not the tile multiply, is the cost per block. Two accumulator tiles alternate so that one
// block's multiply runs while the one before is finished. Whatever the tiles do not cover (fewer than
// 16 activation rows left, the row-major tail after the groups, an output with strided columns) goes
// to the AVX-512 feed kernel, which is also the one-row (decode) path.
#if defined(SKAINET_X86_KERNELS)

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/feed_layout.hpp"
#include "kernels/x86/isa.hpp"
#include "skainet/blocks.hpp"

namespace skainet::kernels::x86 {
namespace {

constexpr int64_t kTile = kInterleaveRows;  // activation rows per A tile, weight rows per B tile (16)
constexpr int64_t kBlock = 32;              // elements (and activation bytes) per block: K of a tile
constexpr int64_t kTileBytes = 8 * 64;      // one B tile of K = 32: 8 rows of 16 x 4 bytes

// Blocks of a group made into B tiles at a time: 64 tiles are 32 KiB, reused by every 16 activation
// rows.
constexpr int64_t kChunkBlocks = 64;

// The formats: bytes of one block of a 16-row group and of its 16 F16 scales in front, and how the
// block's quant lines become a signed B tile.
struct AmxQ4_0 {
  static constexpr int64_t kGroupBlock = kInterleaveRows * sizeof(BlockQ4_0);
  static constexpr int64_t kHeadBytes = feed_heads_bytes(kFeedQ4_0);
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
struct AmxQ8_0 {
  static constexpr int64_t kGroupBlock = kInterleaveRows * sizeof(BlockQ8_0);
  static constexpr int64_t kHeadBytes = feed_heads_bytes(kFeedQ8_0);
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

struct alignas(64) TileConfig {  // the LDTILECFG operand, palette 1
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

TileConfig tile_config() noexcept {
  TileConfig c;
  for (int t : {SKAINET_TMM_C0, SKAINET_TMM_C1}) c.rows[t] = kTile, c.colsb[t] = 4 * kTile;
  for (int t : {SKAINET_TMM_A0, SKAINET_TMM_A1}) c.rows[t] = kTile, c.colsb[t] = kBlock;
  for (int t : {SKAINET_TMM_B0, SKAINET_TMM_B1}) c.rows[t] = kBlock / 4, c.colsb[t] = 4 * kTile;
  return c;
}

// acc[m] += tile[m] * the 16 row scales * activation row m's scale, for block b.
inline void finish_block(const int32_t (&tile)[kTile][kTile], const std::byte* scales, const std::byte* x,
                         int64_t x_stride, const ActLayout& L, int64_t b, __m512 (&acc)[kTile]) noexcept {
  const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales)));
  for (int m = 0; m < kTile; ++m) {
    float dx;
    std::memcpy(&dx, x + m * x_stride + L.d_off + 4 * b, 4);
    acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(tile[m])), _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc[m]);
  }
}

// out[r][o] for the first `groups` groups of weight rows and the first `rows` (a multiple of 16)
// activation rows; out columns contiguous.
template <class F>
void amx_tiles(const Gemv& g, int64_t groups, int64_t rows) noexcept {
  const ActLayout L = act_layout(Act::Q8x32, g.k);
  const int64_t blocks = g.k / kBlock;
  const TileConfig config = tile_config();
  _tile_loadconfig(&config);
  alignas(64) int32_t c[2][kTile][kTile];
  alignas(64) std::byte bt[kChunkBlocks][kTileBytes];
  for (int64_t gi = 0; gi < groups; ++gi) {
    const std::byte* group = g.w + gi * kTile * g.w_stride;
    for (int64_t b0 = 0; b0 < blocks; b0 += kChunkBlocks) {
      const int64_t nb = std::min(kChunkBlocks, blocks - b0);
      for (int64_t b = 0; b < nb; ++b) F::b_tile(group + (b0 + b) * F::kGroupBlock + F::kHeadBytes, bt[b]);
      const auto scales = [&](int64_t b) noexcept { return group + (b0 + b) * F::kGroupBlock; };
      for (int64_t r = 0; r < rows; r += kTile) {
        const std::byte* x = g.x + r * g.x_stride;
        const std::byte* xq = x + kBlock * b0;
        auto* out = reinterpret_cast<float*>(g.out + r * g.out_row) + gi * kTile;
        const int64_t out_row = g.out_row / 4;
        __m512 acc[kTile];
        for (int m = 0; m < kTile; ++m) acc[m] = b0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(out + m * out_row);
        // Block b multiplies in C0 (b even) or C1 (b odd) while block b - 1 is finished.
        _tile_loadd(SKAINET_TMM_A0, xq, g.x_stride);
        _tile_loadd(SKAINET_TMM_B0, bt[0], 64);
        _tile_zero(SKAINET_TMM_C0);
        _tile_dpbssd(SKAINET_TMM_C0, SKAINET_TMM_A0, SKAINET_TMM_B0);
        for (int64_t b = 0; b < nb; b += 2) {
          if (b + 1 < nb) {
            _tile_loadd(SKAINET_TMM_A1, xq + kBlock * (b + 1), g.x_stride);
            _tile_loadd(SKAINET_TMM_B1, bt[b + 1], 64);
            _tile_zero(SKAINET_TMM_C1);
            _tile_dpbssd(SKAINET_TMM_C1, SKAINET_TMM_A1, SKAINET_TMM_B1);
          }
          _tile_stored(SKAINET_TMM_C0, c[0], 64);
          finish_block(c[0], scales(b), x, g.x_stride, L, b0 + b, acc);
          if (b + 1 >= nb) break;
          if (b + 2 < nb) {
            _tile_loadd(SKAINET_TMM_A0, xq + kBlock * (b + 2), g.x_stride);
            _tile_loadd(SKAINET_TMM_B0, bt[b + 2], 64);
            _tile_zero(SKAINET_TMM_C0);
            _tile_dpbssd(SKAINET_TMM_C0, SKAINET_TMM_A0, SKAINET_TMM_B0);
          }
          _tile_stored(SKAINET_TMM_C1, c[1], 64);
          finish_block(c[1], scales(b + 1), x, g.x_stride, L, b0 + b + 1, acc);
        }
        for (int m = 0; m < kTile; ++m) _mm512_storeu_ps(out + m * out_row, acc[m]);
      }
    }
  }
  _tile_release();
}

// gemv's contract (isa.hpp) on an Interleaved16 weight: the tiles take whole groups times whole 16s
// of activation rows, `rest` (the AVX-512 feed kernel) the other activation rows and the row-major
// tail of weight rows.
template <class F>
void gemm_amx(const Gemv& g, GemvFn rest) noexcept {
  const int64_t groups = g.rows / kTile, rows = g.n / kTile * kTile;
  if (groups == 0 || rows == 0 || g.out_col != 4) return rest(g);
  amx_tiles<F>(g, groups, rows);
  if (rows < g.n) {
    Gemv h = g;
    h.x += rows * g.x_stride;
    h.out += rows * g.out_row;
    h.n = g.n - rows;
    rest(h);
  }
  if (groups * kTile < g.rows) {
    Gemv t = g;
    t.w += groups * kTile * g.w_stride;
    t.rows = g.rows - groups * kTile;
    t.out += groups * kTile * g.out_col;
    t.n = rows;
    rest(t);
  }
}

void q4_0_feed(const Gemv& g) noexcept { gemm_amx<AmxQ4_0>(g, kAvx512Kernels.q4_0_feed); }
void q8_0_feed(const Gemv& g) noexcept { gemm_amx<AmxQ8_0>(g, kAvx512Kernels.q8_0_feed); }

}  // namespace

#undef SKAINET_TMM_C0
#undef SKAINET_TMM_C1
#undef SKAINET_TMM_A0
#undef SKAINET_TMM_A1
#undef SKAINET_TMM_B0
#undef SKAINET_TMM_B1

const AmxFeedKernels kAmxFeedKernels = {&q4_0_feed, &q8_0_feed};

}  // namespace skainet::kernels::x86

#endif  // SKAINET_X86_KERNELS
