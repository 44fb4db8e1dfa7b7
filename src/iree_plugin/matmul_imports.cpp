// skainet::iree_plugin — skainet_matmul_prepare and skainet_matmul_rows: ops::matmul_into
// (src/ops/linear.cpp) cut in two dispatches. The first converts x once (rows split over
// workgroups) into a scratch tensor the module threads from one dispatch to the next, the second
// computes chunks of output features from it, so IREE's workers do what the engine's pool does.
#include <algorithm>
#include <atomic>

#include "iree_plugin/imports.hpp"
#include "skainet/compute/kernels.hpp"

namespace skainet::iree_plugin {
namespace {

using detail::borrowed;
using detail::require;

// The prepared kernels read and write their scratch as 64-byte aligned (KernelTable's contract:
// the prepared rows are laid out in 64-byte aligned parts, and AVX-512 code may use aligned
// accesses there), but an IREE binding carries no alignment promise beyond its element type. So
// the prepared data starts at the first 64-byte boundary strictly after the binding's first byte,
// and that first byte records the distance: the rows dispatch trusts the prepared data only when
// the distance it computes for its own pointer is the one recorded (the same buffer, not moved).
// The exporter therefore reserves matmul_scratch + kScratchSlack bytes (kernel_imports.hpp).
constexpr int64_t kScratchAlign = 64;
static_assert(kernels::imports::kScratchSlack >= kScratchAlign, "the slack must hold the realignment");

struct Scratch {
  std::byte* head = nullptr;  // the binding's first byte (holds the distance)
  std::byte* data = nullptr;  // 64-byte aligned
  int64_t pad = 0;            // data - head, in [1, 64]
  int64_t usable = 0;         // bytes from data to the binding's end
};

Scratch scratch_of(std::byte* p, int64_t bytes) noexcept {
  Scratch s;
  if (!p || bytes <= 0) return s;
  const auto at = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (at + 1 + kScratchAlign - 1) & ~static_cast<uintptr_t>(kScratchAlign - 1);
  s.head = p;
  s.pad = static_cast<int64_t>(aligned - at);
  s.data = p + s.pad;
  s.usable = std::max<int64_t>(0, bytes - s.pad);
  return s;
}

std::atomic_ref<uint8_t> pad_byte(std::byte* head) noexcept {
  return std::atomic_ref<uint8_t>(*reinterpret_cast<uint8_t*>(head));
}

// The views of one call, checked as ops::matmul checks them (src/ops/linear.cpp).
struct Views {
  Tensor x, w, y;
};

Views views(const Binding& x, const Binding& w, const Binding* y, int64_t rows, int64_t k, int64_t n, int64_t type,
            int64_t order) {
  require(rows > 0 && k > 0 && n > 0, "rows, k and n must be positive");
  const GgmlType t = detail::type_of(type);
  const BlockOrder o = detail::order_of(order);
  const bool dense = t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
  require(dense || (type_traits(t).quantized && kernels::ref::has_reference(t)), "no kernel reads this weight type");
  require(o == BlockOrder::RowMajor || kernels::ref::can_repack(t, o), "no kernel reads this block order");
  Views v;
  v.x = borrowed(x.get(), Shape{rows, k}, GgmlType::F32, BlockOrder::RowMajor, false, "iree matmul x");
  v.w = borrowed(w.get(), Shape{n, k}, t, o, false, "iree matmul w");
  if (y) v.y = borrowed(y->get(), Shape{rows, n}, GgmlType::F32, BlockOrder::RowMajor, true, "iree matmul y");
  return v;
}

// Bytes the two-phase path needs for this call (0: the table has none, or x needs no conversion).
size_t prepared_need(const kernels::KernelTable& k, const Views& v) noexcept {
  if (!k.matmul_scratch || !k.matmul_prepare || !k.matmul_prepared) return 0;
  return k.matmul_scratch(v.x, v.w);
}

}  // namespace

int matmul_prepare(void* params, void*, void*) noexcept {
  return detail::guarded("skainet_matmul_prepare", [&] {
    const auto& p = *static_cast<const MatmulPrepareParams*>(params);
    const Views v = views(p.x, p.w, nullptr, p.rows, p.k, p.n, p.type, p.order);
    require(0 <= p.row_begin && p.row_begin <= p.row_end && p.row_end <= p.rows, "row range outside [0, rows)");
    const kernels::KernelTable& k = table();
    const size_t need = prepared_need(k, v);
    const Scratch s = scratch_of(p.scratch.get(), p.scratch_bytes);
    // Nothing to prepare, or too little room: skainet_matmul_rows sees the same and falls back.
    if (detail::verbose() && p.row_begin == 0)
      std::fprintf(
          stderr,
          "skainet_iree_plugin: matmul_prepare: scratch at 64n+%d, x at 64n+%d, w at 64n+%d; needs %zu of %lld (+%d)\n",
          static_cast<int>(reinterpret_cast<uintptr_t>(p.scratch.get()) % 64),
          static_cast<int>(reinterpret_cast<uintptr_t>(p.x.get()) % 64),
          static_cast<int>(reinterpret_cast<uintptr_t>(p.w.get()) % 64), need, static_cast<long long>(p.scratch_bytes),
          static_cast<int>(s.pad));
    if (need == 0 || static_cast<uint64_t>(s.usable) < need) return;
    pad_byte(s.head).store(static_cast<uint8_t>(s.pad), std::memory_order_relaxed);
    if (p.row_begin < p.row_end) k.matmul_prepare(v.x, v.w, s.data, p.row_begin, p.row_end);
  });
}

int matmul_rows(void* params, void*, void*) noexcept {
  return detail::guarded("skainet_matmul_rows", [&] {
    const auto& p = *static_cast<const MatmulRowsParams*>(params);
    const Views v = views(p.x, p.w, &p.y, p.rows, p.k, p.n, p.type, p.order);
    require(0 <= p.begin && p.begin <= p.end && p.end <= p.n, "feature range outside [0, n)");
    // A kernel-feed order is cut only between its 16-row groups (as ops::matmul cuts it).
    if (v.w.block_order() != BlockOrder::RowMajor)
      require(p.begin % kInterleaveRows == 0 && (p.end % kInterleaveRows == 0 || p.end == p.n),
              "an interleaved weight is split only between 16-row groups");
    if (p.begin == p.end) return;
    const kernels::KernelTable& k = table();
    const size_t need = prepared_need(k, v);
    const Scratch s = scratch_of(p.scratch.get(), p.scratch_bytes);
    const bool prepared = need > 0 && static_cast<uint64_t>(s.usable) >= need &&
                          pad_byte(s.head).load(std::memory_order_relaxed) == static_cast<uint8_t>(s.pad);
    if (prepared)
      k.matmul_prepared(v.x, v.w, v.y, p.begin, p.end, s.data);
    else
      k.matmul(v.x, v.w, v.y, p.begin, p.end);
  });
}

}  // namespace skainet::iree_plugin
