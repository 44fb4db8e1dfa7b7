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

// Value with the largest magnitude (the first one on ties), sign kept.
inline float signed_absmax(const float* x) noexcept {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
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


void quantize_q4_0(const float* x, void* dst, int64_t n) noexcept {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float d = signed_absmax(x) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_0 b{};
    b.d = fp32_to_fp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = trunc_clamped(fused_offset(x[j], id, 8.5), 15);
      const int hi = trunc_clamped(fused_offset(x[j + kQK / 2], id, 8.5), 15);
      b.qs[j] = static_cast<uint8_t>(lo | hi << 4);
    }
    store_block(dst, i, b);
  }
}

void quantize_q4_1(const float* x, void* dst, int64_t n) noexcept {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float min, max;
    min_max(x, min, max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_1 b{};
    b.d = fp32_to_fp16(d);
    b.m = fp32_to_fp16(min);
    for (int j = 0; j < kQK / 2; ++j) {
      const float v0 = (x[j] - min) * id;
      const float v1 = (x[j + kQK / 2] - min) * id;
      const int lo = trunc_clamped(v0 + 0.5f, 15);
      const int hi = trunc_clamped(v1 + 0.5f, 15);
      b.qs[j] = static_cast<uint8_t>(lo | hi << 4);
    }
    store_block(dst, i, b);
  }
}

void quantize_q5_0(const float* x, void* dst, int64_t n) noexcept {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float d = signed_absmax(x) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ5_0 b{};
    b.d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = trunc_clamped(fused_offset(x[j], id, 16.5), 31);
      const int hi = trunc_clamped(fused_offset(x[j + kQK / 2], id, 16.5), 31);
      b.qs[j] = static_cast<uint8_t>((lo & 0xf) | (hi & 0xf) << 4);
      qh |= static_cast<uint32_t>(lo >> 4) << j;
      qh |= static_cast<uint32_t>(hi >> 4) << (j + kQK / 2);
    }
    store_qh(b.qh, qh);
    store_block(dst, i, b);
  }
}

void quantize_q5_1(const float* x, void* dst, int64_t n) noexcept {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float min, max;
    min_max(x, min, max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ5_1 b{};
    b.d = fp32_to_fp16(d);
    b.m = fp32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const float v0 = (x[j] - min) * id;
      const float v1 = (x[j + kQK / 2] - min) * id;
      const int lo = trunc_clamped(v0 + 0.5f, 31);
      const int hi = trunc_clamped(v1 + 0.5f, 31);
      b.qs[j] = static_cast<uint8_t>((lo & 0xf) | (hi & 0xf) << 4);
      qh |= static_cast<uint32_t>(lo >> 4) << j;
      qh |= static_cast<uint32_t>(hi >> 4) << (j + kQK / 2);
    }
    store_qh(b.qh, qh);
    store_block(dst, i, b);
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

void dequantize_q4_0(const void* src, float* y, int64_t n) noexcept {
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const auto b = load_block<BlockQ4_0>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((b.qs[j] & 0xf) - 8) * d;
      y[j + kQK / 2] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_1(const void* src, float* y, int64_t n) noexcept {
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const auto b = load_block<BlockQ4_1>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float m = fp16_to_fp32(b.m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(b.qs[j] & 0xf) * d + m;
      y[j + kQK / 2] = static_cast<float>(b.qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_q5_0(const void* src, float* y, int64_t n) noexcept {
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const auto b = load_block<BlockQ5_0>(src, i);
    const float d = fp16_to_fp32(b.d);
    const uint32_t qh = load_qh(b.qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (b.qs[j] & 0xf) | static_cast<int>((qh >> j) & 1u) << 4;
      const int hi = (b.qs[j] >> 4) | static_cast<int>((qh >> (j + kQK / 2)) & 1u) << 4;
      y[j] = static_cast<float>(lo - 16) * d;
      y[j + kQK / 2] = static_cast<float>(hi - 16) * d;
    }
  }
}

void dequantize_q5_1(const void* src, float* y, int64_t n) noexcept {
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const auto b = load_block<BlockQ5_1>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float m = fp16_to_fp32(b.m);
    const uint32_t qh = load_qh(b.qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (b.qs[j] & 0xf) | static_cast<int>((qh >> j) & 1u) << 4;
      const int hi = (b.qs[j] >> 4) | static_cast<int>((qh >> (j + kQK / 2)) & 1u) << 4;
      y[j] = static_cast<float>(lo) * d + m;
      y[j + kQK / 2] = static_cast<float>(hi) * d + m;
    }
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
      {.type = GgmlType::Q4_0, .quantize = &quantize_q4_0, .dequantize = &dequantize_q4_0,
       .feed = &kFeedQ4_0},
      {.type = GgmlType::Q4_1, .quantize = &quantize_q4_1, .dequantize = &dequantize_q4_1},
      {.type = GgmlType::Q5_0, .quantize = &quantize_q5_0, .dequantize = &dequantize_q5_0},
      {.type = GgmlType::Q5_1, .quantize = &quantize_q5_1, .dequantize = &dequantize_q5_1},
      {.type = GgmlType::Q8_0, .quantize = &quantize_q8_0, .dequantize = &dequantize_q8_0,
       .feed = &kFeedQ8_0},
  };
  return kRows;
}

}  // namespace skainet::kernels::ref::detail
