#include "ops/checks.hpp"

namespace skainet::ops {

using namespace detail;

namespace {

// An op of two F32 tensors and one kernel: `b` broadcast over `a` (add, mul), or a gated activation
// act(gate) * up over one shape (swiglu, geglu, swiglu_oai), whose inputs the checks name `gate` and `up`.
enum class Pairing : uint8_t { Broadcast, Gated };

Tensor pairwise(ExecutionContext& ctx, const Tensor& a, const Tensor& b, std::string_view op, OpKind kind,
                void (*kernel)(const Tensor&, const Tensor&, const Tensor&) noexcept, Pairing pairing) {
  const bool gated = pairing == Pairing::Gated;
  require_f32(a, op, gated ? "gate" : "a");
  require_f32(b, op, gated ? "up" : "b");
  if (gated)
    require_same_shape(a, b, op);
  else
    require_broadcast(a, b, op);
  Tensor out = output(ctx, a.shape(), op);
  const Tensor* in[] = {&a, &b};
  if (!recorded(ctx, {.kind = kind, .inputs = in, .output = out})) kernel(a, b, out);
  return out;
}

}  // namespace

Tensor add(ExecutionContext& ctx, const Tensor& a, const Tensor& b) {
  return pairwise(ctx, a, b, "ops::add", OpKind::Add, ctx.kernels().add, Pairing::Broadcast);
}

Tensor mul(ExecutionContext& ctx, const Tensor& a, const Tensor& b) {
  return pairwise(ctx, a, b, "ops::mul", OpKind::Mul, ctx.kernels().mul, Pairing::Broadcast);
}

Tensor swiglu(ExecutionContext& ctx, const Tensor& gate, const Tensor& up) {
  return pairwise(ctx, gate, up, "ops::swiglu", OpKind::Swiglu, ctx.kernels().swiglu, Pairing::Gated);
}

Tensor geglu(ExecutionContext& ctx, const Tensor& gate, const Tensor& up) {
  return pairwise(ctx, gate, up, "ops::geglu", OpKind::Geglu, ctx.kernels().geglu, Pairing::Gated);
}

Tensor swiglu_oai(ExecutionContext& ctx, const Tensor& gate, const Tensor& up) {
  return pairwise(ctx, gate, up, "ops::swiglu_oai", OpKind::SwigluOai, ctx.kernels().swiglu_oai, Pairing::Gated);
}

Tensor softcap(ExecutionContext& ctx, const Tensor& x, float cap) {
  require_f32(x, "ops::softcap", "x");
  require_softcap(cap, "ops::softcap", false);
  Tensor out = output(ctx, x.shape(), "ops::softcap");
  const Tensor* in[] = {&x};
  if (!recorded(ctx, {.kind = OpKind::Softcap, .inputs = in, .output = out, .attrs = {.cap = cap}}))
    ctx.kernels().softcap(x, cap, out);
  return out;
}

Tensor scale(ExecutionContext& ctx, const Tensor& x, float s) {
  require_f32(x, "ops::scale", "x");
  Tensor out = output(ctx, x.shape(), "ops::scale");
  const Tensor* in[] = {&x};
  if (!recorded(ctx, {.kind = OpKind::Scale, .inputs = in, .output = out, .attrs = {.scale = s}}))
    ctx.kernels().scale(x, s, out);
  return out;
}

Tensor silu(ExecutionContext& ctx, const Tensor& x) {
  require_f32(x, "ops::silu", "x");
  Tensor out = output(ctx, x.shape(), "ops::silu");
  const Tensor* in[] = {&x};
  if (!recorded(ctx, {.kind = OpKind::Silu, .inputs = in, .output = out})) ctx.kernels().silu(x, out);
  return out;
}

}  // namespace skainet::ops
