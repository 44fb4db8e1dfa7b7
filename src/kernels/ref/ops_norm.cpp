#include <cmath>
#include <limits>

#include "kernels/ref/ops_common.hpp"

namespace skainet::kernels::ref {

using namespace detail;

void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) noexcept {
  const int64_t rows = row_count(x.shape());
  const int64_t n = x.shape().back();
  const int64_t sx = inner_stride(x) / 4, so = inner_stride(out) / 4;
  const bool has_w = weight.defined();
  const float* pw = has_w ? f32(weight.raw()) : nullptr;
  const int64_t sw = has_w ? inner_stride(weight) / 4 : 0;
  RowCursor cx(x.shape(), x.strides()), co(out.shape(), out.strides());
  for (int64_t r = 0; r < rows; ++r, cx.next(), co.next()) {
    const float* px = f32(x.raw() + cx.offset());
    float* po = f32(out.raw_mut() + co.offset());
    double ss = 0.0;
    for (int64_t j = 0; j < n; ++j) ss += static_cast<double>(px[j * sx]) * px[j * sx];
    const float inv = n ? static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps)) : 0.0f;
    for (int64_t j = 0; j < n; ++j) po[j * so] = px[j * sx] * inv * (has_w ? pw[j * sw] : 1.0f);
  }
}

void rope(const Tensor& x, int64_t pos0, const RopeParams& p, const Tensor& freq_factors, const Tensor& out) noexcept {
  const int64_t rows = row_count(x.shape());
  const int64_t n = x.shape().back();
  const int64_t dims = p.dims > 0 ? p.dims : n;
  const int64_t sx = inner_stride(x) / 4, so = inner_stride(out) / 4;
  // Rows per token: the product of the dims between the token dim (0) and the innermost.
  int64_t per_token = 1;
  for (int i = 1; i + 1 < x.rank(); ++i) per_token *= x.dim(i);
  // The angles depend on the token, not the head: computed once per token (every head of a token
  // reuses them; the same double arithmetic, so the same bits) when they fit the stack cache.
  constexpr int64_t kCachedPairs = 512;
  const int64_t half = dims / 2;
  float cs[kCachedPairs], sn[kCachedPairs];
  const bool use_cache = half <= kCachedPairs;
  int64_t cached = -1;
  const float* ff = freq_factors.defined() ? f32(freq_factors.raw()) : nullptr;
  const int64_t sf = ff ? inner_stride(freq_factors) / 4 : 0;
  const RopeAngles angles(p, dims);
  const double mscale = angles.mscale();
  double freq[kCachedPairs];  // pair i's frequency, the same for every token
  if (use_cache)
    for (int64_t i = 0; i < half; ++i) freq[i] = angles.frequency(i);
  const auto angle = [&](int64_t token, int64_t i, float& c, float& s) noexcept {
    double theta = static_cast<double>(pos0 + token) * (use_cache ? freq[i] : angles.frequency(i));
    // ggml_rope_cache_init divides pair i's frequency by its factor (NeoX pairs too: factor i for
    // the pair (i, i + dims/2)).
    if (ff) theta /= static_cast<double>(ff[i * sf]);
    c = static_cast<float>(std::cos(theta) * mscale);
    s = static_cast<float>(std::sin(theta) * mscale);
  };
  RowCursor cx(x.shape(), x.strides()), co(out.shape(), out.strides());
  for (int64_t r = 0; r < rows; ++r, cx.next(), co.next()) {
    const float* px = f32(x.raw() + cx.offset());
    float* po = f32(out.raw_mut() + co.offset());
    const int64_t token = x.rank() >= 2 ? r / per_token : 0;
    if (use_cache && token != cached) {
      for (int64_t i = 0; i < half; ++i) angle(token, i, cs[i], sn[i]);
      cached = token;
    }
    for (int64_t i = 0; i < half; ++i) {
      float c, s;
      if (use_cache) {
        c = cs[i];
        s = sn[i];
      } else {
        angle(token, i, c, s);
      }
      const int64_t a = p.neox ? i : 2 * i, b = p.neox ? i + half : 2 * i + 1;
      const float x0 = px[a * sx], x1 = px[b * sx];
      po[a * so] = x0 * c - x1 * s;
      po[b * so] = x0 * s + x1 * c;
    }
    for (int64_t j = dims; j < n; ++j) po[j * so] = px[j * sx];
  }
}

namespace {

template <bool kCap>
void softmax_rows(const Tensor& x, const SoftmaxParams& p, const Tensor& out) noexcept {
  const int64_t rows = row_count(x.shape());
  const int64_t n = x.shape().back();
  const int64_t sx = inner_stride(x) / 4, so = inner_stride(out) / 4;
  const int64_t queries = x.rank() >= 2 ? x.dim(x.rank() - 2) : 1;
  RowCursor cx(x.shape(), x.strides()), co(out.shape(), out.strides());
  for (int64_t r = 0; r < rows; ++r, cx.next(), co.next()) {
    const float* px = f32(x.raw() + cx.offset());
    float* po = f32(out.raw_mut() + co.offset());
    const auto [begin, end] = softmax_visible(p, r, queries, n);
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = begin; j < end; ++j) mx = std::fmax(mx, softmax_score<kCap>(p, px[j * sx]));
    mx = std::fmax(mx, p.sink);  // (fmax ignores no sink's -inf)
    double sum = 0.0;
    for (int64_t j = begin; j < end; ++j) {
      const float e = std::exp(softmax_score<kCap>(p, px[j * sx]) - mx);
      po[j * so] = e;
      sum += e;
    }
    if (std::isfinite(p.sink)) sum += std::exp(p.sink - mx);
    const float inv = sum > 0.0 ? static_cast<float>(1.0 / sum) : 0.0f;
    for (int64_t j = begin; j < end; ++j) po[j * so] *= inv;
    // Out of place or in place alike: the hidden columns are written after the visible ones are read.
    for (int64_t j = 0; j < begin; ++j) po[j * so] = 0.0f;
    for (int64_t j = end; j < n; ++j) po[j * so] = 0.0f;
  }
}

}  // namespace

void softmax(const Tensor& x, const SoftmaxParams& p, const Tensor& out) noexcept {
  if (p.softcap > 0)
    softmax_rows<true>(x, p, out);
  else
    softmax_rows<false>(x, p, out);
}

}  // namespace skainet::kernels::ref
