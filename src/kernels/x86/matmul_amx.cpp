// AMX-INT8 prefill for Q4_0, Q8_0, Q4_K and Q6_K weights in the kernel-feed order
// (BlockOrder::Interleaved16) and IQ4_XS, Q2_K and Q3_K in file order: the tile unit multiplies 16 activation rows by
// 32 elements of a 16-row weight group (a Q4_0/Q8_0 block, a Q4_K sub-block; Q6_K: 64 elements, its scales folded into
// the weight, below) per instruction.
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
// Q4_0, Q8_0 and Q4_K scale each 32 elements of the weight (and Q4_0/Q8_0 of the activation too), so each
// 16 x 16 integer tile is stored and finished on AVX-512 (conversion, the 16 row scales, the
// activation rows' scales): that, not the tile multiply, is the cost per tile. Two accumulator tiles alternate so that
// one block's multiply runs while the one before is finished. Whatever the tiles do not cover (fewer than 16 activation
// rows left, the row-major tail after the groups, an output with strided columns) goes to the AVX-512 feed kernel,
// which is also the one-row (decode) path.
#if defined(SKAINET_X86_KERNELS)

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "kernels/x86/amx_tiles.hpp"
#include "kernels/x86/block_scales.hpp"
#include "kernels/x86/feed_formats.hpp"
#include "kernels/x86/transpose_dwords.hpp"

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
    for (int c = 0; c < 8; ++c)
      _mm512_store_si512(tile + 64 * c, _mm512_xor_si512(_mm512_loadu_si512(q + 64 * c), flip));
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

// Tiles of K = 32 elements: A 16 rows of K bytes, B K / 4 rows of 16 x 4 bytes.
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
  do {                                                \
    _tile_loadd(A, a, a_stride);                      \
    _tile_loadd(B, b, 64);                            \
    _tile_zero(C);                                    \
    _tile_dpbssd(C, A, B);                            \
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
        const auto finish = [&](int64_t b, const int32_t(&tile)[kTile][kTile]) noexcept {
          const std::byte* scales = group + (b0 + b) * F::kGroupBlock;
          const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales)));
          for (int m = 0; m < kTile; ++m) {
            float dx;
            std::memcpy(&dx, x + m * g.x_stride + L.d_off + 4 * (b0 + b), 4);
            acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(tile[m])),
                                     _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc[m]);
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

// Q6_K's sub-blocks are 16 elements with an int8 scale each: a tile product per sub-block would need
// a float finish per 16 elements, and the finish, not the tile unit, would bound the kernel. So the
// scale is folded into the weight instead: p = sc * (q - 32), |p| <= 4096, split as p = 128 hi + lo
// (lo 0..127, hi -32..32), two signed byte B tiles per 64 elements against the same A tile. Their
// int32 sums run over the whole 256-element block (|128 C_hi + C_lo| <= 256 * 127 * 4096 < 2^31),
// so a block takes 8 tile products of K = 64 and one finish: (128 C_hi + C_lo) * d * the activation's
// d. The integer sum is the one-row dot's, exactly. Q4_K fits the same split (6-bit scale times
// 0..15: p <= 945; its mins are subtracted per block as before), and IQ4_XS (its level times its
// 6-bit scale - 32: |p| <= 4064) takes it in file order: its B tiles are its rows transposed, 16
// rows at a time, per call.
constexpr int64_t kSplitTile = 16 * 64;               // one B tile (K = 64) or A tile: 16 rows of 64 bytes
constexpr int64_t kSplitBlockTiles = 4 * kSplitTile;  // a block's hi (or lo) tiles
constexpr int64_t kSplitChunkBlocks = 4;              // blocks whose tiles are made at a time: 32 KiB

// p = 128 hi + lo for 64 products in int16 (a and b: 32 each) as the two byte lines of a B tile row.
inline void split_bytes(__m512i a, __m512i b, std::byte* hi, std::byte* lo) noexcept {
  const __m512i low7 = _mm512_set1_epi16(0x7f);
  const auto bytes = [](__m512i x, __m512i y) noexcept {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi16_epi8(x)), _mm512_cvtepi16_epi8(y), 1);
  };
  _mm512_store_si512(hi, bytes(_mm512_srai_epi16(a, 7), _mm512_srai_epi16(b, 7)));
  _mm512_store_si512(lo, bytes(_mm512_and_si512(a, low7), _mm512_and_si512(b, low7)));
}

