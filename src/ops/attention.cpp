#include <algorithm>

#include <fmt/format.h>

#include "ops/checks.hpp"

namespace skainet::ops {

using namespace detail;

// Heads are independent, so they are what runs in parallel: one task per head computes its scores,
// turns them into probabilities in place (so no second [heads, n, cells] buffer) and multiplies them
// by its KV head's values, calling the kernels directly (no slab allocation and nothing that throws
// inside the pool).
Tensor attention(ExecutionContext& ctx, const Tensor& q, const Tensor& keys, const Tensor& values,
                 const AttentionParams& p) {
  constexpr std::string_view kOp = "ops::attention";
  require_f32(q, kOp, "q");
  require_live(keys, kOp, "keys");
  require_live(values, kOp, "values");
  const int64_t hd = p.head_dim;
  if (p.heads <= 0 || p.kv_heads <= 0 || hd <= 0 || p.heads % p.kv_heads != 0)
    throw InvalidArgument(fmt::format("{}: {} heads over {} kv heads of size {}", kOp, p.heads, p.kv_heads, hd));
  if (q.rank() != 2 || q.dim(1) != p.heads * hd)
    throw InvalidArgument(fmt::format("{}: q {} should be [n, {}]", kOp, q.shape().to_string(), p.heads * hd));
  for (const Tensor* t : {&keys, &values})
    if (t->rank() != 2 || t->dim(1) != p.kv_heads * hd || t->dim(0) != keys.dim(0) || t->packed())
      throw InvalidArgument(fmt::format("{}: keys {} and values {} should be dense [cells, {}]", kOp,
                                        keys.shape().to_string(), values.shape().to_string(), p.kv_heads * hd));
  require_window(p.window, kOp);
  require_softcap(p.softcap, kOp, true);
  const int64_t n = q.dim(0), group = p.heads / p.kv_heads;
  if (p.offset < 0 || p.offset + n > keys.dim(0))
    throw InvalidArgument(fmt::format("{}: {} queries at offset {} need {} cells, keys have {}", kOp, n, p.offset,
                                      p.offset + n, keys.dim(0)));
  Tensor out = output(ctx, {n, p.heads * hd}, kOp);
  const Tensor* in[] = {&q, &keys, &values};
  const OpCall call{.kind = OpKind::Attention, .inputs = in, .output = out,
                    .attrs = {.position = p.offset, .attention = p}};
  if (recorded(ctx, call)) return out;
  // Causality: no query sees a cell past offset + n - 1, and with a window none before the first
  // query's window, offset - window + 1; only the cells between are read (the caller may pass the
  // whole cache). The softmax then counts positions from the first of them.
  const int64_t first = p.window > 0 ? std::max<int64_t>(0, p.offset - p.window + 1) : 0;
  const int64_t cells = p.offset + n - first;
  const Tensor visible_keys = keys.rows(first, cells), visible_values = values.rows(first, cells);

  const Tensor scores = ctx.scope().allocate({p.heads, n, cells}, GgmlType::F32, "attention scores");
  const kernels::KernelTable& k = ctx.kernels();
  const SoftmaxParams softmax{
      .scale = p.scale, .causal = true, .offset = p.offset - first, .window = p.window, .softcap = p.softcap};
  ctx.pool().parallel_for(p.heads, 1, [&](int64_t h0, int64_t h1) noexcept {
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t g = h / group;
      const Tensor s = scores.select(0, h);
      k.matmul(q.narrow(1, h * hd, hd), visible_keys.narrow(1, g * hd, hd), s, 0, cells);
      k.softmax(s, softmax, s);
      k.matmul(s, visible_values.narrow(1, g * hd, hd).transpose(0, 1), out.narrow(1, h * hd, hd), 0, hd);
    }
  });
  return out;
}

}  // namespace skainet::ops
