#include <algorithm>

#include <fmt/format.h>

#include "ops/checks.hpp"
#include "skainet/compute/kernels.hpp"

namespace skainet::ops {

using namespace detail;

namespace {

// Heads are independent, so they are what runs in parallel. Heads that share a KV head also share
// its cells: a task is a run of one group's heads, and the kernel reads each cell once for all of them
// (a decode step's cost at depth is those reads). So tasks are as large as keeps every thread busy:
// whole groups when there are at least two per thread, else each group split in as many parts as
// make about two tasks per thread. Each task computes its heads' scores, turns them into
// probabilities in place (so no second [heads, n, cells] buffer) and multiplies them by the values,
// in the kernel (no slab allocation and nothing that throws inside the pool).
struct HeadTasks {
  int64_t heads = 1;      // per task (the last of a group may have fewer)
  int64_t per_group = 1;  // tasks per group
};

HeadTasks head_tasks(const AttentionParams& p, int threads) {
  constexpr int64_t kTasksPerThread = 2;
  const int64_t group = p.heads / p.kv_heads;
  const int64_t parts = std::clamp<int64_t>((kTasksPerThread * threads + p.kv_heads - 1) / p.kv_heads, 1, group);
  const int64_t heads = (group + parts - 1) / parts;
  return {heads, (group + heads - 1) / heads};
}

}  // namespace

Tensor attention(ExecutionContext& ctx, const Tensor& q, const Tensor& keys, const Tensor& values,
                 const AttentionParams& p, const Tensor& sinks) {
  constexpr std::string_view kOp = "ops::attention";
  require_f32(q, kOp, "q");
  require_live(keys, kOp, "keys");
  require_live(values, kOp, "values");
  const int64_t hd = p.head_dim;
  if (p.heads <= 0 || p.kv_heads <= 0 || hd <= 0 || p.heads % p.kv_heads != 0)
    throw InvalidArgument(fmt::format("{}: {} heads over {} kv heads of size {}", kOp, p.heads, p.kv_heads, hd));
  if (q.rank() != 2 || q.dim(1) != p.heads * hd)
    throw InvalidArgument(fmt::format("{}: q {} should be [n, {}]", kOp, q.shape().to_string(), p.heads * hd));
  for (const Tensor* t : {&keys, &values}) {
    if (t->rank() != 2 || t->dim(1) != p.kv_heads * hd || t->dim(0) != keys.dim(0))
      throw InvalidArgument(fmt::format("{}: keys {} and values {} should be [cells, {}]", kOp,
                                        keys.shape().to_string(), values.shape().to_string(), p.kv_heads * hd));
    // A quantized cache (-ctk/-ctv): a KV head's part of a cell must start a block.
    if (t->packed() && (!kernels::ref::has_reference(t->type()) || hd % type_traits(t->type()).block_elements != 0))
      throw InvalidArgument(
          fmt::format("{}: a {} cache with heads of {} elements: needs a reference kernel and "
                      "heads of whole {}-element blocks",
                      kOp, type_name(t->type()), hd, type_traits(t->type()).block_elements));
  }
  if (sinks.defined()) {
    require_f32(sinks, kOp, "sinks");
    if (sinks.rank() != 1 || sinks.dim(0) != p.heads || sinks.stride(0) != 4)
      throw InvalidArgument(fmt::format("{}: sinks {} should be contiguous [{}] (one per query head)", kOp,
                                        sinks.shape().to_string(), p.heads));
  }
  require_window(p.window, kOp);
  require_softcap(p.softcap, kOp, true);
  const int64_t n = q.dim(0), group = p.heads / p.kv_heads;
  if (p.offset < 0 || p.offset + n > keys.dim(0))
    throw InvalidArgument(fmt::format("{}: {} queries at offset {} need {} cells, keys have {}", kOp, n, p.offset,
                                      p.offset + n, keys.dim(0)));
  Tensor out = output(ctx, {n, p.heads * hd}, kOp);
  const Tensor* in[] = {&q, &keys, &values, &sinks};
  const OpCall call{.kind = OpKind::Attention,
                    .inputs = {in, sinks.defined() ? 4u : 3u},
                    .output = out,
                    .attrs = {.position = p.offset, .attention = p}};
  if (recorded(ctx, call)) return out;
  // Causality: no query sees a cell past offset + n - 1, and with a window none before the first
  // query's window, offset - window + 1; only the cells between are read (the caller may pass the
  // whole cache). The softmax then counts positions from the first of them.
  const int64_t first = p.window > 0 ? std::max<int64_t>(0, p.offset - p.window + 1) : 0;
  const int64_t cells = p.offset + n - first;
  // A decode step's kernel reads a quantized cache in its form; more queries than one go through the
  // dense products, so their visible cells are converted to F32 once per call (the plan prices it:
  // plan::StepRows::packed_caches).
  const auto readable = [&](const Tensor& cache) {
    const Tensor visible = cache.rows(first, cells);
    return n == 1 || !visible.packed() ? visible : convert(ctx, visible, GgmlType::F32);
  };
  const Tensor visible_keys = readable(keys), visible_values = readable(values);

  const Tensor scores = ctx.scope().allocate({p.heads, n, cells}, GgmlType::F32, "attention scores");
  const kernels::KernelTable& k = ctx.kernels();
  const SoftmaxParams softmax{
      .scale = p.scale, .causal = true, .offset = p.offset - first, .window = p.window, .softcap = p.softcap};
  const float* sink_scores = sinks.defined() ? sinks.data<float>() : nullptr;
  const HeadTasks tasks = head_tasks(p, ctx.pool().size());
  ctx.pool().parallel_for(p.kv_heads * tasks.per_group, 1, [&](int64_t t0, int64_t t1) noexcept {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t g = t / tasks.per_group, h0 = g * group + t % tasks.per_group * tasks.heads;
      const int64_t h1 = std::min(h0 + tasks.heads, (g + 1) * group);
      k.attention_heads(q, visible_keys, visible_values,
                        {.head_dim = hd, .group = group, .h0 = h0, .h1 = h1, .softmax = softmax, .sinks = sink_scores},
                        scores.narrow(0, h0, h1 - h0), out);
    }
  });
  return out;
}

}  // namespace skainet::ops
