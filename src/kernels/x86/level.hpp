// An x86 level as the dispatch reads it (baseline code: level.cpp, cpu.cpp, dispatch.cpp): every
// weight type's kernels indexed by type, merged once from the ISA units' rows (isa.hpp), and the
// route a matmul takes through them. Private to src/kernels/x86.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>

#include "kernels/x86/isa.hpp"
#include "skainet/compute/kernel_ops.hpp"

namespace skainet::kernels::x86 {

struct Level {
  const char* name = nullptr;
  const IsaKernels* isa = nullptr;  // the entries that do not depend on a weight's format
  void (*split_bf16_pairs)(const float* x, int64_t k, int64_t r, int64_t n, std::byte* prepared) noexcept = nullptr;
  std::array<FormatKernels, kTypeSlots> by_type{};  // a slot of nulls: the reference kernels

  const FormatKernels& row(GgmlType type) const noexcept { return by_type[static_cast<size_t>(type)]; }
};

// `isa`'s rows indexed by type, with each overlay's kernels laid over them in order (a kernel an
// overlay names replaces the row's, the rest stays): how level() builds the AMX level.
Level compose_level(const char* name, const IsaKernels& isa,
                    std::initializer_list<const OverlayKernels*> overlays) noexcept;

// Whether this CPU (and OS: AMX's tile state) runs `level`'s kernels (cpu.cpp); Reference: true.
bool cpu_runs(IsaLevel level) noexcept;

// The kernels of `level`, or null where this build or CPU lacks it (Reference: always null). Built
// on first use (the AMX level: AVX-512's rows with the AMX units' laid over them).
const Level* level(IsaLevel level) noexcept;

struct Route {
  GemvFn fn = nullptr;  // null: the reference kernel
  Act act = Act::None;
};

// The route of `rows` contiguous x rows of `k` against a rank-2 weight of `type` held in `order`
// with contiguous rows: which kernel, and so which prepared activation. `prepared`: whether x is
// prepared once per call (the two-phase entry), which the BF16 tiles need.
Route route_of(const Level& level, GgmlType type, BlockOrder order, int64_t rows, int64_t k, bool prepared) noexcept;

// Whether `level` reads weights of `type` faster in the kernel-feed `order` than in file order (a
// feed kernel, FormatKernels::feed_offered).
bool feeds(const Level& level, GgmlType type, BlockOrder order) noexcept;

}  // namespace skainet::kernels::x86
