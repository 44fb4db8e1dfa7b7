// The x86 levels' kernels by type: the ISA units' rows (isa.hpp) indexed once per level, the AMX
// level's rows laid over AVX-512's, and the one place that says which kernel, and so which
// prepared activation, each (type, order) gets.
#include "kernels/x86/level.hpp"

#include "skainet/core/base.hpp"

namespace skainet::kernels::x86 {
namespace {

// A kernel the overlay names replaces the base row's; the rest of the row stays.
void lay_over(FormatKernels& row, const FormatKernels& over) noexcept {
  if (over.act != Act::None) row.act = over.act;
  if (over.gemv) row.gemv = over.gemv;
  if (over.feed) {
    row.feed = over.feed;
    row.feed_offered = over.feed_offered;
  }
  if (over.transposed) row.transposed = over.transposed;
  if (over.attend_keys) row.attend_keys = over.attend_keys;
  if (over.attend_values) row.attend_values = over.attend_values;
  if (over.tiles) row.tiles = over.tiles;
}

}  // namespace

Level compose_level(const char* name, const IsaKernels& isa,
                    std::initializer_list<const OverlayKernels*> overlays) noexcept {
  Level l;
  l.name = name;
  l.isa = &isa;
  l.split_bf16_pairs = isa.split_bf16_pairs;
  for (int64_t i = 0; i < isa.format_count; ++i) l.by_type[static_cast<size_t>(isa.formats[i].type)] = isa.formats[i];
  for (const OverlayKernels* o : overlays) {
    for (int64_t i = 0; i < o->format_count; ++i) {
      FormatKernels& row = l.by_type[static_cast<size_t>(o->formats[i].type)];
      row.type = o->formats[i].type;
      lay_over(row, o->formats[i]);
    }
    if (o->split_bf16_pairs) l.split_bf16_pairs = o->split_bf16_pairs;
  }
  return l;
}

const Level* level(IsaLevel which) noexcept {
#if defined(SKAINET_X86_KERNELS)
  if (!cpu_runs(which)) return nullptr;
  if (which == IsaLevel::Avx2) {
    static const Level avx2 = compose_level("avx2", kAvx2Kernels, {});
    return &avx2;
  }
  if (which == IsaLevel::Avx512) {
    static const Level avx512 = compose_level("avx512", kAvx512Kernels, {});
    return &avx512;
  }
  if (which == IsaLevel::Amx) {
    static const Level amx = [] {
      const auto& f = base::CpuFeatures::detected();
      if (f.amx_bf16 && f.avx512bf16) return compose_level("amx", kAvx512Kernels, {&kAmxInt8Kernels, &kAmxBf16Kernels});
      return compose_level("amx", kAvx512Kernels, {&kAmxInt8Kernels});
    }();
    return &amx;
  }
#endif
  (void)which;
  return nullptr;
}

Route route_of(const Level& level, GgmlType type, BlockOrder order, int64_t rows, int64_t k, bool prepared) noexcept {
  const FormatKernels& f = level.row(type);
  GemvFn fn = nullptr;
  if (order == BlockOrder::Interleaved16) {
    fn = f.feed;
  } else if (order == BlockOrder::RowMajor) {
    // Dense F16/BF16 weights take the level's BF16 tiles (x prepared as Act::Bf16Pairs) where it has
    // them, from 16 x rows on (fewer would leave the tiles empty) and for k in whole tile steps; only
    // the two-phase entry prepares x, so the plain entry passes prepared = false.
    if (f.tiles && prepared && rows >= 16 && k % 32 == 0) return {f.tiles, Act::Bf16Pairs};
    fn = f.gemv;
  }
  return fn ? Route{fn, f.act} : Route{};
}

bool feeds(const Level& level, GgmlType type, BlockOrder order) noexcept {
  return order == BlockOrder::Interleaved16 && level.row(type).feed != nullptr && level.row(type).feed_offered;
}

}  // namespace skainet::kernels::x86
