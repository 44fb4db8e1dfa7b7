// skainet::iree_plugin — skainet_gather_rows: the token embedding lookup (ops::get_rows) on the
// packed table as the engine holds it, rows [begin, end) of the ids per workgroup.
#include <algorithm>
#include <cstring>
#include <vector>

#include "iree_plugin/imports.hpp"
#include "skainet/compute/kernels.hpp"

namespace skainet::iree_plugin {
namespace {

using detail::borrowed;
using detail::require;

// A table in a kernel-feed order has its rows' blocks interleaved by groups of 16; the kernels'
// gather reads file order only, so such rows are read block by block through ref::feed_block (how
// the reference matmul reads the order) and dequantized.
void gather_feed_order(const Tensor& table, const int32_t* ids, int64_t count, const Tensor& out) {
  const TypeTraits& t = type_traits(table.type());
  const int64_t cols = table.dim(1), blocks = cols / t.block_elements;
  std::vector<std::byte> block(t.block_bytes);
  for (int64_t i = 0; i < count; ++i) {
    auto* row = reinterpret_cast<float*>(out.raw_mut() + i * out.stride(0));
    for (int64_t b = 0; b < blocks; ++b) {
      kernels::ref::feed_block(table.type(), table.block_order(), table.raw(), table.dim(0), cols, ids[i], b,
                               block.data());
      kernels::ref::dequantize_row(table.type(), block.data(), row + b * t.block_elements, t.block_elements);
    }
  }
}

}  // namespace

int gather_rows(void* params, void*, void*) noexcept {
  return detail::guarded("skainet_gather_rows", [&] {
    const auto& p = *static_cast<const GatherRowsParams*>(params);
    require(p.n >= 0 && p.rows > 0 && p.cols > 0, "bad shape");
    require(0 <= p.begin && p.begin <= p.end && p.end <= p.n, "id range outside [0, n)");
    if (p.begin == p.end) return;
    const GgmlType t = detail::type_of(p.type);
    const BlockOrder o = detail::order_of(p.order);
    const bool dense = t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
    require(dense || (type_traits(t).quantized && kernels::ref::has_reference(t)), "no kernel reads this table type");
    require(o == BlockOrder::RowMajor || kernels::ref::can_repack(t, o), "no kernel reads this block order");
    require(p.ids.get() != nullptr, "null ids");
    const Tensor embd = borrowed(p.table.get(), Shape{p.rows, p.cols}, t, o, false, "iree gather table");
    const Tensor out =
        borrowed(p.out.get(), Shape{p.n, p.cols}, GgmlType::F32, BlockOrder::RowMajor, true, "iree gather out");
    // The ids binding need not be 4-byte aligned: copy this workgroup's ids (and check them).
    const int64_t count = p.end - p.begin;
    std::vector<int32_t> ids(static_cast<size_t>(count));
    std::memcpy(ids.data(), p.ids.get() + p.begin * int64_t{sizeof(int32_t)}, ids.size() * sizeof(int32_t));
    for (int32_t id : ids)
      if (id < 0 || id >= p.rows) detail::reject(kOutOfRange, "token id outside the table");
    const Tensor dst = out.rows(p.begin, count);
    if (o == BlockOrder::RowMajor)
      iree_plugin::table().gather_rows(embd, ids.data(), count, dst);
    else
      gather_feed_order(embd, ids.data(), count, dst);
  });
}

}  // namespace skainet::iree_plugin

namespace skainet::iree_plugin {

// skainet_repack_rows(src, dst; rows, k, type, order, group_begin, group_end): the load-time repack
// of a file-order [rows, k] weight into a kernel-feed order (kernels::ref::repack_rows), for the
// 16-row groups [group_begin, group_end) (the last "group" also takes the row-major tail). Lets a
// module keep file-order parameters and make the fed order once, in an initializer; the tests use it
// to make interleaved weights.
int repack_rows(void* params, void*, void*) noexcept {
  return detail::guarded("skainet_repack_rows", [&] {
    const auto& p = *static_cast<const RepackRowsParams*>(params);
    require(p.rows > 0 && p.k > 0, "bad shape");
    const GgmlType t = detail::type_of(p.type);
    const BlockOrder o = detail::order_of(p.order);
    require(o != BlockOrder::RowMajor && kernels::ref::can_repack(t, o), "no repack to this order");
    require(p.src.get() && p.dst.get(), "null binding");
    const int64_t groups = (p.rows + kInterleaveRows - 1) / kInterleaveRows;
    require(0 <= p.group_begin && p.group_begin <= p.group_end && p.group_end <= groups,
            "group range outside the weight");
    const int64_t r0 = p.group_begin * kInterleaveRows, r1 = std::min(p.group_end * kInterleaveRows, p.rows);
    if (r0 >= r1) return;
    const uint64_t rb = row_bytes(t, static_cast<uint64_t>(p.k));
    // A group and the tail after the whole groups each repack on their own (same bytes per row).
    const int64_t whole = p.rows / kInterleaveRows * kInterleaveRows;
    for (int64_t r = r0; r < r1;) {
      const int64_t count = r < whole ? std::min(r1, whole) - r : r1 - r;
      kernels::ref::repack_rows(t, o, p.src.get() + r * rb, p.dst.get() + r * rb, count, p.k);
      r += count;
    }
  });
}

}  // namespace skainet::iree_plugin
