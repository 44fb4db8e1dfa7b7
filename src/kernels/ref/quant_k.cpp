// Q4_K, Q5_K, Q6_K: super-blocks of 256 with quantized per-sub-block scales. The quantizers follow
// ggml's quantize_row_q{4,5,6}_K_ref (no importance matrix) operation for operation, including the
// order of float accumulations, because the search they run picks quants by comparing errors:
// any reordering can flip a choice and change the bytes.
#include <cmath>

#include "kernels/ref/ref_internal.hpp"

namespace skainet::kernels::ref::detail {

float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min, float rmin,
                    float rdelta, int nstep, bool use_mad) noexcept {
  uint8_t Laux[32];
  float min = x[0], max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float wi = w[i];
    sum_w += wi;
    sum_x += wi * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *neg_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(clamp(l, 0, nmax));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += w[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += w[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

namespace {

// Fits x ~ scale * (L - nmax) with L in [0, 2*nmax), weights x^2, trying 19 scales around
// nmax / max|x| and keeping the best least-squares one (ggml's make_qx_quants, rmse_type 1).
float fit_symmetric_scale(int n, int nmax, const float* x, int8_t* L) noexcept {
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    const float fl = static_cast<float>(l);
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      const float fl = static_cast<float>(l);
      sumlx += w * x[i] * fl;
      suml2 += w * fl * fl;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// The 8 6-bit scales and 8 6-bit mins of Q4_K/Q5_K in 12 bytes: sub-blocks 0-3 in the low 6 bits
// of bytes 0-3 (scales) and 4-7 (mins); sub-blocks 4-7 as nibbles in bytes 8-11 with their top two
// bits in the spare high bits of bytes 0-7.
inline void scale_min_k4(int j, const uint8_t* q, uint8_t& sc, uint8_t& m) noexcept {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = static_cast<uint8_t>((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
    m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// The scale and min of sub-block j of a Q4_K/Q5_K super-block, applied to its d and dmin.
struct SubScale {
  float d, m;
};
inline SubScale sub_scale_k4(int j, const uint8_t* scales, float d, float dmin) noexcept {
  uint8_t sc, m;
  scale_min_k4(j, scales, sc, m);
  return {d * static_cast<float>(sc), dmin * static_cast<float>(m)};
}

inline void pack_scale_min_k4(int j, uint8_t ls, uint8_t lm, uint8_t* q) noexcept {
  if (j < 4) {
    q[j] = ls;
    q[j + 4] = lm;
  } else {
    q[j + 4] = static_cast<uint8_t>((ls & 0xf) | ((lm & 0xf) << 4));
    q[j - 4] = static_cast<uint8_t>(q[j - 4] | ((ls >> 4) << 6));
    q[j] = static_cast<uint8_t>(q[j] | ((lm >> 4) << 6));
  }
}

// Shared by Q4_K and Q5_K: per-sub-block fits, 6-bit scale/min codes, the super-block d and dmin,
// and the final quants L recomputed against the rounded scales.
void quantize_k_scales(const float* x, int nmax, float rmin, float rdelta, int nstep, uint16_t& d_out,
                       uint16_t& dmin_out, uint8_t* packed, uint8_t* L) noexcept {
  float scales[kQK_K / 32], mins[kQK_K / 32], weights[32];
  float max_scale = 0, max_min = 0;  // scales are positive once the minimum is taken out
  for (int j = 0; j < kQK_K / 32; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = fit_scale_min(32, nmax, xs, weights, L + 32 * j, &mins[j], rmin, rdelta, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  for (int i = 0; i < kKScaleBytes; ++i) packed[i] = 0;
  for (int j = 0; j < kQK_K / 32; ++j) {
    // ggml stores the int in a uint8_t before clamping; keep that wrap for bit-identical output.
    auto ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
    auto lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
    if (ls > 63) ls = 63;
    if (lm > 63) lm = 63;
    pack_scale_min_k4(j, ls, lm, packed);
  }
  d_out = fp32_to_fp16(max_scale / 63.0f);
  dmin_out = fp32_to_fp16(max_min / 63.0f);
  const float d_all = fp16_to_fp32(d_out), dmin_all = fp16_to_fp32(dmin_out);
  for (int j = 0; j < kQK_K / 32; ++j) {
    uint8_t sc, m;
    scale_min_k4(j, packed, sc, m);
    const float d = d_all * static_cast<float>(sc);
    if (d == 0.0f) continue;  // keep the fit's quants, as ggml does
    const float dm = dmin_all * static_cast<float>(m);
    for (int ii = 0; ii < 32; ++ii)
      L[32 * j + ii] = static_cast<uint8_t>(clamp(nearest_int((x[32 * j + ii] + dm) / d), 0, nmax));
  }
}

void quantize_q4_k(const float* x, void* dst, int64_t n) noexcept {
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    BlockQ4_K b{};
    quantize_k_scales(x, 15, -1.0f, 0.1f, 20, b.d, b.dmin, b.scales, L);
    for (int j = 0; j < kQK_K / 64; ++j)
      for (int l = 0; l < 32; ++l) b.qs[32 * j + l] = static_cast<uint8_t>(L[64 * j + l] | (L[64 * j + l + 32] << 4));
    store_block(dst, i, b);
  }
}

void quantize_q5_k(const float* x, void* dst, int64_t n) noexcept {
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    BlockQ5_K b{};
    quantize_k_scales(x, 31, -0.5f, 0.1f, 15, b.d, b.dmin, b.scales, L);
    for (int j = 0; j < kQK_K / 64; ++j) {
      const auto m1 = static_cast<uint8_t>(1u << (2 * j)), m2 = static_cast<uint8_t>(2u << (2 * j));
      for (int l = 0; l < 32; ++l) {
        int l1 = L[64 * j + l], l2 = L[64 * j + l + 32];
        if (l1 > 15) {
          l1 -= 16;
          b.qh[l] |= m1;
        }
        if (l2 > 15) {
          l2 -= 16;
          b.qh[l] |= m2;
        }
        b.qs[32 * j + l] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
    }
    store_block(dst, i, b);
  }
}

void quantize_q6_k(const float* x, void* dst, int64_t n) noexcept {
  int8_t L[kQK_K];
  float scales[kQK_K / 16];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    BlockQ6_K b{};
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      scales[ib] = fit_symmetric_scale(16, 32, x + 16 * ib, L + 16 * ib);
      const float abs_scale = std::fabs(scales[ib]);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scales[ib];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {  // all (near) zero: an all-zero block
      store_block(dst, i, b);
      continue;
    }
    const float iscale = -128.0f / max_scale;
    b.d = fp32_to_fp16(1 / iscale);
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      const int l = nearest_int(iscale * scales[ib]);
      b.scales[ib] = static_cast<int8_t>(l < 127 ? l : 127);
    }
    const float d_all = fp16_to_fp32(b.d);
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = d_all * static_cast<float>(b.scales[j]);
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ++ii)
        L[16 * j + ii] = static_cast<int8_t>(clamp(nearest_int(x[16 * j + ii] / d), -32, 31) + 32);
    }
    for (int h = 0; h < kQK_K / 128; ++h) {
      const int8_t* Lh = L + 128 * h;
      uint8_t* ql = b.ql + 64 * h;
      uint8_t* qh = b.qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        const int q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
        ql[l] = static_cast<uint8_t>((q1 & 0xf) | ((q3 & 0xf) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 0xf) | ((q4 & 0xf) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
    store_block(dst, i, b);
  }
}

// Q4_K (Block without qh) and Q5_K: d_j * q - m_j per 32-element sub-block j, q the nibble plus, for
// Q5_K, 16 where the sub-block's bit of qh is set.
template <class Block>
void dequantize_q45_k(const void* src, float* y, int64_t n) noexcept {
  constexpr bool kFifthBit = requires(Block b) { b.qh; };
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto b = load_block<Block>(src, i);
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    for (int j = 0; j < kQK_K / 32; ++j) {
      const auto [dj, mj] = sub_scale_k4(j, b.scales, d, dmin);
      const uint8_t* q = b.qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; ++l) {
        int v = (q[l] >> shift) & 0xf;
        if constexpr (kFifthBit) v += ((b.qh[l] >> j) & 1) ? 16 : 0;
        *y++ = dj * static_cast<float>(v) - mj;
      }
    }
  }
}

void dequantize_q6_k(const void* src, float* y, int64_t n) noexcept {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto b = load_block<BlockQ6_K>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int h = 0; h < kQK_K / 128; ++h, y += 128) {
      const uint8_t* ql = b.ql + 64 * h;
      const uint8_t* qh = b.qh + 32 * h;
      const int8_t* sc = b.scales + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

}  // namespace

std::span<const RefFormat> k_formats() noexcept {
  static constexpr RefFormat kRows[] = {
      {.type = GgmlType::Q4_K,
       .quantize = &quantize_q4_k,
       .dequantize = &dequantize_q45_k<BlockQ4_K>,
       .feed = &kFeedQ4_K},
      {.type = GgmlType::Q5_K, .quantize = &quantize_q5_k, .dequantize = &dequantize_q45_k<BlockQ5_K>},
      {.type = GgmlType::Q6_K, .quantize = &quantize_q6_k, .dequantize = &dequantize_q6_k, .feed = &kFeedQ6_K},
  };
  return kRows;
}

}  // namespace skainet::kernels::ref::detail
