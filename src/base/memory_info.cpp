#include <charconv>
#include <fstream>
#include <sstream>

#include "skainet/core/base.hpp"

namespace skainet::base {

std::optional<uint64_t> available_memory(std::string_view meminfo) {
  std::string text;
  if (meminfo.empty()) {
    std::ifstream in("/proc/meminfo");
    if (!in) return std::nullopt;
    std::stringstream s;
    s << in.rdbuf();
    text = s.str();
    meminfo = text;
  }
  constexpr std::string_view kKey = "MemAvailable:";
  const size_t at = meminfo.find(kKey);
  if (at == std::string_view::npos) return std::nullopt;
  size_t i = at + kKey.size();
  while (i < meminfo.size() && meminfo[i] == ' ') ++i;
  uint64_t kib = 0;
  const auto [end, ec] = std::from_chars(meminfo.data() + i, meminfo.data() + meminfo.size(), kib);
  if (ec != std::errc{} || kib > (UINT64_MAX >> 10)) return std::nullopt;
  return kib << 10;  // the file says "kB" and means KiB
}

}  // namespace skainet::base