// A B tile line holds 4 elements of each of the 16 rows: as int16, rows 0..7 then 8..15, so a value
// per row (a scale) is repeated 4 times per half by these permutations.
alignas(64) constexpr int16_t kRepeatRows[2][32] = {
    {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7},
    {8,  8,  8,  8,  9,  9,  9,  9,  10, 10, 10, 10, 11, 11, 11, 11,
     12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15}};

// One group block's hi and lo B tiles, and d a lane per weight row. The quants are rebuilt as in
// dot_q6_k (feed_tiles.hpp's layout: sub-block 8h + 2t + m / 4 is chunks m % 4 of quarter (h, t));
// line l of sub-block s is row 4 (s % 4) + l of tile s / 4.
void prepare_q6_k(const std::byte* p, std::byte* hi, std::byte* lo, __m512& d) noexcept {
  using F = FeedQ6_K;
  d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + F::kD)));
  const __m512i repeat_lo = _mm512_load_si512(kRepeatRows[0]), repeat_hi = _mm512_load_si512(kRepeatRows[1]);
  __m512i sc[16][2];  // sub-block s's scales as int16, rows 0..7 and 8..15 of a line
  for (int u = 0; u < 8; ++u) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * u));  // sub-blocks 2u, 2u + 1
    const __m512i even = _mm512_castsi256_si512(_mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8));
    const __m512i odd = _mm512_castsi256_si512(_mm256_srai_epi16(v, 8));
    sc[2 * u][0] = _mm512_permutexvar_epi16(repeat_lo, even), sc[2 * u][1] = _mm512_permutexvar_epi16(repeat_hi, even);
    sc[2 * u + 1][0] = _mm512_permutexvar_epi16(repeat_lo, odd),
               sc[2 * u + 1][1] = _mm512_permutexvar_epi16(repeat_hi, odd);
  }
  const std::byte* q = p + F::kHeadBytes;
  const __m512i low4 = _mm512_set1_epi8(0x0f), low2 = _mm512_set1_epi8(0x03), bias = _mm512_set1_epi8(32);
  for (int h = 0; h < 2; ++h)
    for (int t = 0; t < 4; ++t)
      for (int m = 0; m < 8; ++m) {
        const __m512i ql = _mm512_loadu_si512(q + 64 * (16 * h + 8 * (t & 1) + m));
        const __m512i qh = _mm512_loadu_si512(q + 64 * (F::kQhChunk + 8 * h + m));
        const __m512i nib = _mm512_and_si512(t < 2 ? ql : _mm512_srli_epi16(ql, 4), low4);
        const __m512i high = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 2 * t), low2), 4);
        const __m512i w = _mm512_sub_epi8(_mm512_or_si512(nib, high), bias);  // q - 32
        const int sub = 8 * h + 2 * t + m / 4;
        const __m512i p0 = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(_mm512_castsi512_si256(w)), sc[sub][0]);
        const __m512i p1 = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(w, 1)), sc[sub][1]);
        split_bytes(p0, p1, hi + 256 * sub + 64 * (m % 4), lo + 256 * sub + 64 * (m % 4));
      }
}

// Tile registers of the split kernel: hi and lo accumulators for two blocks in flight, one A, two Bs.
#define SKAINET_SPLIT_C0H 0
#define SKAINET_SPLIT_C0L 1
#define SKAINET_SPLIT_C1H 2
#define SKAINET_SPLIT_C1L 3
#define SKAINET_SPLIT_A 4
#define SKAINET_SPLIT_BH 5
#define SKAINET_SPLIT_BL 6

// The tile products of one block into (CH, CL): A from x (rows x_stride apart), B from hi and lo
// (HI false: lo only).
#define SKAINET_SPLIT_BLOCK(HI, CH, CL, x, x_stride, hi, lo)      \
  do {                                                            \
    if constexpr (HI) _tile_zero(CH);                             \
    _tile_zero(CL);                                               \
    for (int i = 0; i < 4; ++i) {                                 \
      _tile_loadd(SKAINET_SPLIT_A, (x) + 64 * i, x_stride);       \
      if constexpr (HI) {                                         \
        _tile_loadd(SKAINET_SPLIT_BH, (hi) + kSplitTile * i, 64); \
        _tile_dpbssd(CH, SKAINET_SPLIT_A, SKAINET_SPLIT_BH);      \
      }                                                           \
      _tile_loadd(SKAINET_SPLIT_BL, (lo) + kSplitTile * i, 64);   \
      _tile_dpbssd(CL, SKAINET_SPLIT_A, SKAINET_SPLIT_BL);        \
    }                                                             \
  } while (false)

