// Elementwise rows on 512-bit (AVX-512 unit) or 256-bit (AVX2 unit) vectors: SwiGLU, RMS norm, and
// the F32 -> F16 conversion of a KV cache write. On the reference kernels they were a fifth of a
// small model's prefill (perf, stories260K pp128), all of it on the dispatching thread. Included by
// the ISA units after softmax.hpp (SoftmaxVec, the vector exp); internal linkage like it.
#pragma once

#include <cmath>
#include <cstdint>

namespace skainet::kernels::x86 {
namespace {

// out = silu(g) * u with silu(g) = g e / (1 + e), e = e^-g, for g < 0 and g / (1 + e^-g) otherwise:
// the vector exp only ever sees -|g| <= 0, where it is within ~2e-7 relative of libm's. Below
// g = -87 the exp is clamped (docs in softmax.hpp): silu is then ~1e-36 where the reference has a
// smaller number or 0. out may be gate or up.
void swiglu_row(const float* gate, const float* up, float* out, int64_t n) noexcept {
  using V = SoftmaxVec;
  const V::F one = V::set1(1.0f), zero = V::set1(0.0f);
  for (int64_t j = 0; j < n; j += V::kLanes) {
    const V::M m = V::mask(n - j);
    const V::F g = V::load(gate + j, m);
    const V::F e = V::exp(V::sub(zero, V::abs(g)));
    const V::F silu = V::div(V::mul(g, V::select_lt(g, zero, e, one)), V::add(one, e));
    V::store(out + j, V::mul(silu, V::load(up + j, m)), m);
  }
}

#if SKAINET_X86_VNNI
// The sum of x[j]^2 in double: each square is exact in double, as in the reference; only the order
// of the additions differs.
double sum_squares(const float* x, int64_t n) noexcept {
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (int64_t j = 0; j < n; j += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(SoftmaxVec::mask(n - j), x + j);
    const __m512d a = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    const __m512d b = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    lo = _mm512_fmadd_pd(a, a, lo);
    hi = _mm512_fmadd_pd(b, b, hi);
  }
  alignas(64) double t[8];
  _mm512_store_pd(t, _mm512_add_pd(lo, hi));
  return ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
}

// F16C's conversion (round to nearest even, NaN kept quiet with its top payload bits): bit for bit
// the reference's fp32_to_fp16.
void f32_to_f16_row(const float* x, uint16_t* out, int64_t n) noexcept {
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = SoftmaxVec::mask(n - j);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(out + j, m, h);
  }
}
#else
double sum_squares(const float* x, int64_t n) noexcept {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256d a = _mm256_cvtps_pd(_mm_loadu_ps(x + j)), b = _mm256_cvtps_pd(_mm_loadu_ps(x + j + 4));
    lo = _mm256_fmadd_pd(a, a, lo);
    hi = _mm256_fmadd_pd(b, b, hi);
  }
  alignas(32) double t[4];
  _mm256_store_pd(t, _mm256_add_pd(lo, hi));
  double s = (t[0] + t[1]) + (t[2] + t[3]);
  for (; j < n; ++j) s += static_cast<double>(x[j]) * x[j];
  return s;
}

void f32_to_f16_row(const float* x, uint16_t* out, int64_t n) noexcept {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + j), _MM_FROUND_TO_NEAREST_INT));
  for (; j < n; ++j) out[j] = _cvtss_sh(x[j], _MM_FROUND_TO_NEAREST_INT);
}
#endif

// out = x * inv * w (w null: x * inv), inv = 1 / sqrt(sum(x^2) / n + eps) computed as the reference
// does (double, then float), and each product in the reference's order. out may be x.
void rms_norm_row(const float* x, const float* w, float eps, float* out, int64_t n) noexcept {
  using V = SoftmaxVec;
  if (n == 0) return;
  const V::F inv = V::set1(static_cast<float>(1.0 / std::sqrt(sum_squares(x, n) / static_cast<double>(n) + eps)));
  for (int64_t j = 0; j < n; j += V::kLanes) {
    const V::M m = V::mask(n - j);
    const V::F y = V::mul(V::load(x + j, m), inv);
    V::store(out + j, w ? V::mul(y, V::load(w + j, m)) : y, m);
  }
}

}  // namespace
}  // namespace skainet::kernels::x86
