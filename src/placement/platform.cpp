#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "skainet/compute/kernel_ops.hpp"
#include "skainet/compute/kernels.hpp"
#include "skainet/model/placement.hpp"

namespace skainet::placement {
namespace {

bool transparent_huge_pages_enabled() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(f, line);
  // The active mode is bracketed: "always [madvise] never".
  return line.find("[always]") != std::string::npos || line.find("[madvise]") != std::string::npos;
}

uint64_t address_space_limit() {
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) return static_cast<uint64_t>(rl.rlim_cur);
  return UINT64_MAX;
}

}  // namespace

bool Platform::matmul_reads(GgmlType t, BlockOrder o) const noexcept {
  return std::find(matmul.begin(), matmul.end(), KernelCapability{t, o}) != matmul.end();
}

std::optional<BlockOrder> Platform::kernel_feed_order(GgmlType t) const noexcept {
  for (const auto& r : repack)
    if (r.type == t) return r.order;
  return std::nullopt;
}

bool Platform::can_dequantize(GgmlType t) const noexcept {
  return std::find(dequantize.begin(), dequantize.end(), t) != dequantize.end();
}

Platform Platform::detect() {
  Platform p;
  p.page_size = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  p.huge_pages = transparent_huge_pages_enabled();
  p.max_map_bytes = address_space_limit();
  p.isa = base::CpuFeatures::detected();
  const kernels::KernelTable& fastest = kernels::best_table();
  p.matmul_scratch = fastest.matmul_scratch_for;
  // Every type with a reference dequantizer (format.hpp's table); a kernel reads it in file order
  // through dot_row at least.
  for (const TypeTraits& traits : all_types()) {
    const GgmlType t = traits.type;
    if (!kernels::ref::has_reference(t)) continue;
    p.dequantize.push_back(t);
    p.matmul.push_back({t, BlockOrder::RowMajor});
    // A kernel-feed order is offered where a repacker exists and this machine's kernels read it fast
    // (the reference reads it too, block by block, but repacking for it would only cost).
    constexpr BlockOrder kFeed = BlockOrder::Interleaved16;
    if (kernels::ref::can_repack(t, kFeed) && fastest.feeds && fastest.feeds(t, kFeed)) {
      p.repack.push_back({t, kFeed});
      p.matmul.push_back({t, kFeed});
    }
  }
  return p;
}

std::string Platform::isa_summary() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (on) s += (s.empty() ? "" : " ") + std::string(name);
  };
  add(isa.sse42, "sse4.2");
  add(isa.avx2, "avx2");
  add(isa.fma, "fma");
  add(isa.f16c, "f16c");
  add(isa.avx512f, "avx512f");
  add(isa.avx512bw, "avx512bw");
  add(isa.avx512vnni, "avx512vnni");
  add(isa.avx512bf16, "avx512bf16");
  add(isa.avx_vnni, "avxvnni");
  add(isa.amx_int8, "amx-int8");
  add(isa.amx_bf16, "amx-bf16");
  return s.empty() ? "baseline" : s;
}

}  // namespace skainet::placement
