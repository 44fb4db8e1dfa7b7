#include "kernels/ref/ops_common.hpp"

namespace skainet::kernels::ref {
namespace {

using namespace detail;

// One innermost row from src to dst, converting between the formats the op allowed.
void copy_row(const Tensor& src, const std::byte* ps, const Tensor& dst, std::byte* pd, int64_t n) noexcept {
  const GgmlType st = src.type(), dt = dst.type();
  const int64_t ss = inner_stride(src), ds = inner_stride(dst);
  if (src.packed() || dst.packed()) {
    if (st == dt)
      std::memcpy(pd, ps, static_cast<size_t>(src.row_bytes()));
    else if (src.packed())
      dequantize_row(st, ps, f32(pd), n);
    else
      quantize_row(dt, f32(ps), pd, n);
    return;
  }
  if (st == dt) {
    const size_t es = src.element_size();
    if (ss == static_cast<int64_t>(es) && ds == static_cast<int64_t>(es)) {
      std::memcpy(pd, ps, es * static_cast<size_t>(n));
    } else {
      for (int64_t j = 0; j < n; ++j) std::memcpy(pd + j * ds, ps + j * ss, es);
    }
    return;
  }
  for (int64_t j = 0; j < n; ++j) store(dt, pd + j * ds, load(st, ps + j * ss));
}

}  // namespace

void copy(const Tensor& src, const Tensor& dst) noexcept {
  const int64_t rows = row_count(src.shape());
  const int64_t n = src.shape().back();
  RowCursor cs(src.shape(), src.strides()), cd(dst.shape(), dst.strides());
  for (int64_t r = 0; r < rows; ++r, cs.next(), cd.next())
    copy_row(src, src.raw() + cs.offset(), dst, dst.raw_mut() + cd.offset(), n);
}

void gather_rows(const Tensor& table, const int32_t* ids, int64_t n, const Tensor& out) noexcept {
  const int64_t d = table.dim(1);
  const int64_t st = inner_stride(table);
  for (int64_t i = 0; i < n; ++i) {
    const std::byte* row = table.raw() + static_cast<int64_t>(ids[i]) * table.stride(0);
    float* po = f32(out.raw_mut() + i * out.stride(0));
    if (table.packed()) {
      dequantize_row(table.type(), row, po, d);
    } else {
      for (int64_t j = 0; j < d; ++j) po[j] = load(table.type(), row + j * st);
    }
  }
}

}  // namespace skainet::kernels::ref

namespace skainet::kernels {
// Every slot's default is its reference kernel (kernel_ops.hpp).
const KernelTable& reference_table() noexcept {
  static constexpr KernelTable kReference{};
  return kReference;
}
}  // namespace skainet::kernels
