// MXFP4 (blocks of 32): a power-of-two block scale (E8M0) and 4-bit E2M1 values, kMxfp4Values. The
// quantizer is ggml's quantize_row_mxfp4_ref (what llama-quantize writes; ggml's quantize_mxfp4 calls
// it): the exponent from the block's largest magnitude, then each element's nearest level by a
// linear search, ties to the first (lower) index, operation for operation.
#include <bit>
#include <cmath>

#include "kernels/ref/ref_internal.hpp"

namespace skainet::kernels::ref::detail {
namespace {

float scale_of(uint8_t e) noexcept { return std::bit_cast<float>(mxfp4_scale_bits(e)); }

// floor(log2(amax)) - 2 + 127: the largest level (12 = 6 doubled) times the scale then lies within a
// factor two of amax. ggml casts the float to uint8_t, which is undefined outside [0, 255]; that
// happens only for amax below 2^-125 (all but zero weights), which we clamp to 0.
uint8_t exponent_of(float amax) noexcept {
  if (!(amax > 0.0f)) return 0;
  const float e = std::floor(std::log2(amax)) - 2 + 127;
  if (!(e > 0.0f)) return 0;
  return e >= 255.0f ? uint8_t{255} : static_cast<uint8_t>(e);
}

uint8_t nearest_index(float x, float d) noexcept {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kMxfp4Values[0]) * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kMxfp4Values[i]) * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best);
}

void quantize_mxfp4(const float* x, void* dst, int64_t n) noexcept {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j)
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
    BlockMXFP4 b{};
    b.e = exponent_of(amax);
    const float d = scale_of(b.e);
    for (int j = 0; j < kQK / 2; ++j)
      b.qs[j] = static_cast<uint8_t>(nearest_index(x[j], d) | (nearest_index(x[j + kQK / 2], d) << 4));
    store_block(dst, i, b);
  }
}

void dequantize_mxfp4(const void* src, float* y, int64_t n) noexcept {
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const auto b = load_block<BlockMXFP4>(src, i);
    const float d = scale_of(b.e);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(kMxfp4Values[b.qs[j] & 0xf]) * d;
      y[j + kQK / 2] = static_cast<float>(kMxfp4Values[b.qs[j] >> 4]) * d;
    }
  }
}

}  // namespace

std::span<const RefFormat> mxfp4_formats() noexcept {
  static constexpr RefFormat kRows[] = {
      {.type = GgmlType::MXFP4, .quantize = &quantize_mxfp4, .dequantize = &dequantize_mxfp4},
  };
  return kRows;
}

}  // namespace skainet::kernels::ref::detail