// What the split kernel reads: block b of the 16 weight rows from `rows` (w_stride apart) as hi and lo
// B tiles (kSplitBlockTiles bytes each; no hi tiles where kHi is false: every p < 128), d a lane per
// row and the kMins mins (dmin * m per 32 (8) or 16 (16) elements, subtracted against the
// activation's d * sum of those elements).
struct SplitQ6_K {  // the kernel-feed order: a group block holds the 16 rows' block b
  static constexpr int kMins = 0;
  static constexpr bool kHi = true;
  static void prepare(const std::byte* rows, int64_t, int64_t b, std::byte* hi, std::byte* lo, __m512& d,
                      __m512 (&)[16]) noexcept {
    prepare_q6_k(rows + b * FeedQ6_K::kGroupBlock, hi, lo, d);
  }
};

// Q4_K (kernel-feed order, FeedQ4_K): p = its 6-bit scale times its 0..15 quant (<= 945). Chunk line
// 8h + t holds sub-block 2h in its low nibbles and 2h + 1 in its high ones; line t of sub-block s is
// row 8 (s % 2) + t of tile s / 2.
struct SplitQ4_K {
  static constexpr int kMins = 8;
  static constexpr bool kHi = true;
  static void prepare(const std::byte* rows, int64_t, int64_t b, std::byte* hi, std::byte* lo, __m512& d,
                      __m512 (&dmn)[16]) noexcept {
    using F = FeedQ4_K;
    const std::byte* p = rows + b * F::kGroupBlock;
    __m512 dmin;
    __m512i u[4];
    feed_k4_heads(p, d, dmin, u);
    const __m512i byte = _mm512_set1_epi32(0xff);
    __m512i sc[8][2];  // sub-block s's scales as int16 per line: rows 0..7, 8..15
    for (int s = 0; s < 8; ++s) {
      const __m512i at = _mm512_and_si512(_mm512_srli_epi32(u[s / 4], 8 * (s % 4)), byte);
      dmn[s] =
          _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(u[2 + s / 4], 8 * (s % 4)), byte)));
      const __m512i sc16 = _mm512_castsi256_si512(_mm512_cvtepi32_epi16(at));
      sc[s][0] = _mm512_permutexvar_epi16(_mm512_load_si512(kRepeatRows[0]), sc16);
      sc[s][1] = _mm512_permutexvar_epi16(_mm512_load_si512(kRepeatRows[1]), sc16);
    }
    const std::byte* q = p + F::kHeadBytes;
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    for (int h = 0; h < 4; ++h)
      for (int t = 0; t < 8; ++t) {
        const __m512i w = _mm512_loadu_si512(q + 64 * (8 * h + t));
        for (int half = 0; half < 2; ++half) {
          const int sub = 2 * h + half;
          const __m512i v = _mm512_and_si512(half ? _mm512_srli_epi16(w, 4) : w, low4);
          const __m512i p0 = _mm512_mullo_epi16(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(v)), sc[sub][0]);
          const __m512i p1 = _mm512_mullo_epi16(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(v, 1)), sc[sub][1]);
          split_bytes(p0, p1, hi + 512 * sub + 64 * t, lo + 512 * sub + 64 * t);
        }
      }
  }
};

