// Q2_K and Q3_K: super-blocks of 256 in 16 sub-blocks of 16, with 4-bit (Q2_K: scale and min) or
// 6-bit signed (Q3_K) sub-block scales. The quantizers follow ggml's quantize_row_q{2,3}_K_ref (what
// llama-quantize writes without an importance matrix) operation for operation, as quant_k.cpp does.
#include <cmath>
#include <cstring>

#include "kernels/ref/ref_internal.hpp"

namespace skainet::kernels::ref::detail {
namespace {

constexpr int kSub = 16;             // elements per sub-block
constexpr int kSubs = kQK_K / kSub;  // sub-blocks per super-block

// Bytes qs[32*h + l] hold the 2-bit values of elements 128*h + 32*s + l at bits 2s (s = 0..3).
void pack_2bit(const uint8_t* L, uint8_t* qs) noexcept {
  for (int j = 0; j < kQK_K; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] =
          static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

inline int unpack_2bit(const uint8_t* qs, int e) noexcept {
  return (qs[e / 128 * 32 + e % 32] >> (2 * (e % 128 / 32))) & 3;
}

// Fits x ~ scale * (L - nmax), L in [0, 2*nmax), weights x^2: rounds at nmax / max|x|, then moves
// single quants while that improves the least-squares fit, up to 5 passes (ggml's make_q3_quants
// with rmse). Returns the scale (negative when the largest |x| is negative).
float fit_q3_scale(const float* x, int nmax, int8_t* L) noexcept {
  const float max = signed_absmax(x, kSub);
  if (std::fabs(max) < kGroupMaxEps) {
    for (int i = 0; i < kSub; ++i) L[i] = 0;
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < kSub; ++i) {
    const int l = clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < kSub; ++i) {
      const float w = x[i] * x[i];
      const auto li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx <= 0) continue;
      float sl2 = suml2 - w * li * li;
      const int new_l = clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (new_l == L[i]) continue;
      const auto fl = static_cast<float>(new_l);
      slx += w * x[i] * fl;
      sl2 += w * fl * fl;
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = static_cast<int8_t>(new_l);
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (!changed) break;
  }
  for (int i = 0; i < kSub; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// The 6-bit code (scale + 32) of Q3_K sub-block j.
inline int q3_scale_code(const uint8_t* scales, int j) noexcept {
  const int low = j < 8 ? scales[j] & 0xf : scales[j - 8] >> 4;
  return low | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

void quantize_q2_k(const float* x, void* dst, int64_t n) noexcept {
  constexpr float kScaleLevels = 15.0f;
  uint8_t L[kQK_K];
  float weights[kSub], scales[kSubs], mins[kSubs];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    BlockQ2_K b{};
    float max_scale = 0, max_min = 0;  // scales are positive once the minimum is taken out
    for (int j = 0; j < kSubs; ++j) {
      for (int l = 0; l < kSub; ++l) weights[l] = std::fabs(x[kSub * j + l]);
      scales[j] = fit_scale_min(kSub, 3, x + kSub * j, weights, L + kSub * j, &mins[j], -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
      const float iscale = kScaleLevels / max_scale;
      for (int j = 0; j < kSubs; ++j) b.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      b.d = fp32_to_fp16(max_scale / kScaleLevels);
    } else {
      b.d = fp32_to_fp16(0.0f);
    }
    if (max_min > 0) {
      const float iscale = kScaleLevels / max_min;
      for (int j = 0; j < kSubs; ++j)
        b.scales[j] = static_cast<uint8_t>(b.scales[j] | (nearest_int(iscale * mins[j]) << 4));
      b.dmin = fp32_to_fp16(max_min / kScaleLevels);
    } else {
      b.dmin = fp32_to_fp16(0.0f);
    }
    const float d_all = fp16_to_fp32(b.d), dmin_all = fp16_to_fp32(b.dmin);
    for (int j = 0; j < kSubs; ++j) {
      const float d = d_all * static_cast<float>(b.scales[j] & 0xf);
      if (d == 0.0f) continue;  // keep the fit's quants, as ggml does
      const float dm = dmin_all * static_cast<float>(b.scales[j] >> 4);
      for (int ii = 0; ii < kSub; ++ii)
        L[kSub * j + ii] = static_cast<uint8_t>(clamp(nearest_int((x[kSub * j + ii] + dm) / d), 0, 3));
    }
    pack_2bit(L, b.qs);
    store_block(dst, i, b);
  }
}

void quantize_q3_k(const float* x, void* dst, int64_t n) noexcept {
  int8_t L[kQK_K];
  float scales[kSubs];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    BlockQ3_K b{};
    float max_scale = 0, amax = 0;
    for (int j = 0; j < kSubs; ++j) {
      scales[j] = fit_q3_scale(x + kSub * j, 4, L + kSub * j);
      const float a = std::fabs(scales[j]);
      if (a > amax) {
        amax = a;
        max_scale = scales[j];
      }
    }
    if (max_scale != 0.0f) {
      const float iscale = -32.0f / max_scale;
      for (int j = 0; j < kSubs; ++j) {
        // ggml holds the rounded value in an int8_t before clamping; keep that for identical bytes.
        const int l = clamp(static_cast<int8_t>(nearest_int(iscale * scales[j])), -32, 31) + 32;
        if (j < 8)
          b.scales[j] = static_cast<uint8_t>(l & 0xf);
        else
          b.scales[j - 8] = static_cast<uint8_t>(b.scales[j - 8] | ((l & 0xf) << 4));
        b.scales[8 + j % 4] = static_cast<uint8_t>(b.scales[8 + j % 4] | ((l >> 4) << (2 * (j / 4))));
      }
      b.d = fp32_to_fp16(1 / iscale);
    } else {
      b.d = fp32_to_fp16(0.0f);
    }
    const float d_all = fp16_to_fp32(b.d);
    for (int j = 0; j < kSubs; ++j) {
      const float d = d_all * static_cast<float>(q3_scale_code(b.scales, j) - 32);
      if (d == 0.0f) continue;
      for (int ii = 0; ii < kSub; ++ii)
        L[kSub * j + ii] = static_cast<int8_t>(clamp(nearest_int(x[kSub * j + ii] / d), -4, 3) + 4);
    }
    uint8_t low[kQK_K];
    for (int e = 0; e < kQK_K; ++e) {
      int q = L[e];
      if (q > 3) {
        b.hmask[e % 32] = static_cast<uint8_t>(b.hmask[e % 32] | (1u << (e / 32)));
        q -= 4;
      }
      low[e] = static_cast<uint8_t>(q);
    }
    pack_2bit(low, b.qs);
    store_block(dst, i, b);
  }
}

void dequantize_q2_k(const void* src, float* y, int64_t n) noexcept {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto b = load_block<BlockQ2_K>(src, i);
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    for (int j = 0; j < kSubs; ++j) {
      const float dl = d * static_cast<float>(b.scales[j] & 0xf);
      const float ml = dmin * static_cast<float>(b.scales[j] >> 4);
      for (int l = 0; l < kSub; ++l) *y++ = dl * static_cast<float>(unpack_2bit(b.qs, kSub * j + l)) - ml;
    }
  }
}

void dequantize_q3_k(const void* src, float* y, int64_t n) noexcept {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto b = load_block<BlockQ3_K>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kSubs; ++j) {
      const float dl = d * static_cast<float>(q3_scale_code(b.scales, j) - 32);
      for (int l = 0; l < kSub; ++l) {
        const int e = kSub * j + l;
        const int high = (b.hmask[e % 32] >> (e / 32)) & 1;
        *y++ = dl * static_cast<float>(unpack_2bit(b.qs, e) - (high ? 0 : 4));
      }
    }
  }
}

}  // namespace

std::span<const RefFormat> k_low_formats() noexcept {
  static constexpr RefFormat kRows[] = {
      {.type = GgmlType::Q2_K, .quantize = &quantize_q2_k, .dequantize = &dequantize_q2_k},
      {.type = GgmlType::Q3_K, .quantize = &quantize_q3_k, .dequantize = &dequantize_q3_k},
  };
  return kRows;
}

}  // namespace skainet::kernels::ref::detail
