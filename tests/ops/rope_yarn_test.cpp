// YaRN RoPE (ops::rope with ext_factor > 0) against a line-by-line transcription of ggml-cpu's float
// code (ggml_rope_yarn_corr_dims, ggml_rope_cache_init, rope_yarn, rope_yarn_ramp), written here
// independently of kernels::RopeAngles: theta advanced by powf(base, -2/dims) pair by pair, the ramp
// and the magnitude in float.
#include <algorithm>
#include <cmath>
#include <numbers>

#include <gtest/gtest.h>

#include "ops_test_util.hpp"

using namespace skainet;
using namespace skainet::test;
using memory::ExecutionContext;

namespace {

// cos and sin of every pair of the token at `pos`, as ggml_rope_cache_init fills its cache.
void ggml_cache(const ops::RopeParams& p, int64_t n_dims, int64_t pos, const float* ff, std::vector<float>& cache) {
  const auto corr_dim = [&](float n_rot) {
    return static_cast<float>(n_dims) *
           std::log(static_cast<float>(p.orig_ctx) / (n_rot * 2 * static_cast<float>(std::numbers::pi))) /
           (2 * std::log(p.base));
  };
  const float low = std::max(0.0f, std::floor(corr_dim(p.beta_fast)));
  const float high = std::min(static_cast<float>(n_dims - 1), std::ceil(corr_dim(p.beta_slow)));
  const float theta_scale = std::pow(p.base, -2.0f / static_cast<float>(n_dims));
  cache.assign(static_cast<size_t>(n_dims), 0.0f);
  float theta = static_cast<float>(pos);
  for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
    const float theta_extrap = theta / (ff ? ff[i0 / 2] : 1.0f);
    const float theta_interp = p.freq_scale * theta_extrap;
    float t = theta_interp, mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
      const float y = (static_cast<float>(i0 / 2) - low) / std::max(0.001f, high - low);
      const float ramp_mix = (1 - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
      t = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix;
      mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    }
    cache[static_cast<size_t>(i0)] = std::cos(t) * mscale;
    cache[static_cast<size_t>(i0 + 1)] = std::sin(t) * mscale;
    theta *= theta_scale;
  }
}

}  // namespace

// NeoX and adjacent pairs, all or some of the dims rotated, with and without frequency factors, at
// positions past the original context; the ramp runs over some of the pairs (orig_ctx 4096, base 1e4:
// pairs 5 to 12 of 16 at 32 dims).
TEST(Norm, RopeYarnMatchesGgml) {
  ExecutionContext ctx;
  size_t ramped = 0;
  for (bool neox : {false, true})
    for (int64_t dims : {0, 32, 20})
      for (bool factors : {false, true}) {
        const Tensor x = random_view(Shape{5, 3, 36}, Layout::Transposed, 17);
        const int64_t nd = dims ? dims : 36, half = nd / 2;
        const Tensor ff = random_view(Shape{half}, Layout::Contiguous, 18, 1.0f, 8.0f);
        const ops::RopeParams p{.base = 10000.0f,
                                .dims = dims,
                                .neox = neox,
                                .freq_scale = 1.0f / 16.0f,
                                .ext_factor = 1.0f,
                                .attn_factor = 0.9f,
                                .orig_ctx = 4096};
        constexpr int64_t kPos0 = 30;
        const Tensor y = factors ? ops::rope(ctx, x, kPos0, p, ff) : ops::rope(ctx, x, kPos0, p);
        const Tensor plain =
            ops::rope(ctx, x, kPos0, {.base = 10000.0f, .dims = dims, .neox = neox, .freq_scale = 1.0f / 16.0f});
        std::vector<float> f(static_cast<size_t>(half));
        for (int64_t i = 0; i < half; ++i) f[static_cast<size_t>(i)] = static_cast<float>(get(ff, {i}));
        std::vector<float> cache;
        double worst = 0;
        for (int64_t t = 0; t < x.dim(0); ++t) {
          ggml_cache(p, nd, kPos0 + t, factors ? f.data() : nullptr, cache);
          for (int64_t h = 0; h < x.dim(1); ++h)
            for (int64_t pair = 0; pair < half; ++pair) {
              const int64_t a = neox ? pair : 2 * pair, b = neox ? pair + half : 2 * pair + 1;
              const float c = cache[static_cast<size_t>(2 * pair)], s = cache[static_cast<size_t>(2 * pair + 1)];
              const float x0 = static_cast<float>(get(x, {t, h, a})), x1 = static_cast<float>(get(x, {t, h, b}));
              const float r0 = x0 * c - x1 * s, r1 = x0 * s + x1 * c;
              // Relative to the pair's magnitude. ggml's float angles (up to 34 rad here, advanced pair
              // by pair) carry up to about an ulp of 34, 3.8e-6 absolute: measured 1.25e-6 at worst.
              const double scale = std::hypot(x0, x1) * 0.9 * (1 + 0.1 * std::log(16.0));
              worst = std::max(
                  {worst, std::fabs(get(y, {t, h, a}) - r0) / scale, std::fabs(get(y, {t, h, b}) - r1) / scale});
              if (get(y, {t, h, a}) != get(plain, {t, h, a})) ++ramped;
            }
          for (int64_t h = 0; h < x.dim(1); ++h)
            for (int64_t d = nd; d < 36; ++d) ASSERT_EQ(get(y, {t, h, d}), get(x, {t, h, d}));
        }
        EXPECT_LT(worst, 2e-6) << "neox " << neox << " dims " << nd << " factors " << factors;
      }
  EXPECT_GT(ramped, 0u);
}

// By hand: ext_factor 0 is linear scaling times attn_factor; YaRN with factor 1 changes nothing but
// the magnitude.
TEST(Norm, RopeYarnLimits) {
  ExecutionContext ctx;
  const Tensor x = random_view(Shape{4, 2, 16}, Layout::Contiguous, 21);
  const ops::RopeParams linear{.base = 500.0f, .freq_scale = 0.25f};
  const Tensor y = ops::rope(ctx, x, 3, {.base = 500.0f, .freq_scale = 0.25f, .attn_factor = 2.0f});
  const Tensor ref = ops::rope(ctx, x, 3, linear);
  for_each_index(x.shape(), [&](const Index& i) { ASSERT_NEAR(get(y, i), 2.0 * get(ref, i), 1e-6); });
  const Tensor unit = ops::rope(ctx, x, 3, {.base = 500.0f, .ext_factor = 1.0f, .orig_ctx = 64});
  EXPECT_LT(max_abs_diff(unit, ops::rope(ctx, x, 3, {.base = 500.0f})), 1e-6);
}
