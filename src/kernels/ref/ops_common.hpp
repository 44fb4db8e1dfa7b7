// Shared helpers of the reference op kernels: walking the rows of strided views, broadcasting and
// reading/writing one float in any dense float type. Private to src/kernels.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>

#include "skainet/compute/kernel_ops.hpp"
#include "skainet/compute/kernels.hpp"

namespace skainet::kernels::ref::detail {

// Rows are the innermost vectors; their count is the product of every other dimension.
inline int64_t row_count(const Shape& s) noexcept {
  int64_t n = 1;
  for (int i = 0; i + 1 < s.rank(); ++i) n *= s[i];
  return n;
}

// Byte offset of row r (linear over every dim but the innermost, row-major) under shape/strides.
inline int64_t row_offset(const Shape& s, const Strides& st, int64_t r) noexcept {
  int64_t off = 0;
  for (int i = s.rank() - 2; i >= 0; --i) {
    const int64_t d = s[i];
    off += (r % d) * st[static_cast<size_t>(i)];
    r /= d;
  }
  return off;
}

// row_offset for r = 0, 1, 2, ... in turn, without its divisions (an odometer over the outer dims):
// how the row ops walk their rows (a small model's RoPE spent more on the divisions than on its
// rotations); row_offset stays for the reference matmul, which starts over for every weight row.
class RowCursor {
 public:
  RowCursor(const Shape& s, const Strides& st) noexcept : shape_(s), strides_(st) {}
  int64_t offset() const noexcept { return offset_; }
  void next() noexcept {
    for (int i = shape_.rank() - 2; i >= 0; --i) {
      const auto d = static_cast<size_t>(i);
      offset_ += strides_[d];
      if (++index_[d] < shape_[i]) return;
      offset_ -= index_[d] * strides_[d];
      index_[d] = 0;
    }
  }

 private:
  Shape shape_;
  Strides strides_;
  Strides index_{};
  int64_t offset_ = 0;
};

inline int64_t inner_stride(const Tensor& t) noexcept { return t.rank() ? t.stride(t.rank() - 1) : 0; }

// The columns [begin, end) of its n that a softmax row sees (SoftmaxParams): row r is the query at
// position r % queries + offset (`queries` is the second-innermost dimension); causal, it sees up
// to its position, with a window only the `window` columns up to it. Empty when begin == end.
struct VisibleColumns {
  int64_t begin, end;
};
inline VisibleColumns softmax_visible(const SoftmaxParams& p, int64_t r, int64_t queries, int64_t n) noexcept {
  const auto clamp = [](int64_t v, int64_t hi) noexcept { return v < 0 ? 0 : (v < hi ? v : hi); };
  const int64_t pos = r % queries + p.offset;
  const int64_t end = p.causal ? clamp(pos + 1, n) : n;
  const int64_t begin = p.window > 0 ? clamp(pos - p.window + 1, end) : 0;
  return {begin, end};
}

// The score a softmax exponentiates: x * scale, capped (kCap: p.softcap > 0) as llama.cpp builds it
// (ggml_scale by 1 / softcap, ggml_tanh, ggml_scale by softcap). A template, so that the uncapped
// loops are the expressions they always were (the compiler fuses x * scale - max into one FMA there).
template <bool kCap>
inline float softmax_score(const SoftmaxParams& p, float x) noexcept {
  if constexpr (kCap)
    return p.softcap * std::tanh(x * p.scale * (1.0f / p.softcap));
  else
    return x * p.scale;
}

// b's byte strides laid over `shape` (right-aligned); dims that b lacks or holds as 1 repeat (stride 0).
inline Strides broadcast_strides(const Shape& shape, const Tensor& b) noexcept {
  Strides out{};
  const int shift = shape.rank() - b.rank();
  for (int i = 0; i < b.rank(); ++i) out[static_cast<size_t>(i + shift)] = b.dim(i) == 1 ? 0 : b.stride(i);
  return out;
}

inline float load(GgmlType t, const std::byte* p) noexcept {
  switch (t) {
    case GgmlType::F32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case GgmlType::F16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return fp16_to_fp32(h);
    }
    case GgmlType::BF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return bf16_to_fp32(h);
    }
    default: return 0.0f;
  }
}

inline void store(GgmlType t, std::byte* p, float v) noexcept {
  switch (t) {
    case GgmlType::F32: std::memcpy(p, &v, 4); break;
    case GgmlType::F16: {
      const uint16_t h = fp32_to_fp16(v);
      std::memcpy(p, &h, 2);
      break;
    }
    case GgmlType::BF16: {
      const uint16_t h = fp32_to_bf16(v);
      std::memcpy(p, &h, 2);
      break;
    }
    default: break;
  }
}

