// What the AMX units (matmul_amx.cpp: INT8 tiles for the quantized feed orders; matmul_amx_bf16.cpp:
// BF16 tiles for dense weights) share: the tile configuration operand, the guard that loads it for
// this thread and releases the tile state after, and the split of a matmul between the tiles and
// the AVX-512 kernels. Internal linkage like isa.hpp's helpers.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/x86/isa.hpp"

namespace skainet::kernels::x86 {
namespace {

struct alignas(64) TileConfig {  // the LDTILECFG operand, palette 1
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes per row of each tile register
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// Loads a tile configuration for this thread and releases the tiles when done.
class Tiles {
 public:
  explicit Tiles(const TileConfig& config) noexcept { _tile_loadconfig(&config); }
  ~Tiles() { _tile_release(); }
  Tiles(const Tiles&) = delete;
  Tiles& operator=(const Tiles&) = delete;
};

// gemv's contract (isa.hpp) for a tile kernel: Tiled(g, groups, rows) takes whole 16s of weight
// rows (groups) times whole 16s of activation rows (rows, a multiple of 16), `rest` (an AVX-512
// kernel) the other activation rows, the weight rows after the last whole 16, and everything when
// `tiles` is false or there is not one whole 16 of each.
template <void (*Tiled)(const Gemv&, int64_t, int64_t) noexcept>
void gemm_in_tiles(const Gemv& g, GemvFn rest, bool tiles) noexcept {
  constexpr int64_t kTileRows = 16;
  const int64_t groups = g.rows / kTileRows, rows = g.n / kTileRows * kTileRows;
  if (!tiles || groups == 0 || rows == 0 || g.out_col != 4) return rest(g);
  Tiled(g, groups, rows);
  if (rows < g.n) {
    Gemv h = g;
    h.x += rows * g.x_stride;
    h.out += rows * g.out_row;
    h.n = g.n - rows;
    rest(h);
  }
  if (groups * kTileRows < g.rows) {
    Gemv t = weight_rows(g, groups * kTileRows, g.rows - groups * kTileRows);
    t.n = rows;
    rest(t);
  }
}

// The AVX-512 row of `kType` (isa.hpp), whose kernels take what the tiles leave; looked up on the
// first call, so the tile kernels name no AVX-512 kernel by a field of its own.
template <GgmlType kType>
const FormatKernels& avx512_row() noexcept {
  static const FormatKernels row = row_of(kAvx512Kernels, kType);
  return row;
}

}  // namespace
}  // namespace skainet::kernels::x86
