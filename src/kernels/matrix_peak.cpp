// The matrix peak of each kernel level: one row per (level, arithmetic), the unit its matmuls issue
// and that unit's nominal rate per core. The rates are the vendors' documented throughputs:
// - AVX2 int8: vpmaddubsw (or AVX-VNNI's vpdpbusd) on 256 bits is 32 u8×s8 multiply-adds, two a cycle
//   (Intel ports 0 and 1; AMD Zen's two vector multiply pipes).
// - AVX-512 int8: the same on 512 bits, 64 multiply-adds, two a cycle on parts with two FMA units.
// - f32 FMA: 8 (AVX2) or 16 (AVX-512) lanes, two FMA units. F16 without a 16-bit unit is converted
//   to f32 and multiplied there.
// - AMX: tdpbusd is 16×16×64 int8 multiply-adds and tdpbf16ps 16×16×32 bf16 ones, each every 16
//   cycles: 1024 and 512 multiply-adds a cycle. The AMX level uses BF16 tiles only where the CPU has
//   AMX-BF16 and AVX512-BF16 (kernels/x86/level.cpp); else its F16 products are AVX-512's.
#include "skainet/compute/kernel_ops.hpp"

#include <algorithm>

namespace skainet::kernels {
namespace {

struct UnitRow {
  IsaLevel level;
  Arithmetic arithmetic;
  MatrixUnit unit;
  bool (*present)(const base::CpuFeatures&) = nullptr;  // null: the level implies it
};

bool amx_bf16_tiles(const base::CpuFeatures& f) { return f.amx_bf16 && f.avx512bf16; }

// First row of the level and arithmetic whose unit is present wins.
constexpr UnitRow kUnits[] = {
    {IsaLevel::Amx, Arithmetic::Int8, {"amx int8 (tdpbusd)", 2048}},
    {IsaLevel::Amx, Arithmetic::Half, {"amx bf16 (tdpbf16ps)", 1024}, &amx_bf16_tiles},
    {IsaLevel::Amx, Arithmetic::Half, {"avx512 f32 fma", 64}},
    {IsaLevel::Amx, Arithmetic::F32, {"avx512 f32 fma", 64}},
    {IsaLevel::Avx512, Arithmetic::Int8, {"avx512 int8 (vpmaddubsw/vpdpbusd)", 256}},
    {IsaLevel::Avx512, Arithmetic::Half, {"avx512 f32 fma", 64}},
    {IsaLevel::Avx512, Arithmetic::F32, {"avx512 f32 fma", 64}},
    {IsaLevel::Avx2, Arithmetic::Int8, {"avx2 int8 (vpmaddubsw)", 128}},
    {IsaLevel::Avx2, Arithmetic::Half, {"avx2 f32 fma", 32}},
    {IsaLevel::Avx2, Arithmetic::F32, {"avx2 f32 fma", 32}},
};

// The reference kernels: one scalar multiply-add a cycle, whatever the weights.
constexpr MatrixUnit kScalar{"scalar", 2};

}  // namespace

Arithmetic arithmetic_of(GgmlType weights) noexcept {
  switch (weights) {
    case GgmlType::F32: return Arithmetic::F32;
    case GgmlType::F16:
    case GgmlType::BF16: return Arithmetic::Half;
    default: return type_traits(weights).quantized ? Arithmetic::Int8 : Arithmetic::F32;
  }
}

MatrixUnit matrix_unit(IsaLevel level, Arithmetic arithmetic, const base::CpuFeatures& cpu) noexcept {
  for (const UnitRow& r : kUnits)
    if (r.level == level && r.arithmetic == arithmetic && (!r.present || r.present(cpu))) return r.unit;
  return kScalar;
}

MatrixPeak matrix_peak(IsaLevel level, Arithmetic arithmetic, unsigned threads) noexcept {
  return {.unit = matrix_unit(level, arithmetic, base::CpuFeatures::detected()),
          .cores = std::clamp(threads, 1u, base::default_threads()),
          .clock_hz = base::nominal_clock_hz()};
}

}  // namespace skainet::kernels
