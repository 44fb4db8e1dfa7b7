// dot_row: the reference every matmul kernel is measured against. It decodes one block (or 256
// dense elements) at a time into a stack buffer, so it needs no heap and reads each byte once.
#include <limits>

#include "kernels/ref/ref_internal.hpp"

namespace skainet::kernels::ref {
namespace {

constexpr int64_t kChunk = kQK_K;  // the largest block we decode, and the dense chunk size

}  // namespace

float dot_row(GgmlType type, const void* row, const float* x, int64_t n) noexcept {
  if (!has_reference(type)) return std::numeric_limits<float>::quiet_NaN();
  const TypeTraits& t = type_traits(type);
  const auto* bytes = static_cast<const std::byte*>(row);
  // Dense types have 1-element "blocks"; decode them kChunk at a time.
  const int64_t step = t.block_elements == 1 ? kChunk : t.block_elements;
  const int64_t step_bytes = step / t.block_elements * t.block_bytes;
  float buf[kChunk];
  float sum = 0.0f;
  for (int64_t i = 0; i < n; i += step, bytes += step_bytes) {
    const int64_t len = n - i < step ? n - i : step;
    dequantize_row(type, bytes, buf, len);
    // Sum each chunk on its own first: a long row then adds up chunk sums of similar size, which
    // keeps the float error of the reference well below what the kernels are allowed.
    float part = 0.0f;
    for (int64_t j = 0; j < len; ++j) part += buf[j] * x[i + j];
    sum += part;
  }
  return sum;
}

}  // namespace skainet::kernels::ref
