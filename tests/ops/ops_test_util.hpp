// Test helpers for ops: random inputs laid out as awkward views, and element reads in double.
#pragma once

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "skainet/compute/kernels.hpp"
#include "skainet/compute/ops.hpp"

namespace skainet::test {

enum class Layout { Contiguous, Offset, Transposed };

using Index = std::array<int64_t, kMaxRank>;

template <class F>
void for_each_index(const Shape& s, F f) {
  const int64_t n = s.numel();
  for (int64_t lin = 0; lin < n; ++lin) {
    Index idx{};
    int64_t r = lin;
    for (int i = s.rank() - 1; i >= 0; --i) {
      idx[static_cast<size_t>(i)] = r % s[i];
      r /= s[i];
    }
    f(idx);
  }
}

inline const std::byte* element(const Tensor& t, const Index& idx) {
  const std::byte* p = t.bytes();
  for (int i = 0; i < t.rank(); ++i) p += idx[static_cast<size_t>(i)] * t.stride(i);
  return p;
}

inline double get(const Tensor& t, const Index& idx) {
  const std::byte* p = element(t, idx);
  uint16_t h;
  switch (t.type()) {
    case GgmlType::F32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case GgmlType::F16: std::memcpy(&h, p, 2); return kernels::ref::fp16_to_fp32(h);
    case GgmlType::BF16: std::memcpy(&h, p, 2); return kernels::ref::bf16_to_fp32(h);
    default: return NAN;
  }
}

inline void set(const Tensor& t, const Index& idx, float v) {
  std::memcpy(const_cast<std::byte*>(element(t, idx)), &v, 4);
}

// F32 values in [lo, hi) in an ambient storage, viewed as `layout`: Offset narrows a padded buffer
// (non-zero offset, row pitch larger than the row); Transposed also swaps the two innermost dims of
// the buffer so that the innermost stride is not the element size.
inline Tensor random_view(const Shape& shape, Layout layout, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  const int r = shape.rank();
  std::array<int64_t, kMaxRank> dims{};
  for (int i = 0; i < r; ++i) dims[static_cast<size_t>(i)] = shape[i];
  if (layout == Layout::Transposed && r >= 2)
    std::swap(dims[static_cast<size_t>(r - 1)], dims[static_cast<size_t>(r - 2)]);
  std::array<int64_t, kMaxRank> padded = dims;
  if (layout != Layout::Contiguous)
    for (int i = 0; i < r; ++i) padded[static_cast<size_t>(i)] += i + 1;
  const Shape ps = Shape::of(std::span<const int64_t>(padded.data(), static_cast<size_t>(r)));
  Tensor buf = memory::ambient().allocate(ps, GgmlType::F32, "test input");
  float* p = buf.mutable_data<float>();
  for (int64_t i = 0; i < ps.numel(); ++i) p[i] = dist(rng);
  Tensor v = buf;
  if (layout != Layout::Contiguous)
    for (int i = 0; i < r; ++i) v = v.narrow(i, 1, dims[static_cast<size_t>(i)]);
  if (layout == Layout::Transposed && r >= 2) v = v.transpose(r - 2, r - 1);
  return v;
}

// Max |a - b| over all elements of two same-shape tensors (any dense float type).
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  double m = 0;
  for_each_index(a.shape(), [&](const Index& i) { m = std::fmax(m, std::fabs(get(a, i) - get(b, i))); });
  return m;
}

inline std::vector<float> to_vector(const Tensor& t) {
  std::vector<float> out;
  for_each_index(t.shape(), [&](const Index& i) { out.push_back(static_cast<float>(get(t, i))); });
  return out;
}

// A packed weight [rows, k] of `type` quantized from random floats.
inline Tensor random_packed(memory::ExecutionContext& ctx, GgmlType type, int64_t rows, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(rows * k));
  for (auto& x : v) x = dist(rng);
  return ctx.from_floats(v, Shape{rows, k}, type);
}

// Row `r` of a 2-D weight of any type, decoded to floats.
inline std::vector<float> decode_row(const Tensor& w, int64_t r) {
  const int64_t k = w.dim(-1);
  std::vector<float> out(static_cast<size_t>(k));
  if (w.packed()) {
    kernels::ref::dequantize_row(w.type(), w.bytes() + r * w.stride(0), out.data(), k);
  } else {
    for (int64_t j = 0; j < k; ++j) out[static_cast<size_t>(j)] = static_cast<float>(get(w, {r, j}));
  }
  return out;
}

}  // namespace skainet::test
