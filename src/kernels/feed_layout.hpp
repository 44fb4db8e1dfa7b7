// The kernel-feed layout of each format that has one (format.hpp, BlockOrder::Interleaved16): the
// one home of these facts. kernels/ref/repack.cpp writes the layout, kernels/x86/feed_tiles.hpp
// reads it. A row's block is a head (its scales) and its quant bytes; in a group block the 16 rows'
// heads come first, in units interleaved across the rows (unit i of row r at (16 i + r) * unit), then
// the quants in 4-byte chunks across the rows (chunk c of row r at 16 * head_bytes + (16 c + r) * 4).
// Plain constant data, so the ISA units may include it (isa.hpp). Private to src/kernels.
#pragma once

#include <cstdint>

#include "skainet/core/format.hpp"

namespace skainet::kernels {

struct FeedLayout {
  int64_t head_unit = 0;    // bytes of one head unit
  int64_t head_bytes = 0;   // per block and row
  int64_t quant_bytes = 0;  // per block and row
  uint8_t flip = 0;         // xor applied to every quant byte (Q8_0: stored unsigned, as vpdpbusd multiplies)
  bool head_last = false;   // the file's block has its quants first (Q6_K)
};

inline constexpr int64_t kFeedChunk = 4;

// Q4_0/Q8_0: one F16 scale per row side by side. Q4_K: the d|dmin word and the three words of packed
// 6-bit scales, each a 512-bit load for 16 rows. Q6_K: 8 pairs of int8 scales, then the F16 d.
inline constexpr FeedLayout kFeedQ4_0{2, 2, 16, 0x00, false};
inline constexpr FeedLayout kFeedQ8_0{2, 2, 32, 0x80, false};
inline constexpr FeedLayout kFeedQ4_K{4, 16, 128, 0x00, false};
inline constexpr FeedLayout kFeedQ6_K{2, 18, 192, 0x00, true};

namespace {  // internal linkage, as isa.hpp's helpers: no out-of-line copy an ISA unit could supply

// Bytes of the 16 rows' heads at the start of a group block.
constexpr int64_t feed_heads_bytes(const FeedLayout& l) noexcept { return kInterleaveRows * l.head_bytes; }

}  // namespace

}  // namespace skainet::kernels
