// skainet::kernels — the plain scalar reference kernels of the ops, and the table the
// ExecutionContext calls them through (SIMD tables will fill the same slots later).
//
//   const kernels::KernelTable& k = kernels::reference_table();
//   k.add(a, b, out);                          // views already checked by the op; out preallocated
//   k.matmul(x, w, out, 0, w.dim(-2));         // weight rows [0, out) of every x row
//
// Kernels are noexcept and never allocate. They receive views that the op has validated (types,
// shapes, liveness, writability) and write straight into the output view. They read through byte
// strides, so any view (narrowed, transposed, at any offset) works; where a packed row or a dot
// product needs contiguous floats the op checks that the innermost dimension is contiguous.
#pragma once

#include <cstdint>

#include "skainet/tensor.hpp"

namespace skainet::kernels {

struct RopeParams {
  float base = 10000.0f;
  int64_t dims = 0;  // rotated leading dims of each head (0: the whole innermost dim); even
};

struct SoftmaxParams {
  float scale = 1.0f;   // applied to the input before the softmax
  bool causal = false;  // row i (second-innermost index) sees columns j <= i + offset
  int64_t offset = 0;
};

struct KernelTable {
  // out[..., r, o] = sum_k x[..., r, k] * w[(b,) o, k] for weight rows o in [begin, end) (batch-major
  // when w is 3-D: item = b * out + o). x F32; w F32/F16/BF16 or any packed type with reference kernels.
  void (*matmul)(const Tensor& x, const Tensor& w, const Tensor& out, int64_t begin, int64_t end) noexcept;
  // Elementwise F32, b broadcast to a's shape (right-aligned; dims of 1 repeat).
  void (*add)(const Tensor& a, const Tensor& b, const Tensor& out) noexcept;
  void (*mul)(const Tensor& a, const Tensor& b, const Tensor& out) noexcept;
  void (*scale)(const Tensor& x, float s, const Tensor& out) noexcept;
  void (*silu)(const Tensor& x, const Tensor& out) noexcept;
  void (*swiglu)(const Tensor& gate, const Tensor& up, const Tensor& out) noexcept;
  // Over the innermost dim. weight may be undefined (no scaling).
  void (*rms_norm)(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) noexcept;
  // Adjacent pairs (2i, 2i+1) rotated by pos * base^(-2i/dims); the token of a row is its index in dim 0
  // (rank >= 2) plus pos0.
  void (*rope)(const Tensor& x, int64_t pos0, const RopeParams& p, const Tensor& out) noexcept;
  void (*softmax)(const Tensor& x, const SoftmaxParams& p, const Tensor& out) noexcept;
  // out[i, :] = table[ids[i], :] as F32 (packed rows dequantized). out inner dim contiguous.
  void (*gather_rows)(const Tensor& table, const int32_t* ids, int64_t n, const Tensor& out) noexcept;
  // Same shape; dense<->dense any float type, packed->F32, F32->packed, packed->same packed.
  void (*copy)(const Tensor& src, const Tensor& dst) noexcept;
};

const KernelTable& reference_table() noexcept;

namespace ref {
void matmul(const Tensor& x, const Tensor& w, const Tensor& out, int64_t begin, int64_t end) noexcept;
void add(const Tensor& a, const Tensor& b, const Tensor& out) noexcept;
void mul(const Tensor& a, const Tensor& b, const Tensor& out) noexcept;
void scale(const Tensor& x, float s, const Tensor& out) noexcept;
void silu(const Tensor& x, const Tensor& out) noexcept;
void swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) noexcept;
void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) noexcept;
void rope(const Tensor& x, int64_t pos0, const RopeParams& p, const Tensor& out) noexcept;
void softmax(const Tensor& x, const SoftmaxParams& p, const Tensor& out) noexcept;
void gather_rows(const Tensor& table, const int32_t* ids, int64_t n, const Tensor& out) noexcept;
void copy(const Tensor& src, const Tensor& dst) noexcept;
}  // namespace ref

}  // namespace skainet::kernels
