// Which x86 levels this CPU and OS run: the CPUID features each level's units are compiled for,
// and for AMX the tile state the OS hands out on request.
#include <cstdlib>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "kernels/x86/level.hpp"
#include "skainet/core/base.hpp"

namespace skainet::kernels::x86 {
namespace {

bool has_avx2() noexcept {
  const auto& f = base::CpuFeatures::detected();
  return f.avx2 && f.fma && f.f16c;
}

bool has_avx512() noexcept {
  const auto& f = base::CpuFeatures::detected();
  return has_avx2() && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni;
}

// Linux hands out the AMX tile state only to a process that asks (ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA, kernel 5.16 on); the permission then holds for all its threads. Asked once,
// when the level is first looked at; a refusal (older kernel, a sandbox) leaves the level absent.
bool amx_permitted() noexcept {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return ::syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

bool has_amx() noexcept {
  static const bool ok = has_avx512() && base::CpuFeatures::detected().amx_int8 && amx_permitted();
  return ok;
}

}  // namespace

bool cpu_runs(IsaLevel level) noexcept {
  switch (level) {
    case IsaLevel::Reference: return true;
    case IsaLevel::Avx2: return has_avx2();
    case IsaLevel::Avx512: return has_avx512();
    case IsaLevel::Amx: return has_amx();
  }
  return false;
}

}  // namespace skainet::kernels::x86