inline float* f32(std::byte* p) noexcept { return reinterpret_cast<float*>(p); }
inline const float* f32(const std::byte* p) noexcept { return reinterpret_cast<const float*>(p); }

// out[t, :] = sum_j p[t, j] values[j, :] for values of a quantized type (a transposed view of packed
// rows does not exist): each cell's blocks dequantized once, then added into every query's row.
inline void probabilities_times_packed(const Tensor& p, const Tensor& values, const Tensor& out) noexcept {
  const TypeTraits& type = type_traits(values.type());
  const int64_t n = p.dim(0), cells = p.dim(1), blocks = values.dim(1) / type.block_elements;
  const int64_t be = type.block_elements, os = inner_stride(out) / 4;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t d = 0; d < values.dim(1); ++d) reinterpret_cast<float*>(out.raw_mut() + t * out.stride(0))[d * os] = 0;
  float block[256];  // the largest block of any type (the K formats'); no allocation in a step
  for (int64_t j = 0; j < cells; ++j)
    for (int64_t b = 0; b < blocks; ++b) {
      dequantize_row(values.type(), values.raw() + j * values.stride(0) + b * type.block_bytes, block, be);
      for (int64_t t = 0; t < n; ++t) {
        const float pj = reinterpret_cast<const float*>(p.raw() + t * p.stride(0))[j * (inner_stride(p) / 4)];
        float* o = reinterpret_cast<float*>(out.raw_mut() + t * out.stride(0)) + b * be * os;
        for (int64_t i = 0; i < be; ++i) o[i * os] += pj * block[i];
      }
    }
}

// ops::attention's heads one at a time on a table's own kernels: the scores q_h K_gᵀ as a matmul (a
// quantized K read as a packed weight), the softmax in place, then the probabilities times V_g as a
// matmul of the transposed values (a quantized V: probabilities_times_packed). The reference table's
// attention, and the x86 tables' for the calls their fused kernel does not take.
//
// The queries go kQueryBlock at a time, each block over only the cells its rows can see (from its
// first row's first visible cell to its last row's last): a causal prefill chunk without them would
// compute, exponentiate to zero and multiply by V a score for every cell past each query, about half
// the products. A masked cell took probability 0 and added nothing, so the sums are the ones the
// whole rows gave (bit for bit on the reference's products).
inline constexpr int64_t kQueryBlock = 32;
using MatmulFn = void (*)(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t) noexcept;
using SoftmaxFn = void (*)(const Tensor&, const SoftmaxParams&, const Tensor&) noexcept;
inline void attention_heads_by_parts(MatmulFn matmul, SoftmaxFn softmax, const Tensor& q, const Tensor& keys,
                                     const Tensor& values, const AttentionHeads& a, const Tensor& scores,
                                     const Tensor& out) noexcept {
  const int64_t hd = a.head_dim, n = q.dim(0), cells = keys.dim(0);
  for (int64_t t0 = 0; t0 < n; t0 += kQueryBlock) {
    const int64_t rows = std::min(kQueryBlock, n - t0);
    const int64_t c0 = softmax_visible(a.softmax, t0, n, cells).begin;
    const int64_t c1 = softmax_visible(a.softmax, t0 + rows - 1, n, cells).end;
    SoftmaxParams p = a.softmax;
    p.offset += t0 - c0;  // the block's row 0 against its column 0, cell c0
    const Tensor block_q = q.narrow(0, t0, rows), block_out = out.narrow(0, t0, rows);
    for (int64_t h = a.h0; h < a.h1; ++h) {
      const int64_t g = h / a.group;
      const Tensor head_out = block_out.narrow(1, h * hd, hd);
      if (c1 <= c0) {  // no cell visible to any row (only a query before the cache could be)
        for (int64_t t = 0; t < rows; ++t)
          for (int64_t d = 0; d < hd; ++d)
            f32(head_out.raw_mut() + t * head_out.stride(0))[d * (inner_stride(head_out) / 4)] = 0.0f;
        continue;
      }
      const Tensor s = scores.select(0, h - a.h0).narrow(0, t0, rows).narrow(1, 0, c1 - c0);
      const Tensor k = keys.narrow(0, c0, c1 - c0).narrow(1, g * hd, hd);
      const Tensor v = values.narrow(0, c0, c1 - c0).narrow(1, g * hd, hd);
      matmul(block_q.narrow(1, h * hd, hd), k, s, 0, c1 - c0);
      if (a.sinks) p.sink = a.sinks[h];
      softmax(s, p, s);
      if (values.packed())
        probabilities_times_packed(s, v, head_out);
      else
        matmul(s, v.transpose(0, 1), head_out, 0, hd);
    }
  }
}

}  // namespace skainet::kernels::ref::detail
