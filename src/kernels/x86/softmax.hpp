// The softmax of one contiguous row on 512-bit (AVX-512 unit) or 256-bit (AVX2 unit) vectors, with a
// vector exp: attention runs one per query and head, and the scalar libm exp made it a third of a
// small model's prefill. Included by the ISA units after simd_int8.hpp; internal linkage like it.
//
// exp(x) for x <= 0: n = round(x / ln 2), r = x - n ln 2 (ln 2 in two parts, so r is exact to a few
// ulp), e^r from the minimax polynomial of Cephes' expf on [-ln 2 / 2, ln 2 / 2] (relative error
// about 2e-7), times 2^n. x is clamped at -87 (e^-87 = 1.6e-38, the smallest normal scale): what the
// reference rounds to a smaller number or 0 comes out as about 1e-38 here, nothing a normalized row
// can tell apart.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace skainet::kernels::x86 {
namespace {

struct ExpPoly {
  static constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  static constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                  4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
  static constexpr float kMin = -87.0f;
};

#if SKAINET_X86_VNNI
struct SoftmaxLanes {
  static constexpr int kLanes = 16;
  using F = __m512;
  using M = __mmask16;
  static M mask(int64_t left) noexcept { return left >= 16 ? M(0xffff) : M((1u << left) - 1u); }
  static F load(const float* p, M m) noexcept { return _mm512_maskz_loadu_ps(m, p); }
  static F loadu(const float* p) noexcept { return _mm512_loadu_ps(p); }
  static void storeu(float* p, F v) noexcept { _mm512_storeu_ps(p, v); }
  static void store(float* p, F v, M m) noexcept { _mm512_mask_storeu_ps(p, m, v); }
  static F set1(float a) noexcept { return _mm512_set1_ps(a); }
  // Masked-off lanes keep `fill` (max: -inf; sum: 0).
  static F blend(M m, F fill, F v) noexcept { return _mm512_mask_blend_ps(m, fill, v); }
  static F max(F a, F b) noexcept { return _mm512_max_ps(a, b); }
  static F add(F a, F b) noexcept { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) noexcept { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) noexcept { return _mm512_mul_ps(a, b); }
  // Through memory, as Vec::sum (simd_tiles.hpp): GCC 12's _mm512_reduce_* warn -Wuninitialized.
  static float hmax(F v) noexcept {
    alignas(64) float t[16];
    _mm512_store_ps(t, v);
    return x86::hmax(_mm256_max_ps(_mm256_load_ps(t), _mm256_load_ps(t + 8)));
  }
  static float hsum(F v) noexcept { return Vec::sum(v); }
  static F round(F v) noexcept { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static F fnmadd(F a, F b, F c) noexcept { return _mm512_fnmadd_ps(a, b, c); }
  static F times_pow2(F y, F n) noexcept { return _mm512_scalef_ps(y, n); }
  static F abs(F v) noexcept { return _mm512_abs_ps(v); }
  // v with the sign of `sign` (v >= 0).
  static F copysign(F v, F sign) noexcept {
    const __m512i bit =
        _mm512_and_si512(_mm512_castps_si512(sign), _mm512_set1_epi32(std::numeric_limits<int32_t>::min()));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), bit));
  }
  static F div(F a, F b) noexcept { return _mm512_div_ps(a, b); }
  static F fmadd(F a, F b, F c) noexcept { return _mm512_fmadd_ps(a, b, c); }
  static F select_lt(F a, F b, F if_lt, F otherwise) noexcept {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), otherwise, if_lt);
  }
};
#else
struct SoftmaxLanes {
  static constexpr int kLanes = 8;
  using F = __m256;
  using M = __m256i;
  static M mask(int64_t left) noexcept {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(left, 8))),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static F load(const float* p, M m) noexcept { return _mm256_maskload_ps(p, m); }
  static F loadu(const float* p) noexcept { return _mm256_loadu_ps(p); }
  static void storeu(float* p, F v) noexcept { _mm256_storeu_ps(p, v); }
  static void store(float* p, F v, M m) noexcept { _mm256_maskstore_ps(p, m, v); }
  static F set1(float a) noexcept { return _mm256_set1_ps(a); }
  static F blend(M m, F fill, F v) noexcept { return _mm256_blendv_ps(fill, v, _mm256_castsi256_ps(m)); }
  static F max(F a, F b) noexcept { return _mm256_max_ps(a, b); }
  static F add(F a, F b) noexcept { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) noexcept { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) noexcept { return _mm256_mul_ps(a, b); }
  static float hmax(F v) noexcept { return x86::hmax(v); }
  static float hsum(F v) noexcept { return x86::hsum(v); }
  static F round(F v) noexcept { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static F fnmadd(F a, F b, F c) noexcept { return _mm256_fnmadd_ps(a, b, c); }
  // 2^n through the exponent field: n >= -126 after exp's clamp.
  static F times_pow2(F y, F n) noexcept {
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
  }
  static F abs(F v) noexcept { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
  static F copysign(F v, F sign) noexcept { return _mm256_or_ps(v, _mm256_and_ps(sign, _mm256_set1_ps(-0.0f))); }
  static F div(F a, F b) noexcept { return _mm256_div_ps(a, b); }
  static F fmadd(F a, F b, F c) noexcept { return _mm256_fmadd_ps(a, b, c); }
  static F select_lt(F a, F b, F if_lt, F otherwise) noexcept {
    return _mm256_blendv_ps(otherwise, if_lt, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
  }
};
#endif

// The level's lanes with the vector exp (above), written once over their operations.
struct SoftmaxVec : SoftmaxLanes {
  static F exp(F x) noexcept {
    x = max(x, set1(ExpPoly::kMin));
    const F n = round(mul(x, set1(ExpPoly::kLog2e)));
    F r = fnmadd(n, set1(ExpPoly::kLn2Hi), x);
    r = fnmadd(n, set1(ExpPoly::kLn2Lo), r);
    F p = set1(ExpPoly::kP[0]);
    for (int i = 1; i < 6; ++i) p = fmadd(p, r, set1(ExpPoly::kP[i]));
    const F y = add(fmadd(mul(p, r), r, r), set1(1.0f));
    return times_pow2(y, n);
  }
};

// tanh as Cephes' tanhf computes it: below |x| = 0.625 its odd polynomial (relative error about
// 2e-7; 1 - t would cancel there), above (1 - t) / (1 + t) with t = e^-2|x| (the vector exp takes
// x <= 0), the sign put back. Within a few ulp of libm's tanhf.
template <class V>
typename V::F vec_tanh(typename V::F x) noexcept {
  const typename V::F a = V::abs(x), one = V::set1(1.0f);
  const typename V::F t = V::exp(V::mul(a, V::set1(-2.0f)));
  const typename V::F big = V::div(V::sub(one, t), V::add(one, t));
  const typename V::F z = V::mul(x, x);
  typename V::F p = V::set1(-5.70498872745e-3f);
  for (float c : {2.06390887954e-2f, -5.37397155531e-2f, 1.33314422036e-1f, -3.33332819422e-1f})
    p = V::fmadd(p, z, V::set1(c));
  const typename V::F small = V::fmadd(V::mul(p, z), x, x);
  return V::select_lt(a, V::set1(0.625f), small, V::copysign(big, x));
}

// The lanes of one vector of a row at x[j]: all of them, loaded and stored plainly, or the first
// `left` of the row's last, partial vector under a mask (AVX2's masked store costs several plain ones
// on AMD; softmax_row_of ran every vector through it).
struct RowLanes {
  using V = SoftmaxVec;
  bool whole;
  V::M m;
  explicit RowLanes(int64_t left) noexcept : whole(left >= V::kLanes), m(V::mask(left)) {}
  V::F load(const float* p) const noexcept { return whole ? V::loadu(p) : V::load(p, m); }
  void store(float* p, V::F v) const noexcept {
    if (whole)
      V::storeu(p, v);
    else
      V::store(p, v, m);
  }
  // v in the lanes the row has, `fill` in the others.
  V::F keep(V::F fill, V::F v) const noexcept { return whole ? v : V::blend(m, fill, v); }
};

// The scores of x[j, j + lanes) in `lanes`: scale x, capped (cap * tanh(s * inv_cap)) when kCap.
template <bool kCap>
typename SoftmaxVec::F softmax_scores(const float* x, const RowLanes& lanes, typename SoftmaxVec::F scale,
                                      typename SoftmaxVec::F cap, typename SoftmaxVec::F inv_cap) noexcept {
  using V = SoftmaxVec;
  const typename V::F s = V::mul(lanes.load(x), scale);
  if constexpr (kCap)
    return V::mul(cap, vec_tanh<V>(V::mul(s, inv_cap)));
  else
    return s;
}

// out[j] = exp(score(x[j]) - max) / sum for j in [begin, end), 0 for the other j < n. out may be x. A
// finite sink joins max and sum (SoftmaxParams::sink).
template <bool kCap>
void softmax_row_of(const float* x, float* out, int64_t begin, int64_t end, int64_t n, float scale, float softcap,
                    float sink) noexcept {
  using V = SoftmaxVec;
  constexpr int L = V::kLanes;
  const typename V::F s = V::set1(scale), cap = V::set1(softcap), inv_cap = V::set1(kCap ? 1.0f / softcap : 0.0f);
  typename V::F mx = V::set1(-std::numeric_limits<float>::infinity());
  for (int64_t j = begin; j < end; j += L) {
    const RowLanes lanes(end - j);
    mx = V::max(mx, lanes.keep(mx, softmax_scores<kCap>(x + j, lanes, s, cap, inv_cap)));
  }
  const float row_max = std::fmax(V::hmax(mx), sink);
  const typename V::F top = V::set1(row_max);
  typename V::F sum = V::set1(0.0f);
  for (int64_t j = begin; j < end; j += L) {
    const RowLanes lanes(end - j);
    const typename V::F e = V::exp(V::sub(softmax_scores<kCap>(x + j, lanes, s, cap, inv_cap), top));
    lanes.store(out + j, e);
    sum = V::add(sum, lanes.keep(V::set1(0.0f), e));
  }
  const float total = V::hsum(sum) + (std::isfinite(sink) ? std::exp(sink - row_max) : 0.0f);
  const typename V::F inv = V::set1(total > 0.0f ? 1.0f / total : 0.0f);
  for (int64_t j = begin; j < end; j += L) {
    const RowLanes lanes(end - j);
    lanes.store(out + j, V::mul(lanes.load(out + j), inv));
  }
  for (int64_t j = 0; j < begin; ++j) out[j] = 0.0f;
  for (int64_t j = end; j < n; ++j) out[j] = 0.0f;
}

// softcap > 0 caps the scores (SoftmaxParams); the uncapped row runs the loop it always did.
void softmax_row(const float* x, float* out, int64_t begin, int64_t end, int64_t n, float scale, float softcap,
                 float sink) noexcept {
  if (softcap > 0)
    softmax_row_of<true>(x, out, begin, end, n, scale, softcap, sink);
  else
    softmax_row_of<false>(x, out, begin, end, n, scale, softcap, sink);
}

}  // namespace
}  // namespace skainet::kernels::x86
