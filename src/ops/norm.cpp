#include <fmt/format.h>

#include "ops/checks.hpp"

namespace skainet::ops {

using namespace detail;

Tensor rms_norm(ExecutionContext& ctx, const Tensor& x, const Tensor& weight, float eps) {
  constexpr std::string_view kOp = "ops::rms_norm";
  require_f32(x, kOp, "x");
  if (weight.defined()) {
    require_f32(weight, kOp, "weight");
    if (weight.rank() != 1 || weight.dim(0) != x.shape().back())
      throw InvalidArgument(
          fmt::format("{}: weight {} should be [{}]", kOp, weight.shape().to_string(), x.shape().back()));
  }
  Tensor out = output(ctx, x.shape(), kOp);
  const Tensor* in[] = {&x, &weight};
  const OpCall call{
      .kind = OpKind::RmsNorm, .inputs = {in, weight.defined() ? 2u : 1u}, .output = out, .attrs = {.eps = eps}};
  if (!recorded(ctx, call)) ctx.kernels().rms_norm(x, weight, eps, out);
  return out;
}

Tensor rope(ExecutionContext& ctx, const Tensor& x, int64_t pos0, const RopeParams& params,
            const Tensor& freq_factors) {
  constexpr std::string_view kOp = "ops::rope";
  require_f32(x, kOp, "x");
  const int64_t d = x.shape().back();
  const int64_t dims = params.dims > 0 ? params.dims : d;
  if (dims % 2 != 0 || dims > d || x.rank() < 1)
    throw InvalidArgument(fmt::format("{}: {} rotated dims of {}: must be even and at most the innermost dim", kOp,
                                      dims, x.shape().to_string()));
  if (pos0 < 0) throw InvalidArgument(fmt::format("{}: negative position {}", kOp, pos0));
  if (freq_factors.defined()) {
    require_f32(freq_factors, kOp, "freq_factors");
    if (freq_factors.rank() != 1 || freq_factors.dim(0) != dims / 2)
      throw InvalidArgument(fmt::format("{}: freq_factors {} should be [{}] (one per rotated pair)", kOp,
                                        freq_factors.shape().to_string(), dims / 2));
  }
  Tensor out = output(ctx, x.shape(), kOp);
  const Tensor* in[] = {&x, &freq_factors};
  const OpCall call{.kind = OpKind::Rope,
                    .inputs = {in, freq_factors.defined() ? 2u : 1u},
                    .output = out,
                    .attrs = {.position = pos0, .rope = params}};
  if (!recorded(ctx, call)) ctx.kernels().rope(x, pos0, params, freq_factors, out);
  return out;
}

Tensor softmax(ExecutionContext& ctx, const Tensor& x, const SoftmaxParams& params) {
  constexpr std::string_view kOp = "ops::softmax";
  require_f32(x, kOp, "x");
  require_window(params.window, kOp);
  require_softcap(params.softcap, kOp, true);
  Tensor out = output(ctx, x.shape(), kOp);
  const Tensor* in[] = {&x};
  if (!recorded(ctx, {.kind = OpKind::Softmax, .inputs = in, .output = out, .attrs = {.softmax = params}}))
    ctx.kernels().softmax(x, params, out);
  return out;
}

}  // namespace skainet::ops
