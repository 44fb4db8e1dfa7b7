#include <algorithm>

#include <fmt/format.h>

#include "ops/checks.hpp"
#include "skainet/compute/kernels.hpp"

namespace skainet::ops {

using namespace detail;

namespace {

constexpr std::string_view kOp = "ops::matmul";

Shape matmul_shape(const Tensor& x, const Tensor& w) {
  require_f32(x, kOp, "x");
  require_live(w, kOp, "w");
  if (x.rank() < 1 || (w.rank() != 2 && w.rank() != 3))
    throw InvalidArgument(fmt::format("{}: x {} and w {} must be [.., n, k] and [out, k] or [B, out, k]", kOp,
                                      x.shape().to_string(), w.shape().to_string()));
  if (w.dim(-1) != x.dim(-1))
    throw InvalidArgument(
        fmt::format("{}: inner dimensions differ: x {} vs w {}", kOp, x.shape().to_string(), w.shape().to_string()));
  if (w.rank() == 3 && (x.rank() != 3 || x.dim(0) != w.dim(0)))
    throw InvalidArgument(fmt::format("{}: batched w {} needs x [{}, n, k], found {}", kOp, w.shape().to_string(),
                                      w.dim(0), x.shape().to_string()));
  const GgmlType t = w.type();
  const bool dense = t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
  if (!dense && !(w.packed() && kernels::ref::has_reference(t)))
    throw InvalidArgument(fmt::format("{}: no reference kernel for weight {}", kOp, w.describe()));
  if (w.block_order() != BlockOrder::RowMajor && (w.rank() != 2 || !kernels::ref::can_repack(t, w.block_order())))
    throw InvalidArgument(
        fmt::format("{}: no kernel reads {} in {} order", kOp, w.describe(), block_order_name(w.block_order())));
  if (w.packed()) require_inner_contiguous(x, kOp, "x");
  return x.shape().with(x.rank() - 1, w.dim(-2));
}

}  // namespace

void matmul_into(ExecutionContext& ctx, const Tensor& x, const Tensor& w, const Tensor& out) {
  const Shape shape = matmul_shape(x, w);
  require_f32(out, kOp, "out");
  require_writable(out, kOp);
  if (!(out.shape() == shape))
    throw InvalidArgument(fmt::format("{}: output {} should be {}", kOp, out.shape().to_string(), shape.to_string()));
  const Tensor* in[] = {&x, &w};
  if (recorded(ctx, {.kind = OpKind::Matmul, .inputs = in, .output = out})) return;
  const int64_t items = w.rank() == 3 ? w.dim(0) * w.dim(1) : w.dim(0);
  const int64_t threads = static_cast<int64_t>(ctx.pool().size());
  const int64_t grain = matmul_grain(items, threads, x.numel());
  const kernels::KernelTable& k = ctx.kernels();
  const size_t need = k.matmul_scratch ? k.matmul_scratch(x, w) : 0;
  // A kernel-feed order splits only between its row groups: chunks are counted in groups. So does a
  // 2-D row-major weight, at the 16 rows the dense short-k products transpose at once (chunks of 8,
  // what a small model's 64-row projection got, left half of every block's lanes zero).
  const bool batched_rows = w.block_order() == BlockOrder::RowMajor && w.rank() == 3;
  const int64_t granule = batched_rows ? 1 : kInterleaveRows;
  const auto rows_of = [&](auto&& fn) noexcept {
    return [&, fn](int64_t gb, int64_t ge) noexcept { fn(gb * granule, std::min(ge * granule, items)); };
  };
  const int64_t units = (items + granule - 1) / granule;
  const int64_t unit_grain = std::max<int64_t>(grain / granule, 1);
  if (need == 0) {
    auto* kernel = k.matmul;
    ctx.pool().parallel_for(units, unit_grain,
                            rows_of([&](int64_t begin, int64_t end) noexcept { kernel(x, w, out, begin, end); }));
    return;
  }
  // Two phases: x's rows converted once (split across threads), then the weight rows in chunks.
  std::byte* scratch = ctx.scratch(need).data();
  const int64_t rows = x.numel() / x.dim(-1);
  auto* prepare = k.matmul_prepare;
  auto* prepared = k.matmul_prepared;
  ctx.pool().parallel_for(rows, std::max<int64_t>(rows / threads, 1),
                          [&](int64_t begin, int64_t end) noexcept { prepare(x, w, scratch, begin, end); });
  ctx.pool().parallel_for(units, unit_grain, rows_of([&](int64_t begin, int64_t end) noexcept {
                            prepared(x, w, out, begin, end, scratch);
                          }));
}

Tensor matmul(ExecutionContext& ctx, const Tensor& x, const Tensor& w) {
  Tensor out = output(ctx, matmul_shape(x, w), kOp);
  matmul_into(ctx, x, w, out);
  return out;
}

}  // namespace skainet::ops