// Weights in file order (IQ4_XS, Q2_K, Q3_K): each of the 16 rows' block b is decoded into its 256
// products p (R::row: 8 int16 vectors of 32 elements, its d, and its mins dmin * m per 16 where the
// format has them), split per row into 64-byte lines, and the lines of 16 rows transposed into B tiles.
template <class R>
struct SplitRows {
  static constexpr int kMins = R::kMins;
  static constexpr bool kHi = R::kHi;
  static void prepare(const std::byte* rows, int64_t w_stride, int64_t b, std::byte* hi, std::byte* lo, __m512& d,
                      __m512 (&dmn)[16]) noexcept {
    alignas(64) std::byte line[2][16][4][64];  // [hi, lo][row][tile]
    alignas(64) float dw[16], mins[16][16];    // [row], [sub-block][row]
    for (int j = 0; j < 16; ++j) {
      __m512i prod[8];
      float row_mins[16];
      dw[j] = R::row(rows + j * w_stride + b * static_cast<int64_t>(sizeof(typename R::Block)), prod, row_mins);
      for (int t = 0; t < kMins; ++t) mins[t][j] = row_mins[t];
      for (int i = 0; i < 4; ++i) split_bytes(prod[2 * i], prod[2 * i + 1], line[0][j][i], line[1][j][i]);
    }
    d = _mm512_load_ps(dw);
    for (int t = 0; t < kMins; ++t) dmn[t] = _mm512_load_ps(mins[t]);
    for (int part = kHi ? 0 : 1; part < 2; ++part)
      for (int i = 0; i < 4; ++i) {
        __m512i r[16];
        for (int j = 0; j < 16; ++j) r[j] = _mm512_load_si512(line[part][j][i]);
        transpose_dwords(r);
        std::byte* tile = (part == 0 ? hi : lo) + kSplitTile * i;
        for (int t = 0; t < 16; ++t) _mm512_store_si512(tile + 64 * t, r[t]);
      }
  }
};

// 32 int16 lanes: the first 16 times s0, the last 16 times s1 (two 16-element sub-blocks).
inline __m512i times_halves(__m512i v, int s0, int s1) noexcept {
  return _mm512_mullo_epi16(v, _mm512_mask_blend_epi16(0xffff0000u, _mm512_set1_epi16(static_cast<int16_t>(s0)),
                                                       _mm512_set1_epi16(static_cast<int16_t>(s1))));
}

// IQ4_XS: level (kIq4nlValues) times the sub-block's 6-bit scale - 32.
struct IQ4_XSRow {
  using Block = BlockIQ4_XS;
  static constexpr int kMins = 0;
  static constexpr bool kHi = true;
  static float row(const std::byte* p, __m512i (&prod)[8], float (&)[16]) noexcept {
    const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)), low4 = _mm_set1_epi8(0x0f);
    int32_t scale[8];
    iq4_xs_scales(p, scale);
    for (int s = 0; s < 8; ++s) {  // elements 0..15 of a sub-block: the low nibbles of its 16 bytes
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + offsetof(Block, qs) + 16 * s));
      const __m512i level =
          _mm512_cvtepi8_epi16(_mm256_set_m128i(_mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(v, 4), low4)),
                                                _mm_shuffle_epi8(table, _mm_and_si128(v, low4))));
      prod[s] = times_halves(level, scale[s], scale[s]);
    }
    return half_at(p + offsetof(Block, d));
  }
};

// The 2-bit fields at bit 2c of 32 bytes: elements 128h + 32c + 0..31 of a Q2_K/Q3_K block (qs + 32h).
inline __m256i crumbs32(const std::byte* qs, int c) noexcept {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
  return _mm256_and_si256(_mm256_srli_epi16(v, 2 * c), _mm256_set1_epi8(3));
}

// Q2_K: its 2-bit quant times the sub-block's 4-bit scale (<= 45: the hi tiles would be zero, so
// there are none); its mins dmin * the 4-bit min per 16.
struct Q2_KRow {
  using Block = BlockQ2_K;
  static constexpr int kMins = 16;
  static constexpr bool kHi = false;
  static float row(const std::byte* p, __m512i (&prod)[8], float (&mins)[16]) noexcept {
    const auto* sc = reinterpret_cast<const uint8_t*>(p + offsetof(Block, scales));
    for (int e = 0; e < 8; ++e)  // elements 32e..: crumb e % 4 of the bytes of half e / 4
      prod[e] = times_halves(_mm512_cvtepu8_epi16(crumbs32(p + offsetof(Block, qs) + 32 * (e / 4), e % 4)),
                             sc[2 * e] & 0xf, sc[2 * e + 1] & 0xf);
    const float dmin = half_at(p + offsetof(Block, dmin));
    for (int t = 0; t < 16; ++t) mins[t] = dmin * static_cast<float>(sc[t] >> 4);
    return half_at(p + offsetof(Block, d));
  }
};

