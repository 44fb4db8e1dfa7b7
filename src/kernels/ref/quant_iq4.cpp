// IQ4_NL (blocks of 32) and IQ4_XS (super-blocks of 256 with 6-bit sub-block scales): 4-bit indices
// into the non-uniform levels kIq4nlValues. The quantizer follows ggml's quantize_row_iq4_nl_impl
// without an importance matrix and with ntry = 7, as ggml's quantize_iq4_nl / quantize_iq4_xs run it
// (what llama-quantize writes; ggml's quantize_row_iq4_nl_ref tries no scales at all), operation
// for operation, as quant_k.cpp does.
#include <cmath>

#include "kernels/ref/ref_internal.hpp"

namespace skainet::kernels::ref::detail {
namespace {

constexpr int kSub = 32;   // elements per scale
constexpr int kTries = 7;  // scales tried either side of the first guess

// The level nearest to v (ties to the lower), by bisection as ggml's best_index_int8.
int nearest_level(float v) noexcept {
  const int8_t* val = kIq4nlValues;
  if (v <= val[0]) return 0;
  if (v >= val[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < val[mid])
      hi = mid;
    else
      lo = mid;
  }
  return v - static_cast<float>(val[hi - 1]) < static_cast<float>(val[hi]) - v ? hi - 1 : hi;
}

// The best scale for one sub-block of 32 (weights x^2); 0 if all ~0. The caller picks the indices
// against the scale it stores.
float fit_sub_block(const float* x) noexcept {
  float weight[kSub];
  float amax = 0, max = 0;
  for (int j = 0; j < kSub; ++j) {
    weight[j] = x[j] * x[j];
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0.0f;
  const auto v0 = static_cast<float>(kIq4nlValues[0]);
  float d = -max / v0;
  float id = 1 / d;
  float sumqx = 0, sumq2 = 0;
  for (int j = 0; j < kSub; ++j) {
    const auto q = static_cast<float>(kIq4nlValues[nearest_level(id * x[j])]);
    sumqx += weight[j] * q * x[j];
    sumq2 += weight[j] * q * q;
  }
  d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
  float best = d * sumqx;
  for (int t = -kTries; t <= kTries; ++t) {
    id = static_cast<float>(t + kIq4nlValues[0]) / max;
    sumqx = sumq2 = 0;
    for (int j = 0; j < kSub; ++j) {
      const auto q = static_cast<float>(kIq4nlValues[nearest_level(id * x[j])]);
      sumqx += weight[j] * q * x[j];
      sumq2 += weight[j] * q * q;
    }
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// Element 32*i + j in the low nibble of qs[16*i + j], 32*i + 16 + j in its high nibble.
void pack_nibbles(const uint8_t* L, int n, uint8_t* qs) noexcept {
  for (int i = 0; i < n / kSub; ++i)
    for (int j = 0; j < kSub / 2; ++j)
      qs[16 * i + j] = static_cast<uint8_t>(L[kSub * i + j] | (L[kSub * i + 16 + j] << 4));
}

void unpack_levels(float d, const uint8_t* qs, float* y) noexcept {
  for (int j = 0; j < kSub / 2; ++j) {
    y[j] = d * static_cast<float>(kIq4nlValues[qs[j] & 0xf]);
    y[j + kSub / 2] = d * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
  }
}

void quantize_iq4_nl(const float* x, void* dst, int64_t n) noexcept {
  uint8_t L[kSub];
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    BlockIQ4_NL b{};
    const float d = fit_sub_block(x);
    b.d = fp32_to_fp16(d);
    const float id = d != 0.0f ? 1 / d : 0.0f;
    for (int j = 0; j < kQK; ++j) L[j] = static_cast<uint8_t>(nearest_level(id * x[j]));
    pack_nibbles(L, kQK, b.qs);
    store_block(dst, i, b);
  }
}

void quantize_iq4_xs(const float* x, void* dst, int64_t n) noexcept {
  constexpr int kSubs = kQK_K / kSub;
  uint8_t L[kQK_K];
  float scales[kSubs];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    BlockIQ4_XS b{};
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < kSubs; ++ib) {
      scales[ib] = fit_sub_block(x + kSub * ib);
      const float a = std::fabs(scales[ib]);
      if (a > amax_scale) {
        amax_scale = a;
        max_scale = scales[ib];
      }
    }
    const float d = -max_scale / 32;
    b.d = fp32_to_fp16(d);
    const float id = d != 0.0f ? 1 / d : 0.0f;
    for (int ib = 0; ib < kSubs; ++ib) {
      const int l = clamp(nearest_int(id * scales[ib]), -32, 31);
      // The unrounded d, as ggml: the stored one is binary16.
      const float dl = d * static_cast<float>(l);
      const float idl = dl != 0.0f ? 1 / dl : 0.0f;
      for (int j = 0; j < kSub; ++j) L[kSub * ib + j] = static_cast<uint8_t>(nearest_level(idl * x[kSub * ib + j]));
      const int code = l + 32;
      b.scales_l[ib / 2] = static_cast<uint8_t>(b.scales_l[ib / 2] | ((code & 0xf) << (4 * (ib % 2))));
      b.scales_h = static_cast<uint16_t>(b.scales_h | ((code >> 4) << (2 * ib)));
    }
    pack_nibbles(L, kQK_K, b.qs);
    store_block(dst, i, b);
  }
}

void dequantize_iq4_nl(const void* src, float* y, int64_t n) noexcept {
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const auto b = load_block<BlockIQ4_NL>(src, i);
    unpack_levels(fp16_to_fp32(b.d), b.qs, y);
  }
}

void dequantize_iq4_xs(const void* src, float* y, int64_t n) noexcept {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto b = load_block<BlockIQ4_XS>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int ib = 0; ib < kQK_K / kSub; ++ib, y += kSub) {
      const int ls = ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((b.scales_h >> (2 * ib)) & 3) << 4);
      unpack_levels(d * static_cast<float>(ls - 32), b.qs + 16 * ib, y);
    }
  }
}

}  // namespace

std::span<const RefFormat> iq4_formats() noexcept {
  static constexpr RefFormat kRows[] = {
      {.type = GgmlType::IQ4_NL, .quantize = &quantize_iq4_nl, .dequantize = &dequantize_iq4_nl},
      {.type = GgmlType::IQ4_XS, .quantize = &quantize_iq4_xs, .dequantize = &dequantize_iq4_xs},
  };
  return kRows;
}

}  // namespace skainet::kernels::ref::detail
