// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: one scale (and for *_1 a minimum) per 32 elements. The quantizers
// follow ggml's quantize_row_*_ref step for step so that the bytes we write are the bytes
// llama.cpp writes; see docs/formats.md for the one place where that depends on the compiler.
#include <cfloat>
#include <cmath>

#include "kernels/ref/ref_internal.hpp"

namespace skainet::kernels::ref::detail {
namespace {

// Truncation toward zero, like ggml's (int8_t) casts, but defined for NaN and out-of-range input
// (a block holding an infinity), which a plain cast is not.
inline int trunc_clamped(float v, int hi) noexcept {
  if (!(v >= 0.0f)) return 0;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}

// ggml computes x*id + offset for the symmetric formats where the result depends on whether the
// compiler fused the multiply-add; llama.cpp's usual builds do, and so does gguf-py (in float64).
// The float64 product of two floats is exact, so this is the fused result up to a double
// rounding that only a value within 2^-50 of a rounding boundary could notice.
inline float fused_offset(float x, float id, double offset) noexcept {
  return static_cast<float>(static_cast<double>(x) * static_cast<double>(id) + offset);
}

inline void min_max(const float* x, float& min, float& max) noexcept {
  min = FLT_MAX;
  max = -FLT_MAX;
  for (int j = 0; j < kQK; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
}

inline uint32_t load_qh(const uint8_t (&qh)[4]) noexcept {
  return uint32_t{qh[0]} | uint32_t{qh[1]} << 8 | uint32_t{qh[2]} << 16 | uint32_t{qh[3]} << 24;
}

inline void store_qh(uint8_t (&qh)[4], uint32_t v) noexcept {
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<uint8_t>(v >> (8 * k));
}

// The 4- and 5-bit formats differ only in the width of a quant: the 5-bit ones (a Block with qh)
// keep each quant's fifth bit in qh, bit j for element j.
template <class Block>
constexpr bool kFifthBit = requires(Block b) {
  b.qh;
};

// Quants lo (element j) and hi (element j + 16) into the block; their fifth bits into qh.
template <class Block>
void pack_pair(Block& b, uint32_t& qh, int j, int lo, int hi) noexcept {
  b.qs[j] = static_cast<uint8_t>((lo & 0xf) | (hi & 0xf) << 4);
  if constexpr (kFifthBit<Block>) {
    qh |= static_cast<uint32_t>(lo >> 4) << j;
    qh |= static_cast<uint32_t>(hi >> 4) << (j + kQK / 2);
  }
}

template <class Block>
void store_packed(void* dst, int64_t i, Block& b, uint32_t qh) noexcept {
  if constexpr (kFifthBit<Block>) store_qh(b.qh, qh);
  store_block(dst, i, b);
}

// Q4_0, Q5_0: d = the signed absmax / -(kMax + 1) / 2, q = x / d + (kMax + 1) / 2 (ggml's 8.5 or 16.5
// before the truncation), so the quants run 0 ..= kMax.
template <class Block, int kMax>
void quantize_symmetric(const float* x, void* dst, int64_t n) noexcept {
  constexpr float kHalf = (kMax + 1) / 2;
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / -kHalf;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    Block b{};
    b.d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = trunc_clamped(fused_offset(x[j], id, kHalf + 0.5), kMax);
      const int hi = trunc_clamped(fused_offset(x[j + kQK / 2], id, kHalf + 0.5), kMax);
      pack_pair(b, qh, j, lo, hi);
    }
    store_packed(dst, i, b, qh);
  }
}

// Q4_1, Q5_1: d = (max - min) / kMax and the minimum m, q = (x - m) / d rounded half up.
template <class Block, int kMax>
void quantize_with_min(const float* x, void* dst, int64_t n) noexcept {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float min, max;
    min_max(x, min, max);
    const float d = (max - min) / static_cast<float>(kMax);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    Block b{};
    b.d = fp32_to_fp16(d);
    b.m = fp32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const float v0 = (x[j] - min) * id;
      const float v1 = (x[j + kQK / 2] - min) * id;
      pack_pair(b, qh, j, trunc_clamped(v0 + 0.5f, kMax), trunc_clamped(v1 + 0.5f, kMax));
    }
    store_packed(dst, i, b, qh);
  }
}

void quantize_q8_0(const float* x, void* dst, int64_t n) noexcept {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = amax > std::fabs(x[j]) ? amax : std::fabs(x[j]);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_0 b{};
    b.d = fp32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) {
      const float v = std::round(x[j] * id);  // half away from zero, as roundf
      b.qs[j] = static_cast<int8_t>(v >= 127.0f ? 127 : v <= -127.0f ? -127 : v == v ? static_cast<int>(v) : 0);
    }
    store_block(dst, i, b);
  }
}

// Quant j of a block, fifth bit included.
template <class Block>
int quant_at(const Block& b, uint32_t qh, int j) noexcept {
  const int q = j < kQK / 2 ? b.qs[j] & 0xf : b.qs[j - kQK / 2] >> 4;
  if constexpr (kFifthBit<Block>)
    return q | static_cast<int>((qh >> j) & 1u) << 4;
  else
    return q;
}

template <class Block>
uint32_t fifth_bits(const Block& b) noexcept {
  if constexpr (kFifthBit<Block>)
    return load_qh(b.qh);
  else
    return 0;
}

// Q4_0 (kOffset 8), Q5_0 (16): (q - kOffset) * d.
template <class Block, int kOffset>
void dequantize_symmetric(const void* src, float* y, int64_t n) noexcept {
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const auto b = load_block<Block>(src, i);
    const float d = fp16_to_fp32(b.d);
    const uint32_t qh = fifth_bits(b);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(quant_at(b, qh, j) - kOffset) * d;
  }
}

// Q4_1, Q5_1: q * d + m.
template <class Block>
void dequantize_with_min(const void* src, float* y, int64_t n) noexcept {
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const auto b = load_block<Block>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float m = fp16_to_fp32(b.m);
    const uint32_t qh = fifth_bits(b);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(quant_at(b, qh, j)) * d + m;
  }
}

void dequantize_q8_0(const void* src, float* y, int64_t n) noexcept {
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const auto b = load_block<BlockQ8_0>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
  }
}

}  // namespace

std::span<const RefFormat> legacy_formats() noexcept {
  static constexpr RefFormat kRows[] = {
      {.type = GgmlType::Q4_0,
       .quantize = &quantize_symmetric<BlockQ4_0, 15>,
       .dequantize = &dequantize_symmetric<BlockQ4_0, 8>,
       .feed = &kFeedQ4_0},
      {.type = GgmlType::Q4_1,
       .quantize = &quantize_with_min<BlockQ4_1, 15>,
       .dequantize = &dequantize_with_min<BlockQ4_1>},
      {.type = GgmlType::Q5_0,
       .quantize = &quantize_symmetric<BlockQ5_0, 31>,
       .dequantize = &dequantize_symmetric<BlockQ5_0, 16>},
      {.type = GgmlType::Q5_1,
       .quantize = &quantize_with_min<BlockQ5_1, 31>,
       .dequantize = &dequantize_with_min<BlockQ5_1>},
      {.type = GgmlType::Q8_0, .quantize = &quantize_q8_0, .dequantize = &dequantize_q8_0, .feed = &kFeedQ8_0},
  };
  return kRows;
}

}  // namespace skainet::kernels::ref::detail