// Q3_K: its 3-bit quant (2-bit field, less 4 where the hmask bit is clear) times the sub-block's
// 6-bit scale - 32 (|p| <= 128).
struct Q3_KRow {
  using Block = BlockQ3_K;
  static constexpr int kMins = 0;
  static constexpr bool kHi = true;
  static float row(const std::byte* p, __m512i (&prod)[8], float (&)[16]) noexcept {
    int sc[16];
    q3_k_scales(p, sc);
    const __m256i hmask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + offsetof(Block, hmask)));
    const __m256i four = _mm256_set1_epi8(4);
    for (int e = 0; e < 8; ++e) {  // bit e of hmask[l] is element 32e + l's third bit
      const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << e));
      const __m256i clear = _mm256_andnot_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hmask, bit), bit), four);
      const __m256i q = _mm256_sub_epi8(crumbs32(p + offsetof(Block, qs) + 32 * (e / 4), e % 4), clear);
      prod[e] = times_halves(_mm512_cvtepi8_epi16(q), sc[2 * e], sc[2 * e + 1]);
    }
    return half_at(p + offsetof(Block, d));
  }
};

template <class P>
void amx_tiles_split(const Gemv& g, int64_t groups, int64_t rows) noexcept {
  const ActLayout L = act_layout(Act::Q8x256, g.k);
  const int64_t blocks = g.k / 256;
  TileConfig config;
  for (int t = 0; t <= SKAINET_SPLIT_BL; ++t) config.rows[t] = kTile, config.colsb[t] = 64;
  const Tiles tiles(config);
  alignas(64) int32_t c[2][2][kTile][kTile];                          // [block parity][hi, lo]
  alignas(64) std::byte bt[2][kSplitChunkBlocks * kSplitBlockTiles];  // [hi, lo]
  __m512 d[kSplitChunkBlocks], dmn[kSplitChunkBlocks][16];
  const int64_t out_row = g.out_row / 4;
  for (int64_t gi = 0; gi < groups; ++gi) {
    const std::byte* group = g.w + gi * kTile * g.w_stride;
    for (int64_t b0 = 0; b0 < blocks; b0 += kSplitChunkBlocks) {
      const int64_t nb = std::min(kSplitChunkBlocks, blocks - b0);
      for (int64_t b = 0; b < nb; ++b)
        P::prepare(group, g.w_stride, b0 + b, bt[0] + kSplitBlockTiles * b, bt[1] + kSplitBlockTiles * b, d[b], dmn[b]);
      for (int64_t r = 0; r < rows; r += kTile) {
        const std::byte* x = g.x + r * g.x_stride;
        auto* out = reinterpret_cast<float*>(g.out + r * g.out_row) + gi * kTile;
        __m512 acc[kTile];
        for (int m = 0; m < kTile; ++m) acc[m] = b0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(out + m * out_row);
        const auto xq = [&](int64_t b) noexcept { return x + 256 * (b0 + b); };
        const auto finish = [&](int64_t b, const int32_t(&ch)[kTile][kTile],
                                const int32_t(&cl)[kTile][kTile]) noexcept {
          for (int m = 0; m < kTile; ++m) {
            float dx;
            std::memcpy(&dx, x + m * g.x_stride + L.d_off + 4 * (b0 + b), 4);
            __m512i sum = _mm512_load_si512(cl[m]);
            if constexpr (P::kHi) sum = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(ch[m]), 7), sum);
            acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(d[b], _mm512_set1_ps(dx)), acc[m]);
            if constexpr (P::kMins > 0) {
              const float* ds16 = reinterpret_cast<const float*>(x + m * g.x_stride + L.ds16_off) + 16 * (b0 + b);
              for (int t = 0; t < P::kMins; ++t) {
                const float xs = P::kMins == 16 ? ds16[t] : ds16[2 * t] + ds16[2 * t + 1];
                acc[m] = _mm512_fnmadd_ps(dmn[b][t], _mm512_set1_ps(xs), acc[m]);
              }
            }
          }
        };
        // Block b + 1's products run while block b is finished, as multiply_pipelined does.
        SKAINET_SPLIT_BLOCK(P::kHi, SKAINET_SPLIT_C0H, SKAINET_SPLIT_C0L, xq(0), g.x_stride, bt[0], bt[1]);
        for (int64_t b = 0; b < nb; b += 2) {
          if (b + 1 < nb)
            SKAINET_SPLIT_BLOCK(P::kHi, SKAINET_SPLIT_C1H, SKAINET_SPLIT_C1L, xq(b + 1), g.x_stride,
                                bt[0] + kSplitBlockTiles * (b + 1), bt[1] + kSplitBlockTiles * (b + 1));
          if constexpr (P::kHi) _tile_stored(SKAINET_SPLIT_C0H, c[0][0], 64);
          _tile_stored(SKAINET_SPLIT_C0L, c[0][1], 64);
          finish(b, c[0][0], c[0][1]);
          if (b + 1 >= nb) break;
          if (b + 2 < nb)
            SKAINET_SPLIT_BLOCK(P::kHi, SKAINET_SPLIT_C0H, SKAINET_SPLIT_C0L, xq(b + 2), g.x_stride,
                                bt[0] + kSplitBlockTiles * (b + 2), bt[1] + kSplitBlockTiles * (b + 2));
          if constexpr (P::kHi) _tile_stored(SKAINET_SPLIT_C1H, c[1][0], 64);
          _tile_stored(SKAINET_SPLIT_C1L, c[1][1], 64);
          finish(b + 1, c[1][0], c[1][1]);
        }
        for (int m = 0; m < kTile; ++m) _mm512_storeu_ps(out + m * out_row, acc[m]);
      }
    }
  }
}

