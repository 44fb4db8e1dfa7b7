// Kernel-feed block orders (format.hpp, BlockOrder::Interleaved16): the load-time repack and its
// inverse. The interleaved kernels (x86/feed_tiles.hpp) read one 4-byte chunk of quants per row into
// one 32-bit lane, so a 512-bit load covers 16 rows and the activation's 4 bytes are broadcast to all
// of them; the per-block scales of the 16 rows sit together so they convert to floats in one go.
#include <cstdint>
#include <cstring>

#include "kernels/ref/ref_internal.hpp"

namespace skainet::kernels::ref {
namespace {

// The layout of each format (its reference row's, kernels/feed_layout.hpp), or false where it has none.
bool geometry(GgmlType type, FeedLayout& g) noexcept {
  const detail::RefFormat* f = detail::find_format(type);
  if (!f || !f->feed) return false;
  g = *f->feed;
  return true;
}

constexpr int64_t head_offset(const FeedLayout& g) { return g.head_last ? g.quant_bytes : 0; }
constexpr int64_t quant_offset(const FeedLayout& g) { return g.head_last ? 0 : g.head_bytes; }

// Within one block of a 16-row group: where row r's head unit i and its quant chunk c sit.
constexpr int64_t head_at(const FeedLayout& g, int64_t i, int64_t r) { return (i * kInterleaveRows + r) * g.head_unit; }
constexpr int64_t chunk_at(const FeedLayout& g, int64_t c, int64_t r) {
  return feed_heads_bytes(g) + (c * kInterleaveRows + r) * kFeedChunk;
}

// One row's block (`row`, file order) to or from its place in a group block (`feed`). The unit size
// and the direction are constants so every copy is a plain load and store: this runs over every
// weight at load, and with memcpy calls of a run-time size it was a third of a Q8_0 load.
template <int64_t kUnit, bool kToFeed>
void convert_block_as(const FeedLayout& g, std::byte* row, std::byte* feed, int64_t r) noexcept {
  for (int64_t i = 0; i < g.head_bytes / kUnit; ++i) {
    std::byte* unit = feed + head_at(g, i, r);
    std::byte* in_row = row + head_offset(g) + i * kUnit;
    std::memcpy(kToFeed ? unit : in_row, kToFeed ? in_row : unit, kUnit);
  }
  const uint32_t flip = g.flip * 0x01010101u;
  std::byte* chunk = feed + chunk_at(g, 0, r);
  std::byte* quants = row + quant_offset(g);
  for (int64_t c = 0; c < g.quant_bytes / kFeedChunk;
       ++c, chunk += kInterleaveRows * kFeedChunk, quants += kFeedChunk) {
    uint32_t word;
    std::memcpy(&word, kToFeed ? quants : chunk, kFeedChunk);
    word ^= flip;
    std::memcpy(kToFeed ? chunk : quants, &word, kFeedChunk);
  }
}

void convert_block(const FeedLayout& g, std::byte* row, std::byte* feed, int64_t r, bool to_feed) noexcept {
  if (g.head_unit == 2)
    return to_feed ? convert_block_as<2, true>(g, row, feed, r) : convert_block_as<2, false>(g, row, feed, r);
  return to_feed ? convert_block_as<4, true>(g, row, feed, r) : convert_block_as<4, false>(g, row, feed, r);
}

// One group of 16 rows (`to_feed`: row-major -> interleaved, else back).
void convert_group(const FeedLayout& g, int64_t blocks, const std::byte* src, std::byte* dst, bool to_feed) noexcept {
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
  FeedLayout g;
  if (!geometry(type, g)) return;
  const int64_t blocks = k / type_traits(type).block_elements;
  const int64_t rb = blocks * (g.head_bytes + g.quant_bytes);
  const auto* s = static_cast<const std::byte*>(src);
  auto* d = static_cast<std::byte*>(dst);
  const int64_t grouped = rows / kInterleaveRows * kInterleaveRows;
  for (int64_t r = 0; r < grouped; r += kInterleaveRows) convert_group(g, blocks, s + r * rb, d + r * rb, to_feed);
  std::memcpy(d + grouped * rb, s + grouped * rb, static_cast<size_t>((rows - grouped) * rb));  // the tail
}

}  // namespace

bool can_repack(GgmlType type, BlockOrder order) noexcept {
  FeedLayout g;
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
  FeedLayout g;
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
