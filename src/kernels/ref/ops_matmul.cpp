#include "kernels/ref/ops_common.hpp"

namespace skainet::kernels::ref {
namespace {

using namespace detail;

// One dot product of a weight row with an x row; dense weights may be strided (a transposed K/V view).
float dot(const Tensor& w, const std::byte* wrow, const std::byte* xrow, int64_t k, int64_t sw, int64_t sx) noexcept {
  const GgmlType t = w.type();
  if (w.packed()) return dot_row(t, wrow, f32(xrow), k);
  const float* px = f32(xrow);
  const int64_t sxe = sx / 4;
  double acc = 0.0;
  if (t == GgmlType::F32) {
    const float* pw = f32(wrow);
    const int64_t swe = sw / 4;
    for (int64_t i = 0; i < k; ++i) acc += static_cast<double>(pw[i * swe]) * px[i * sxe];
  } else {
    for (int64_t i = 0; i < k; ++i) acc += static_cast<double>(load(t, wrow + i * sw)) * px[i * sxe];
  }
  return static_cast<float>(acc);
}

// A weight in a kernel-feed order (rank 2, whole: the op refuses views of one), read block by block
// back in file order: slow, but the reference for every order.
void matmul_feed_order(const Tensor& x, const Tensor& w, const Tensor& out, int64_t begin, int64_t end) noexcept {
  const GgmlType t = w.type();
  const int64_t k = x.shape().back(), be = type_traits(t).block_elements, so = inner_stride(out);
  alignas(64) std::byte block[512];  // more than any format's block (Q8_K's 292 bytes)
  for (int64_t o = begin; o < end; ++o)
    for (int64_t r = 0; r < row_count(x.shape()); ++r) {
      const float* xrow = f32(x.raw() + row_offset(x.shape(), x.strides(), r));
      double acc = 0.0;
      for (int64_t b = 0; b < k / be; ++b) {
        feed_block(t, w.block_order(), w.raw(), w.dim(0), k, o, b, block);
        acc += dot_row(t, block, xrow + b * be, be);
      }
      const auto v = static_cast<float>(acc);
      std::memcpy(out.raw_mut() + row_offset(out.shape(), out.strides(), r) + o * so, &v, 4);
    }
}

}  // namespace

void matmul(const Tensor& x, const Tensor& w, const Tensor& out, int64_t begin, int64_t end) noexcept {
  const int64_t k = x.shape().back();
  const int64_t sx = inner_stride(x), sw = inner_stride(w), so = inner_stride(out);
  if (w.rank() == 3) {  // batched: x [B, n, k], w [B, O, k], out [B, n, O]
    const int64_t o_count = w.dim(1), n = x.dim(1);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item / o_count, o = item % o_count;
      const std::byte* wrow = w.raw() + b * w.stride(0) + o * w.stride(1);
      for (int64_t r = 0; r < n; ++r) {
        const std::byte* xrow = x.raw() + b * x.stride(0) + r * x.stride(1);
        std::byte* po = out.raw_mut() + b * out.stride(0) + r * out.stride(1) + o * so;
        const float v = dot(w, wrow, xrow, k, sw, sx);
        std::memcpy(po, &v, 4);
      }
    }
    return;
  }
  const int64_t rows = row_count(x.shape());
  if (w.block_order() != BlockOrder::RowMajor) return matmul_feed_order(x, w, out, begin, end);
  for (int64_t o = begin; o < end; ++o) {
    const std::byte* wrow = w.raw() + o * w.stride(0);
    for (int64_t r = 0; r < rows; ++r) {
      const std::byte* xrow = x.raw() + row_offset(x.shape(), x.strides(), r);
      std::byte* po = out.raw_mut() + row_offset(out.shape(), out.strides(), r) + o * so;
      const float v = dot(w, wrow, xrow, k, sw, sx);
      std::memcpy(po, &v, 4);
    }
  }
}

void attention_heads(const Tensor& q, const Tensor& keys, const Tensor& values, const AttentionHeads& a,
                     const Tensor& scores, const Tensor& out) noexcept {
  attention_heads_by_parts(&matmul, &softmax, q, keys, values, a, scores, out);
}

}  // namespace skainet::kernels::ref