void q4_0_feed(const Gemv& g) noexcept {
  gemm_in_tiles<&amx_tiles<AmxQ4_0>>(g, avx512_row<GgmlType::Q4_0>().feed, true);
}
void q8_0_feed(const Gemv& g) noexcept {
  gemm_in_tiles<&amx_tiles<AmxQ8_0>>(g, avx512_row<GgmlType::Q8_0>().feed, true);
}
void q4_k_feed(const Gemv& g) noexcept {
  gemm_in_tiles<&amx_tiles_split<SplitQ4_K>>(g, avx512_row<GgmlType::Q4_K>().feed, true);
}
void q6_k_feed(const Gemv& g) noexcept {
  gemm_in_tiles<&amx_tiles_split<SplitQ6_K>>(g, avx512_row<GgmlType::Q6_K>().feed, true);
}
void iq4_xs(const Gemv& g) noexcept {
  gemm_in_tiles<&amx_tiles_split<SplitRows<IQ4_XSRow>>>(g, avx512_row<GgmlType::IQ4_XS>().gemv, true);
}
void q2_k(const Gemv& g) noexcept {
  gemm_in_tiles<&amx_tiles_split<SplitRows<Q2_KRow>>>(g, avx512_row<GgmlType::Q2_K>().gemv, true);
}
void q3_k(const Gemv& g) noexcept {
  gemm_in_tiles<&amx_tiles_split<SplitRows<Q3_KRow>>>(g, avx512_row<GgmlType::Q3_K>().gemv, true);
}

// The kernels laid over the AVX-512 rows (isa.hpp): feed orders and three file-order K formats.
constexpr FormatKernels kFormats[] = {
    {.type = GgmlType::Q4_0, .act = Act::Q8x32, .feed = &q4_0_feed},
    {.type = GgmlType::Q8_0, .act = Act::Q8x32, .feed = &q8_0_feed},
    {.type = GgmlType::Q4_K, .act = Act::Q8x256, .feed = &q4_k_feed},
    {.type = GgmlType::Q6_K, .act = Act::Q8x256, .feed = &q6_k_feed},
    {.type = GgmlType::IQ4_XS, .act = Act::Q8x256, .gemv = &iq4_xs},
    {.type = GgmlType::Q2_K, .act = Act::Q8x256, .gemv = &q2_k},
    {.type = GgmlType::Q3_K, .act = Act::Q8x256, .gemv = &q3_k},
};

}  // namespace

#undef SKAINET_TILE_PRODUCT
#undef SKAINET_TMM_C0
#undef SKAINET_TMM_C1
#undef SKAINET_TMM_A0
#undef SKAINET_TMM_A1
#undef SKAINET_TMM_B0
#undef SKAINET_TMM_B1
#undef SKAINET_SPLIT_BLOCK
#undef SKAINET_SPLIT_C0H
#undef SKAINET_SPLIT_C0L
#undef SKAINET_SPLIT_C1H
#undef SKAINET_SPLIT_C1L
#undef SKAINET_SPLIT_A
#undef SKAINET_SPLIT_BH
#undef SKAINET_SPLIT_BL

const OverlayKernels kAmxInt8Kernels = {
    .formats = kFormats, .format_count = std::size(kFormats), .split_bf16_pairs = nullptr};

}  // namespace skainet::kernels::x86

#endif  // SKAINET_X86_KERNELS
