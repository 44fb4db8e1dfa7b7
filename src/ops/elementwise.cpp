#include "ops/checks.hpp"

namespace skainet::ops {

using namespace detail;

namespace {

Tensor binary(ExecutionContext& ctx, const Tensor& a, const Tensor& b, std::string_view op, OpKind kind,
              void (*kernel)(const Tensor&, const Tensor&, const Tensor&) noexcept) {
  require_f32(a, op, "a");
  require_f32(b, op, "b");
  require_broadcast(a, b, op);
  Tensor out = output(ctx, a.shape(), op);
  const Tensor* in[] = {&a, &b};
  if (!recorded(ctx, {.kind = kind, .inputs = in, .output = out})) kernel(a, b, out);
  return out;
}

// A gated activation, act(gate) * up, same shapes (swiglu, geglu).
Tensor gated(ExecutionContext& ctx, const Tensor& gate, const Tensor& up, std::string_view op, OpKind kind,
             void (*kernel)(const Tensor&, const Tensor&, const Tensor&) noexcept) {
  require_f32(gate, op, "gate");
  require_f32(up, op, "up");
  require_same_shape(gate, up, op);
  Tensor out = output(ctx, gate.shape(), op);
  const Tensor* in[] = {&gate, &up};
  if (!recorded(ctx, {.kind = kind, .inputs = in, .output = out})) kernel(gate, up, out);
  return out;
}

}  // namespace

Tensor add(ExecutionContext& ctx, const Tensor& a, const Tensor& b) {
  return binary(ctx, a, b, "ops::add", OpKind::Add, ctx.kernels().add);
}

Tensor mul(ExecutionContext& ctx, const Tensor& a, const Tensor& b) {
  return binary(ctx, a, b, "ops::mul", OpKind::Mul, ctx.kernels().mul);
}

Tensor swiglu(ExecutionContext& ctx, const Tensor& gate, const Tensor& up) {
  return gated(ctx, gate, up, "ops::swiglu", OpKind::Swiglu, ctx.kernels().swiglu);
}

Tensor geglu(ExecutionContext& ctx, const Tensor& gate, const Tensor& up) {
  return gated(ctx, gate, up, "ops::geglu", OpKind::Geglu, ctx.kernels().geglu);
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
