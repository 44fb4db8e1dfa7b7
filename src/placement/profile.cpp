#include <cctype>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "skainet/model/placement.hpp"

namespace skainet::placement {

std::vector<std::string_view> MemoryProfile::preset_names() {
  return {"default", "low-memory", "throughput", "in-memory", "strict"};
}

MemoryProfile MemoryProfile::preset(std::string_view name) {
  MemoryProfile p;
  p.name = std::string(name);
  // Repacking a weight to its kernel-feed order holds the same bytes in process memory that mapping
  // it would have held in page cache (the file pages it came from are dropped), so every profile but
  // low-memory takes it where a kernel reads it faster; low-memory keeps pages the kernel can evict.
  p.prefer_kernel_feed = true;
  if (name == "default") return p;  // map what can be mapped (or repack it), dequantize what no kernel reads
  if (name == "low-memory") {       // share the file's pages, never blow a weight up
    p.prefer_kernel_feed = false;
    p.strict = true;
    p.kv_type = GgmlType::F16;
    p.prefill_chunk = 32;
    return p;
  }
  if (name == "throughput") {  // as default, with a wider prefill
    p.prefill_chunk = 128;
    return p;
  }
  if (name == "in-memory") {  // nothing served from the file mapping
    p.residency = WeightResidency::Heap;
    return p;
  }
  if (name == "strict") {  // as default, but refuse instead of dequantizing
    p.strict = true;
    return p;
  }
  std::string names;
  for (auto n : preset_names()) names += (names.empty() ? "" : ", ") + std::string(n);
  throw InvalidArgument(fmt::format("unknown memory profile '{}' (known: {})", name, names));
}

uint64_t parse_bytes(std::string_view text) {
  std::string s(text);
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(s, &used);
  } catch (const std::exception&) {
    throw InvalidArgument(fmt::format("'{}' is not a size (expected e.g. 2G, 512M, 4096)", text));
  }
  std::string unit = s.substr(used);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.ends_with("IB"))
    unit.resize(unit.size() - 2);
  else if (unit.ends_with("B"))
    unit.resize(unit.size() - 1);
  double scale = 1;
  if (unit == "K")
    scale = 1024.0;
  else if (unit == "M")
    scale = 1024.0 * 1024;
  else if (unit == "G")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "T")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty())
    throw InvalidArgument(fmt::format("'{}': unknown size unit '{}' (K, M, G, T)", text, unit));
  const double bytes = value * scale;
  if (!(bytes >= 0) || bytes >= 1.8e19) throw InvalidArgument(fmt::format("'{}' is not a size in range", text));
  // Not llround: its long long ends at 2^63, and sizes from there to 1.8e19 came back wrapped.
  return static_cast<uint64_t>(std::round(bytes));
}

}  // namespace skainet::placement
