// skainet blocks — the byte layout of one block of every packed format we read, exactly as ggml
// lays it out in a GGUF file (ggml-common.h). Half-precision fields hold raw IEEE binary16 bits.
//
//   BlockQ4_0 b;
//   std::memcpy(&b, row + i * sizeof(BlockQ4_0), sizeof b);   // rows may sit at any byte offset
//   float d = kernels::ref::fp16_to_fp32(b.d);
//   static_assert(BlockQ4_0::kElements == 32 && sizeof(BlockQ4_0) == 18);
//
// Blocks in a file are packed back to back at their size, so a block pointer is only 2-byte aligned
// (or not at all if the row itself is not): kernels copy blocks in and out with memcpy rather than
// dereferencing a cast pointer.
#pragma once

#include <cstdint>
#include <type_traits>

#include "skainet/format.hpp"

namespace skainet {

inline constexpr int kQK = 32;    // elements per block of the legacy formats
inline constexpr int kQK_K = 256;  // elements per super-block of the K formats
inline constexpr int kKScaleBytes = 12;  // packed 6-bit scales and mins of Q4_K / Q5_K

// x = d * (q - 8); element j in the low nibble of qs[j], element j + 16 in its high nibble.
struct BlockQ4_0 {
  static constexpr GgmlType kType = GgmlType::Q4_0;
  static constexpr int kElements = kQK;
  uint16_t d;
  uint8_t qs[kQK / 2];
};

// x = d * q + m; nibbles as Q4_0.
struct BlockQ4_1 {
  static constexpr GgmlType kType = GgmlType::Q4_1;
  static constexpr int kElements = kQK;
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};

// x = d * (q - 16); low 4 bits as Q4_0, bit 4 of element j is bit j of the little-endian qh word.
struct BlockQ5_0 {
  static constexpr GgmlType kType = GgmlType::Q5_0;
  static constexpr int kElements = kQK;
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};

// x = d * q + m; bits as Q5_0.
struct BlockQ5_1 {
  static constexpr GgmlType kType = GgmlType::Q5_1;
  static constexpr int kElements = kQK;
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};

// x = d * q.
struct BlockQ8_0 {
  static constexpr GgmlType kType = GgmlType::Q8_0;
  static constexpr int kElements = kQK;
  uint16_t d;
  int8_t qs[kQK];
};

// Q8_0 plus s = d * sum(q): the activation side of Q4_1/Q5_1 dot products.
struct BlockQ8_1 {
  static constexpr GgmlType kType = GgmlType::Q8_1;
  static constexpr int kElements = kQK;
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK];
};

// 8 sub-blocks of 32: x = d * sc[j] * q - dmin * m[j], with 6-bit sc/m packed in `scales` (see
// docs/formats.md). Bytes qs[32*k + l] hold element 64*k + l (low nibble) and 64*k + 32 + l (high).
struct BlockQ4_K {
  static constexpr GgmlType kType = GgmlType::Q4_K;
  static constexpr int kElements = kQK_K;
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];
};

// Q4_K plus a fifth bit: bit (2k) of qh[l] for element 64*k + l, bit (2k+1) for 64*k + 32 + l.
struct BlockQ5_K {
  static constexpr GgmlType kType = GgmlType::Q5_K;
  static constexpr int kElements = kQK_K;
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};

// 16 sub-blocks of 16: x = d * scales[j] * (q - 32), q of 6 bits split into ql (4) and qh (2).
struct BlockQ6_K {
  static constexpr GgmlType kType = GgmlType::Q6_K;
  static constexpr int kElements = kQK_K;
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};

// The activation side of K-quant dot products: float scale, and sums of each 16 quants.
struct BlockQ8_K {
  static constexpr GgmlType kType = GgmlType::Q8_K;
  static constexpr int kElements = kQK_K;
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

// Sizes as format.cpp's type table states them (and as ggml's type_traits do).
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

template <class B>
inline constexpr bool kIsBlock = std::is_trivially_copyable_v<B> && std::is_standard_layout_v<B>;
static_assert(kIsBlock<BlockQ4_0> && kIsBlock<BlockQ4_1> && kIsBlock<BlockQ5_0> && kIsBlock<BlockQ5_1> &&
              kIsBlock<BlockQ8_0> && kIsBlock<BlockQ8_1> && kIsBlock<BlockQ4_K> && kIsBlock<BlockQ5_K> &&
              kIsBlock<BlockQ6_K> && kIsBlock<BlockQ8_K>);

}  // namespace skainet
