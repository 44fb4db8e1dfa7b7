#include "skainet/core/base.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace skainet::base {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// Reads CPUID directly (feature names accepted by __builtin_cpu_supports differ between compilers),
// and checks with XGETBV that the OS saves the AVX / AVX-512 register state.
uint64_t xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  f.sse42 = c & (1u << 20);
  f.fma = c & (1u << 12);
  f.f16c = c & (1u << 29);
  const bool osxsave = c & (1u << 27);
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool ymm = (xcr0 & 0x6) == 0x6;
  const bool zmm = (xcr0 & 0xe6) == 0xe6;
  f.avx = (c & (1u << 28)) && ymm;
  f.fma = f.fma && f.avx;
  f.f16c = f.f16c && f.avx;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = (b & (1u << 5)) && ymm;
    f.avx512f = (b & (1u << 16)) && zmm;
    f.avx512bw = (b & (1u << 30)) && zmm;
    f.avx512vl = (b & (1u << 31)) && zmm;
    f.avx512vnni = (c & (1u << 11)) && zmm;
    const bool tiles = (xcr0 & 0x60000) == 0x60000;              // XTILECFG and XTILEDATA
    f.amx_int8 = (d & (1u << 24)) && (d & (1u << 25)) && tiles;  // AMX-TILE and AMX-INT8
    f.amx_bf16 = (d & (1u << 24)) && (d & (1u << 22)) && tiles;  // AMX-TILE and AMX-BF16
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
    f.avx_vnni = (a & (1u << 4)) && ymm;
    f.avx512bf16 = (a & (1u << 5)) && zmm;
  }
  return f;
}
#else
CpuFeatures detect() { return {}; }
#endif

}  // namespace

const CpuFeatures& CpuFeatures::detected() {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace skainet::base
