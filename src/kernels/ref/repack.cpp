// Kernel-feed block orders (format.hpp, BlockOrder::Interleaved16): the load-time repack and its
// inverse. The interleaved kernels (x86/feed_tiles.hpp) read one 4-byte chunk of quants per row into
// one 32-bit lane, so a 512-bit load covers 16 rows and the activation's 4 bytes are broadcast to all
// of them; the per-block scales of the 16 rows sit together so they convert to floats in one go.
#include <cstdint>
#include <cstring>

#include "skainet/blocks.hpp"
#include "skainet/kernels.hpp"

namespace skainet::kernels::ref {
namespace {

// The formats with an interleaved order. A row's block is a head (scales) and quant bytes (Q6_K keeps
// its head after the quants); in a group block the 16 rows' heads come first, in units interleaved across the rows (unit i of row r
// at (16 i + r) * unit: Q4_0/Q8_0's one F16 scale per row side by side; Q4_K's d|dmin word and its
// three words of packed 6-bit scales, each a 512-bit load for 16 rows; Q6_K's 8 pairs of int8 scales
// and its F16 d), then the quants in 4-byte chunks across the rows. Q8_0's quants are stored offset by 128 (xor 0x80), unsigned, which is what
// vpdpbusd multiplies.
struct Geometry {
  int64_t head_unit = 0;    // bytes of one head unit
  int64_t head_bytes = 0;   // per block and row
  int64_t quant_bytes = 0;  // per block and row
  uint8_t flip = 0;         // xor applied to every quant byte
  bool head_last = false;   // the row's block has its quants first
  int64_t head_offset() const { return head_last ? quant_bytes : 0; }
  int64_t quant_offset() const { return head_last ? 0 : head_bytes; }
};

bool geometry(GgmlType type, Geometry& g) noexcept {
  switch (type) {
    case GgmlType::Q4_0: g = {2, 2, 16, 0x00}; return true;
    case GgmlType::Q8_0: g = {2, 2, 32, 0x80}; return true;
    case GgmlType::Q4_K: g = {4, 16, 128, 0x00}; return true;
    case GgmlType::Q6_K: g = {2, 18, 192, 0x00, true}; return true;
    default: return false;
  }
}

constexpr int64_t kChunk = 4;

// Within one block of a 16-row group: where row r's head unit i and its quant chunk c sit.
constexpr int64_t head_at(const Geometry& g, int64_t i, int64_t r) { return (i * kInterleaveRows + r) * g.head_unit; }
constexpr int64_t chunk_at(const Geometry& g, int64_t c, int64_t r) {
  return kInterleaveRows * g.head_bytes + (c * kInterleaveRows + r) * kChunk;
}

// One row's block (`row`, file order) to or from its place in a group block (`feed`). The unit size
// and the direction are constants so every copy is a plain load and store: this runs over every
// weight at load, and with memcpy calls of a run-time size it was a third of a Q8_0 load.
template <int64_t kUnit, bool kToFeed>
void convert_block_as(const Geometry& g, std::byte* row, std::byte* feed, int64_t r) noexcept {
  for (int64_t i = 0; i < g.head_bytes / kUnit; ++i) {
    std::byte* unit = feed + head_at(g, i, r);
    std::byte* in_row = row + g.head_offset() + i * kUnit;
    std::memcpy(kToFeed ? unit : in_row, kToFeed ? in_row : unit, kUnit);
  }
  const uint32_t flip = g.flip * 0x01010101u;
  std::byte* chunk = feed + chunk_at(g, 0, r);
  std::byte* quants = row + g.quant_offset();
  for (int64_t c = 0; c < g.quant_bytes / kChunk; ++c, chunk += kInterleaveRows * kChunk, quants += kChunk) {
    uint32_t word;
    std::memcpy(&word, kToFeed ? quants : chunk, kChunk);
    word ^= flip;
    std::memcpy(kToFeed ? chunk : quants, &word, kChunk);
  }
}

void convert_block(const Geometry& g, std::byte* row, std::byte* feed, int64_t r, bool to_feed) noexcept {
  if (g.head_unit == 2) return to_feed ? convert_block_as<2, true>(g, row, feed, r) : convert_block_as<2, false>(g, row, feed, r);
  return to_feed ? convert_block_as<4, true>(g, row, feed, r) : convert_block_as<4, false>(g, row, feed, r);
}

// One group of 16 rows (`to_feed`: row-major -> interleaved, else back).
void convert_group(const Geometry& g, int64_t blocks, const std::byte* src, std::byte* dst, bool to_feed) noexcept {
  constexpr int64_t R = kInterleaveRows;
  const int64_t bb = g.head_bytes + g.quant_bytes;  // bytes of one block of one row
  const int64_t rb = blocks * bb;
  for (int64_t b = 0; b < blocks; ++b) {
    std::byte* feed = (to_feed ? dst : const_cast<std::byte*>(src)) + b * R * bb;  // this block of the group
    for (int64_t r = 0; r < R; ++r)
      convert_block(g, (to_feed ? const_cast<std::byte*>(src) : dst) + r * rb + b * bb, feed, r, to_feed);
  }
}

void convert(GgmlType type, const void* src, void* dst, int64_t rows, int64_t k, bool to_feed) noexcept {
  Geometry g;
  if (!geometry(type, g)) return;
  const int64_t blocks = k / type_traits(type).block_elements;
  const int64_t rb = blocks * (g.head_bytes + g.quant_bytes);
  const auto* s = static_cast<const std::byte*>(src);
  auto* d = static_cast<std::byte*>(dst);
  const int64_t grouped = rows / kInterleaveRows * kInterleaveRows;
  for (int64_t r = 0; r < grouped; r += kInterleaveRows)
    convert_group(g, blocks, s + r * rb, d + r * rb, to_feed);
  std::memcpy(d + grouped * rb, s + grouped * rb, static_cast<size_t>((rows - grouped) * rb));  // the tail
}

}  // namespace

bool can_repack(GgmlType type, BlockOrder order) noexcept {
  Geometry g;
  return order == BlockOrder::Interleaved16 && geometry(type, g);
}

void repack_rows(GgmlType type, BlockOrder order, const void* src, void* dst, int64_t rows, int64_t k) noexcept {
  if (can_repack(type, order)) convert(type, src, dst, rows, k, true);
}

void unpack_rows(GgmlType type, BlockOrder order, const void* src, void* dst, int64_t rows, int64_t k) noexcept {
  if (can_repack(type, order)) convert(type, src, dst, rows, k, false);
}

void feed_block(GgmlType type, BlockOrder order, const void* weight, int64_t rows, int64_t k, int64_t row,
                int64_t block, void* dst) noexcept {
  Geometry g;
  if (!can_repack(type, order) || !geometry(type, g)) return;
  const int64_t bb = g.head_bytes + g.quant_bytes;
  const int64_t rb = k / type_traits(type).block_elements * bb;
  const auto* w = static_cast<const std::byte*>(weight);
  auto* d = static_cast<std::byte*>(dst);
  if (row >= rows / kInterleaveRows * kInterleaveRows) {  // the row-major tail
    std::memcpy(d, w + row * rb + block * bb, static_cast<size_t>(bb));
    return;
  }
  const int64_t r = row % kInterleaveRows;
  convert_block(g, d, const_cast<std::byte*>(w + (row - r) * rb + block * kInterleaveRows * bb), r, false);
}

}  // namespace skainet::kernels::ref
