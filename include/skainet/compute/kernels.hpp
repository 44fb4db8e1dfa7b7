// skainet::kernels — the plain scalar reference kernels (src/kernels/ref/): quantize and dequantize
// for every format we serve, and the dot products the ops build on. Every SIMD kernel is tested
// against these. Kernels are noexcept and never allocate: callers hand them output memory.
//
//   std::vector<std::byte> q(row_bytes(GgmlType::Q4_0, n));
//   kernels::ref::quantize_row(GgmlType::Q4_0, x.data(), q.data(), n);
//   kernels::ref::dequantize_row(GgmlType::Q4_0, q.data(), y.data(), n);   // n % 32 == 0
#pragma once

#include <cstddef>
#include <cstdint>

#include "skainet/core/format.hpp"

namespace skainet::kernels::ref {

// True when quantize_row / dequantize_row support `type` (it has a row in src/kernels/ref).
bool has_reference(GgmlType type) noexcept;

// x: n floats; dst: row_bytes(type, n) bytes. n must be a multiple of the block size (checked by the
// caller, e.g. through row_bytes()). Dense types convert (F16/BF16 round to nearest even).
void quantize_row(GgmlType type, const float* x, void* dst, int64_t n) noexcept;
void dequantize_row(GgmlType type, const void* src, float* y, int64_t n) noexcept;

// Dot product of one encoded row (n elements of `type`) with n F32 values, accumulated in F32 (and
// exact integer block sums where the format allows). The reference for all matmul kernels.
float dot_row(GgmlType type, const void* row, const float* x, int64_t n) noexcept;

// Kernel-feed block orders (BlockOrder in format.hpp): whether `type` has `order`, and the load-time
// repack of `rows` rows of k elements from the file's row-major blocks (and back, for tests and
// export). Same byte count both ways; src and dst must not overlap. Other (type, order) pairs: no-op.
bool can_repack(GgmlType type, BlockOrder order) noexcept;
void repack_rows(GgmlType type, BlockOrder order, const void* src, void* dst, int64_t rows, int64_t k) noexcept;
void unpack_rows(GgmlType type, BlockOrder order, const void* src, void* dst, int64_t rows, int64_t k) noexcept;
// Block `block` of row `row` of a repacked [rows, k] weight, in file order, into dst (one block's bytes):
// how the reference matmul reads a kernel-feed order.
void feed_block(GgmlType type, BlockOrder order, const void* weight, int64_t rows, int64_t k, int64_t row,
                int64_t block, void* dst) noexcept;

// Half-precision conversions (IEEE binary16 and bfloat16), round to nearest even.
uint16_t fp32_to_fp16(float f) noexcept;
float fp16_to_fp32(uint16_t h) noexcept;
uint16_t fp32_to_bf16(float f) noexcept;
float bf16_to_fp32(uint16_t h) noexcept;

}  // namespace skainet::kernels::ref
