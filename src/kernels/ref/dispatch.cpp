// Routes the public by-type entry points to the per-format row kernels.
#include <cstring>

#include "kernels/ref/ref_internal.hpp"

namespace skainet::kernels::ref {
namespace {

// For a type without a reference kernel the contract is broken by the caller; we still must not
// crash or leave garbage, so we write zeros of the right size.
void zero_encoded(GgmlType type, void* dst, int64_t n) noexcept {
  const TypeTraits& t = type_traits(type);
  std::memset(dst, 0, static_cast<size_t>(n / t.block_elements) * t.block_bytes);
}

}  // namespace

bool has_reference(GgmlType type) noexcept { return type_traits(type).reference_kernels; }

void quantize_row(GgmlType type, const float* x, void* dst, int64_t n) noexcept {
  using namespace detail;
  auto* out = static_cast<std::byte*>(dst);
  switch (type) {
    case GgmlType::F32: std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float)); return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_fp16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_bf16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case GgmlType::Q4_0: quantize_q4_0(x, dst, n); return;
    case GgmlType::Q4_1: quantize_q4_1(x, dst, n); return;
    case GgmlType::Q5_0: quantize_q5_0(x, dst, n); return;
    case GgmlType::Q5_1: quantize_q5_1(x, dst, n); return;
    case GgmlType::Q8_0: quantize_q8_0(x, dst, n); return;
    case GgmlType::Q2_K: quantize_q2_k(x, dst, n); return;
    case GgmlType::Q3_K: quantize_q3_k(x, dst, n); return;
    case GgmlType::Q4_K: quantize_q4_k(x, dst, n); return;
    case GgmlType::Q5_K: quantize_q5_k(x, dst, n); return;
    case GgmlType::Q6_K: quantize_q6_k(x, dst, n); return;
    case GgmlType::IQ4_NL: quantize_iq4_nl(x, dst, n); return;
    case GgmlType::IQ4_XS: quantize_iq4_xs(x, dst, n); return;
    default: zero_encoded(type, dst, n); return;
  }
}

void dequantize_row(GgmlType type, const void* src, float* y, int64_t n) noexcept {
  using namespace detail;
  const auto* in = static_cast<const std::byte*>(src);
  switch (type) {
    case GgmlType::F32: std::memcpy(y, src, static_cast<size_t>(n) * sizeof(float)); return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        y[i] = fp16_to_fp32(h);
      }
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        y[i] = bf16_to_fp32(h);
      }
      return;
    case GgmlType::Q4_0: dequantize_q4_0(src, y, n); return;
    case GgmlType::Q4_1: dequantize_q4_1(src, y, n); return;
    case GgmlType::Q5_0: dequantize_q5_0(src, y, n); return;
    case GgmlType::Q5_1: dequantize_q5_1(src, y, n); return;
    case GgmlType::Q8_0: dequantize_q8_0(src, y, n); return;
    case GgmlType::Q2_K: dequantize_q2_k(src, y, n); return;
    case GgmlType::Q3_K: dequantize_q3_k(src, y, n); return;
    case GgmlType::Q4_K: dequantize_q4_k(src, y, n); return;
    case GgmlType::Q5_K: dequantize_q5_k(src, y, n); return;
    case GgmlType::Q6_K: dequantize_q6_k(src, y, n); return;
    case GgmlType::IQ4_NL: dequantize_iq4_nl(src, y, n); return;
    case GgmlType::IQ4_XS: dequantize_iq4_xs(src, y, n); return;
    default: std::memset(y, 0, static_cast<size_t>(n) * sizeof(float)); return;
  }
}

}  // namespace skainet::kernels::ref
