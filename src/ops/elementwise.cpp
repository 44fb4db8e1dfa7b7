#include "ops/checks.hpp"

namespace skainet::ops {

using namespace detail;

namespace {

Tensor binary(ExecutionContext& ctx, const Tensor& a, const Tensor& b, std::string_view op, memory::OpKind kind,
              void (*kernel)(const Tensor&, const Tensor&, const Tensor&) noexcept) {
  require_f32(a, op, "a");
  require_f32(b, op, "b");
  require_broadcast(a, b, op);
  Tensor out = output(ctx, a.shape(), op);
  const Tensor* in[] = {&a, &b};
  if (!recorded(ctx, {.kind = kind, .inputs = in, .output = out})) kernel(a, b, out);
  return out;
}

}  // namespace

Tensor add(ExecutionContext& ctx, const Tensor& a, const Tensor& b) {
  return binary(ctx, a, b, "ops::add", memory::OpKind::Add, ctx.kernels().add);
}

Tensor mul(ExecutionContext& ctx, const Tensor& a, const Tensor& b) {
  return binary(ctx, a, b, "ops::mul", memory::OpKind::Mul, ctx.kernels().mul);
}

Tensor swiglu(ExecutionContext& ctx, const Tensor& gate, const Tensor& up) {
  require_f32(gate, "ops::swiglu", "gate");
  require_f32(up, "ops::swiglu", "up");
  require_same_shape(gate, up, "ops::swiglu");
  Tensor out = output(ctx, gate.shape(), "ops::swiglu");
  const Tensor* in[] = {&gate, &up};
  if (!recorded(ctx, {.kind = memory::OpKind::Swiglu, .inputs = in, .output = out})) ctx.kernels().swiglu(gate, up, out);
  return out;
}

Tensor geglu(ExecutionContext& ctx, const Tensor& gate, const Tensor& up) {
  require_f32(gate, "ops::geglu", "gate");
  require_f32(up, "ops::geglu", "up");
  require_same_shape(gate, up, "ops::geglu");
  Tensor out = output(ctx, gate.shape(), "ops::geglu");
  const Tensor* in[] = {&gate, &up};
  if (!recorded(ctx, {.kind = memory::OpKind::Geglu, .inputs = in, .output = out})) ctx.kernels().geglu(gate, up, out);
  return out;
}

Tensor softcap(ExecutionContext& ctx, const Tensor& x, float cap) {
  require_f32(x, "ops::softcap", "x");
  require_softcap(cap, "ops::softcap", false);
  Tensor out = output(ctx, x.shape(), "ops::softcap");
  const Tensor* in[] = {&x};
  if (!recorded(ctx, {.kind = memory::OpKind::Softcap, .inputs = in, .output = out, .factor = cap}))
    ctx.kernels().softcap(x, cap, out);
  return out;
}

Tensor scale(ExecutionContext& ctx, const Tensor& x, float s) {
  require_f32(x, "ops::scale", "x");
  Tensor out = output(ctx, x.shape(), "ops::scale");
  const Tensor* in[] = {&x};
  if (!recorded(ctx, {.kind = memory::OpKind::Scale, .inputs = in, .output = out, .factor = s}))
    ctx.kernels().scale(x, s, out);
  return out;
}

Tensor silu(ExecutionContext& ctx, const Tensor& x) {
  require_f32(x, "ops::silu", "x");
  Tensor out = output(ctx, x.shape(), "ops::silu");
  const Tensor* in[] = {&x};
  if (!recorded(ctx, {.kind = memory::OpKind::Silu, .inputs = in, .output = out})) ctx.kernels().silu(x, out);
  return out;
}

}  // namespace skainet::ops
