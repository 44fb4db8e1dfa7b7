#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli.hpp"

namespace skainet::cli {

std::string human_count(uint64_t n) {
  if (n >= 1'000'000'000) return fmt::format("{:.2f}B", static_cast<double>(n) / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.1f}M", static_cast<double>(n) / 1e6);
  if (n >= 1'000) return fmt::format("{:.1f}K", static_cast<double>(n) / 1e3);
  return fmt::format("{}", n);
}

std::string shape_text(const std::vector<uint64_t>& shape) { return fmt::format("{}", fmt::join(shape, " x ")); }

void print_report(const convert::Report& report, bool verbose) {
  std::map<std::string_view, size_t> by_type;
  for (const auto& t : report.tensors) ++by_type[type_name(t.type)];
  fmt::print("  types:");
  for (const auto& [name, count] : by_type) fmt::print(" {} x {}", name, count);
  fmt::print("\n");
  if (verbose) {
    for (const auto& t : report.tensors)
      fmt::print("  {:<28} {:<14} {:>5} -> {:<5} {}{}\n", t.name, shape_text(t.shape), type_name(t.source),
                 type_name(t.type), convert::rule_name(t.rule),
                 t.fallback ? fmt::format(", fell back from {}", type_name(t.fallback->wanted)) : "");
  }
  const size_t fallbacks = report.fallback_count();
  if (fallbacks == 0) {
    fmt::print("  fallbacks: none\n");
    return;
  }
  fmt::print("  fallbacks ({}):\n", fallbacks);
  for (const auto& t : report.tensors) {
    if (!t.fallback) continue;
    const convert::Fallback& f = *t.fallback;
    fmt::print("    {:<28} {} -> {}: row of {} elements is not a multiple of {}'s {}-element block\n", t.name,
               type_name(f.wanted), type_name(f.chosen), f.row_elements, type_name(f.wanted), f.wanted_block);
  }
}

}  // namespace skainet::cli
