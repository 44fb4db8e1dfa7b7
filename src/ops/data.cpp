#include <fmt/format.h>

#include "ops/checks.hpp"
#include "skainet/compute/kernels.hpp"

namespace skainet::ops {

using namespace detail;

namespace {

bool dense_float(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

void check_copy(const Tensor& src, const Tensor& dst) {
  constexpr std::string_view kOp = "ops::copy";
  require_live(src, kOp, "src");
  require_writable(dst, kOp);
  require_same_shape(src, dst, kOp);
  const GgmlType s = src.type(), d = dst.type();
  if (s == d && !src.packed()) return;
  if (dense_float(s) && dense_float(d)) return;
  if (src.packed() || dst.packed()) {
    if (src.block_order() != BlockOrder::RowMajor || dst.block_order() != BlockOrder::RowMajor)
      throw InvalidArgument(fmt::format("{}: kernel-feed block orders are not copied here", kOp));
    if (s == d) return;
    const Tensor& packed = src.packed() ? src : dst;
    const Tensor& dense = src.packed() ? dst : src;
    if (!kernels::ref::has_reference(packed.type()))
      throw InvalidArgument(fmt::format("{}: no reference kernel for {}", kOp, packed.describe()));
    if (dense.type() == GgmlType::F32 && !(src.packed() && dst.packed())) {
      require_inner_contiguous(dense, kOp, src.packed() ? "dst" : "src");
      return;
    }
  }
  throw InvalidArgument(fmt::format("{}: cannot convert {} to {}", kOp, src.describe(), dst.describe()));
}

}  // namespace

void copy(ExecutionContext& ctx, const Tensor& src, const Tensor& dst) {
  check_copy(src, dst);
  const Tensor* in[] = {&src};
  if (!recorded(ctx, {.kind = OpKind::Copy, .inputs = in, .output = dst})) ctx.kernels().copy(src, dst);
}

void write_rows(ExecutionContext& ctx, const Tensor& src, const Tensor& dst, int64_t row) {
  constexpr std::string_view kOp = "ops::write_rows";
  require_live(dst, kOp, "dst");
  if (src.rank() < 1 || dst.rank() != src.rank() || row < 0 || row > dst.dim(0) - src.dim(0))
    throw InvalidArgument(
        fmt::format("{}: {} at row {} does not fit in {}", kOp, src.shape().to_string(), row, dst.shape().to_string()));
  const Tensor target = dst.rows(row, src.dim(0));
  check_copy(src, target);
  const Tensor* in[] = {&src};
  if (!recorded(ctx, {.kind = OpKind::WriteRows, .inputs = in, .output = dst, .attrs = {.position = row}}))
    ctx.kernels().copy(src, target);
}

Tensor convert(ExecutionContext& ctx, const Tensor& src, GgmlType to) {
  require_live(src, "ops::convert", "src");
  Tensor out = output(ctx, src.shape(), "ops::convert", to);
  copy(ctx, src, out);
  return out;
}

Tensor gather_rows(ExecutionContext& ctx, const Tensor& table, std::span<const int32_t> ids) {
  constexpr std::string_view kOp = "ops::gather_rows";
  require_live(table, kOp, "table");
  if (table.rank() != 2)
    throw InvalidArgument(fmt::format("{}: table {} must be [vocab, d]", kOp, table.shape().to_string()));
  if (!dense_float(table.type()) && !(table.packed() && kernels::ref::has_reference(table.type())))
    throw InvalidArgument(fmt::format("{}: no reference kernel for {}", kOp, table.describe()));
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= table.dim(0))
      throw InvalidArgument(
          fmt::format("{}: id {} at index {} is outside the table's {} rows", kOp, ids[i], i, table.dim(0)));
  Tensor out = output(ctx, Shape{static_cast<int64_t>(ids.size()), table.dim(1)}, kOp);
  const Tensor* in[] = {&table};
  if (!recorded(ctx, {.kind = OpKind::GatherRows, .inputs = in, .output = out, .ids = ids}))
    ctx.kernels().gather_rows(table, ids.data(), static_cast<int64_t>(ids.size()), out);
  return out;
}

}  // namespace skainet::ops
