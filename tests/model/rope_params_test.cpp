// model::rope_params against llama.cpp's context set-up (llama_context's cparams for YaRN and
// get_rope_freq_base / get_rope_freq_scale per layer).
#include <cmath>

#include <gtest/gtest.h>

#include "skainet/model/model.hpp"

using namespace skainet;

// gpt-oss with YaRN: every layer ext_factor 1 and the attn_factor that cancels ggml's own YaRN magnitude,
// so a pair's cos and sin come out times 1 + 0.1 ln 32 (RopeAngles::mscale); windowed layers on their
// own base, the same factor.
TEST(RopeParams, YarnAsLlamaCppsContext) {
  arch::ModelShape s = arch::ModelShape::of_family("gpt-oss");
  s.layers = 2, s.rope_dims = 64, s.rope_base = 150000.0f, s.rope_base_swa = 10000.0f;
  s.rope_scaling = arch::RopeScaling::Yarn, s.rope_scale = s.rope_scale_swa = 32.0f, s.yarn_orig_ctx = 4096;
  for (uint32_t l : {0u, 1u}) {
    const kernels::RopeParams p = model::rope_params(s, l);
    EXPECT_EQ(p.base, l == 0 ? 10000.0f : 150000.0f) << l;  // layer 0 is windowed
    EXPECT_EQ(p.freq_scale, 1.0f / 32.0f);
    EXPECT_EQ(p.ext_factor, 1.0f);
    EXPECT_EQ(p.orig_ctx, 4096);
    EXPECT_EQ(p.beta_fast, 32.0f);
    EXPECT_EQ(p.beta_slow, 1.0f);
    EXPECT_TRUE(p.neox);
    EXPECT_NEAR(p.attn_factor, 1.0f, 1e-7f);
    EXPECT_NEAR(kernels::RopeAngles(p, 64).mscale(), 1.0f + 0.1f * std::log(32.0f), 1e-6f);
  }
  s.rope_attn_factor = 0.5f;  // rope.scaling.attn_factor multiplies it
  EXPECT_NEAR(model::rope_params(s, 1).attn_factor, 0.5f, 1e-7f);

  // Linear: no YaRN; the file's attn_factor still multiplies.
  s.rope_scaling = arch::RopeScaling::Linear, s.rope_scale = 4.0f;
  const kernels::RopeParams linear = model::rope_params(s, 1);
  EXPECT_EQ(linear.ext_factor, 0.0f);
  EXPECT_EQ(linear.freq_scale, 0.25f);
  EXPECT_EQ(linear.attn_factor, 0.5f);
  EXPECT_EQ(kernels::RopeAngles(linear, 64).mscale(), 0.5f);
}
