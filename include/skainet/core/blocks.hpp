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

#include "skainet/core/format.hpp"

namespace skainet {

inline constexpr int kQK = 32;           // elements per block of the legacy formats
inline constexpr int kQK_K = 256;        // elements per super-block of the K formats
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

// 16 sub-blocks of 16: x = d * (scales[j] & 15) * q - dmin * (scales[j] >> 4), q of 2 bits. Byte
// qs[32*h + l] holds elements 128*h + 32*s + l in bits 2s..2s+1 (s = 0..3).
struct BlockQ2_K {
  static constexpr GgmlType kType = GgmlType::Q2_K;
  static constexpr int kElements = kQK_K;
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};

// 16 sub-blocks of 16: x = d * (sc[j] - 32) * (q - 4), q of 3 bits: the low 2 as Q2_K's qs, the third
// in bit (e / 32) of hmask[e % 32] for element e (set means no -4). The 6-bit sc: low nibbles in
// scales[0..7] (j < 8 low, j >= 8 high), top 2 bits in scales[8 + j % 4] at bit 2 * (j / 4).
struct BlockQ3_K {
  static constexpr GgmlType kType = GgmlType::Q3_K;
  static constexpr int kElements = kQK_K;
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[kKScaleBytes];
  uint16_t d;
};

// The 16 non-uniform levels IQ4_NL and IQ4_XS index (ggml's kvalues_iq4nl).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// x = d * kIq4nlValues[q]; nibbles as Q4_0 (element j low nibble of qs[j], j + 16 high).
struct BlockIQ4_NL {
  static constexpr GgmlType kType = GgmlType::IQ4_NL;
  static constexpr int kElements = kQK;
  uint16_t d;
  uint8_t qs[kQK / 2];
};

// 8 sub-blocks of 32: x = d * (ls[j] - 32) * kIq4nlValues[q], the 6-bit ls[j] as nibble j % 2 of
// scales_l[j / 2] plus bits 2j..2j+1 of scales_h on top; each sub-block's nibbles as IQ4_NL.
struct BlockIQ4_XS {
  static constexpr GgmlType kType = GgmlType::IQ4_XS;
  static constexpr int kElements = kQK_K;
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};

// The 16 levels MXFP4 indexes: OCP MX's E2M1 values doubled (ggml's kvalues_mxfp4), so that they
// are integers; the block scale is halved to match (mxfp4_scale).
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// x = mxfp4_scale(e) * kMxfp4Values[q]; e an E8M0 exponent (2^(e - 127), no mantissa); nibbles as
// Q4_0. gpt-oss ships its expert weights in this format.
struct BlockMXFP4 {
  static constexpr GgmlType kType = GgmlType::MXFP4;
  static constexpr int kElements = kQK;
  uint8_t e;
  uint8_t qs[kQK / 2];
};

// 2^(e - 128): half the E8M0 value, as the doubled levels need (ggml's GGML_E8M0_TO_FP32_HALF). The
// float's bits directly: e < 2 are subnormals (2^-128, 2^-127), the rest normals of exponent e - 1.
// e = 255 (E8M0's NaN) reads as 2^127, as ggml reads it.
constexpr uint32_t mxfp4_scale_bits(uint8_t e) noexcept {
  return e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23;
}

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
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockMXFP4) == 17);

template <class B>
inline constexpr bool kIsBlock = std::is_trivially_copyable_v<B>&& std::is_standard_layout_v<B>;
static_assert(kIsBlock<BlockQ4_0> && kIsBlock<BlockQ4_1> && kIsBlock<BlockQ5_0> && kIsBlock<BlockQ5_1> &&
              kIsBlock<BlockQ8_0> && kIsBlock<BlockQ8_1> && kIsBlock<BlockQ4_K> && kIsBlock<BlockQ5_K> &&
              kIsBlock<BlockQ6_K> && kIsBlock<BlockQ8_K> && kIsBlock<BlockQ2_K> && kIsBlock<BlockQ3_K> &&
              kIsBlock<BlockIQ4_NL> && kIsBlock<BlockIQ4_XS> && kIsBlock<BlockMXFP4>);

}  // namespace skainet
