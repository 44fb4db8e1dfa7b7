#include <algorithm>
#include <cmath>

#include "kernels/ref/ops_common.hpp"
#include "skainet/compute/op_constants.hpp"

namespace skainet::kernels::ref {
namespace {

using namespace detail;

// Applies f(a_j, b_j) over every row; b is broadcast over a's shape. All F32.
template <class F>
void binary(const Tensor& a, const Tensor& b, const Tensor& out, F f) noexcept {
  const Strides bs = broadcast_strides(a.shape(), b);
  const int64_t rows = row_count(a.shape());
  const int64_t n = a.shape().back();
  const int64_t sa = inner_stride(a) / 4, so = inner_stride(out) / 4;
  const int64_t sb = (a.rank() ? bs[static_cast<size_t>(a.rank() - 1)] : 0) / 4;
  RowCursor ca(a.shape(), a.strides()), cb(a.shape(), bs), co(out.shape(), out.strides());
  for (int64_t r = 0; r < rows; ++r, ca.next(), cb.next(), co.next()) {
    const float* pa = f32(a.raw() + ca.offset());
    const float* pb = f32(b.raw() + cb.offset());
    float* po = f32(out.raw_mut() + co.offset());
    if (sa == 1 && sb == 1 && so == 1)  // contiguous rows: the loop the compiler vectorizes
      for (int64_t j = 0; j < n; ++j) po[j] = f(pa[j], pb[j]);
    else
      for (int64_t j = 0; j < n; ++j) po[j * so] = f(pa[j * sa], pb[j * sb]);
  }
}

template <class F>
void unary(const Tensor& x, const Tensor& out, F f) noexcept {
  const int64_t rows = row_count(x.shape());
  const int64_t n = x.shape().back();
  const int64_t sx = inner_stride(x) / 4, so = inner_stride(out) / 4;
  RowCursor cx(x.shape(), x.strides()), co(out.shape(), out.strides());
  for (int64_t r = 0; r < rows; ++r, cx.next(), co.next()) {
    const float* px = f32(x.raw() + cx.offset());
    float* po = f32(out.raw_mut() + co.offset());
    for (int64_t j = 0; j < n; ++j) po[j * so] = f(px[j * sx]);
  }
}

inline float silu_of(float v) noexcept { return v / (1.0f + std::exp(-v)); }

// ggml_gelu_f32, constants and association as ggml writes them. ggml's CPU path looks gelu up in a
// table indexed by the fp16-rounded input (GGML_GELU_FP16); here it is computed in F32 at the input
// itself, so results differ from ggml's by that rounding (|x| < 10; both are exact beyond).
inline float gelu_of(float x) noexcept {
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kGeluCoefA * x * x)));
}

}  // namespace

void add(const Tensor& a, const Tensor& b, const Tensor& out) noexcept {
  binary(a, b, out, [](float x, float y) { return x + y; });
}

void mul(const Tensor& a, const Tensor& b, const Tensor& out) noexcept {
  binary(a, b, out, [](float x, float y) { return x * y; });
}

void swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) noexcept {
  binary(gate, up, out, [](float g, float u) { return silu_of(g) * u; });
}

void geglu(const Tensor& gate, const Tensor& up, const Tensor& out) noexcept {
  binary(gate, up, out, [](float g, float u) { return gelu_of(g) * u; });
}

// ggml_swiglu_oai's expression, operation for operation.
void swiglu_oai(const Tensor& gate, const Tensor& up, const Tensor& out) noexcept {
  binary(gate, up, out, [](float g, float u) {
    const float x = std::min(g, kOaiSwigluLimit);
    const float y = std::clamp(u, -kOaiSwigluLimit, kOaiSwigluLimit);
    const float glu = x / (1.0f + std::exp(kOaiSwigluAlpha * (-x)));
    return glu * (y + 1.0f);
  });
}

// As llama.cpp builds it: ggml_scale by 1 / cap (a multiplication, not a division), ggml_tanh,
// ggml_scale by cap.
void softcap(const Tensor& x, float cap, const Tensor& out) noexcept {
  const float inv = 1.0f / cap;
  unary(x, out, [cap, inv](float v) { return cap * std::tanh(v * inv); });
}

void scale(const Tensor& x, float s, const Tensor& out) noexcept {
  unary(x, out, [s](float v) { return v * s; });
}

void silu(const Tensor& x, const Tensor& out) noexcept { unary(x, out, silu_of); }

}  // namespace skainet::kernels::ref
