// RoPE's per-pair frequencies and magnitude, YaRN included, as ggml computes them (ggml.c's
// ggml_rope_yarn_corr_dims, ggml-cpu's rope_yarn and rope_yarn_ramp): the correction dims, ramp and
// magnitude in float as there, since floor / ceil of the dims are decisions the peer makes in float.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "skainet/compute/kernel_ops.hpp"

namespace skainet::kernels {
namespace {

// The pair index at which a rotation makes `rotations` full turns over `orig_ctx` positions.
float correction_dim(int64_t dims, int64_t orig_ctx, float rotations, float base) noexcept {
  const float turns = static_cast<float>(orig_ctx) / (rotations * 2.0f * std::numbers::pi_v<float>);
  return static_cast<float>(dims) * std::log(turns) / (2.0f * std::log(base));
}

}  // namespace

RopeAngles::RopeAngles(const RopeParams& p, int64_t dims) noexcept : p_(p), dims_(dims), mscale_(p.attn_factor) {
  if (p.ext_factor == 0.0f) return;
  corr_low_ = std::max(0.0f, std::floor(correction_dim(dims, p.orig_ctx, p.beta_fast, p.base)));
  corr_high_ = std::min(static_cast<float>(dims - 1), std::ceil(correction_dim(dims, p.orig_ctx, p.beta_slow, p.base)));
  mscale_ *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
}

double RopeAngles::frequency(int64_t pair) const noexcept {
  const double unscaled =
      std::pow(static_cast<double>(p_.base), -2.0 * static_cast<double>(pair) / static_cast<double>(dims_));
  if (p_.ext_factor == 0.0f) return static_cast<double>(p_.freq_scale) * unscaled;
  // Pairs below the low correction dim turn fast enough to keep their unscaled angle (mix 1); those
  // past the high one are interpolated (mix 0); a linear ramp in between.
  const float y = (static_cast<float>(pair) - corr_low_) / std::max(0.001f, corr_high_ - corr_low_);
  const double mix = static_cast<double>((1.0f - std::min(1.0f, std::max(0.0f, y))) * p_.ext_factor);
  return unscaled * (static_cast<double>(p_.freq_scale) * (1.0 - mix) + mix);
}

}  // namespace skainet::kernels
