// The per-expert side of a decision: which pages of a 3-D expert stack are pinned, and the words
// `plan` and `--explain` use for one expert. The choice itself (hottest experts that fit the budget)
// is plan::place_experts: it needs the whole plan's resident total.
#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "skainet/model/placement.hpp"

namespace skainet::placement {

uint64_t pinned_bytes(const Decision& d) noexcept {
  if (is_pinned(d)) return d.spec.bytes;
  uint64_t n = 0;
  for (const ExpertSlice& e : d.experts) n += e.pinned_bytes;
  return n;
}

std::vector<FileRange> pinned_file_ranges(const Decision& d, uint64_t page_size) {
  std::vector<FileRange> ranges;
  if (is_pinned(d) || d.experts.empty() || page_size == 0) return ranges;
  const uint64_t slice = d.file_bytes / d.experts.size();
  const auto round_up = [&](uint64_t v) { return (v + page_size - 1) / page_size * page_size; };
  for (size_t i = 0; i < d.experts.size();) {
    if (!d.experts[i].pinned) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.experts.size() && d.experts[j].pinned) ++j;
    // The run [i, j) of pinned experts, shrunk to the whole pages inside it: the pages at its edges
    // hold a neighbour's bytes too (or another tensor's), and stay file pages.
    const uint64_t begin = round_up(d.file_offset + i * slice);
    const uint64_t end = (d.file_offset + j * slice) / page_size * page_size;
    if (end > begin) ranges.push_back({begin, end});
    i = j;
  }
  return ranges;
}

void account_pinned_pages(Decision& d, uint64_t page_size) {
  if (d.experts.empty()) return;
  const uint64_t slice = d.spec.bytes / d.experts.size();
  for (ExpertSlice& e : d.experts) e.pinned_bytes = is_pinned(d) ? slice : 0;
  if (is_pinned(d)) return;
  const uint64_t file_slice = d.file_bytes / d.experts.size();
  for (const FileRange& r : pinned_file_ranges(d, page_size))
    for (size_t i = 0; i < d.experts.size(); ++i) {
      const uint64_t a = d.file_offset + i * file_slice, b = a + file_slice;
      if (b > r.begin && a < r.end) d.experts[i].pinned_bytes += std::min(b, r.end) - std::max(a, r.begin);
    }
}

std::optional<std::pair<std::string_view, uint32_t>> parse_expert_ref(std::string_view text) noexcept {
  const size_t open = text.rfind('[');
  if (open == std::string_view::npos || open == 0 || !text.ends_with(']')) return std::nullopt;
  const std::string_view digits = text.substr(open + 1, text.size() - open - 2);
  uint32_t e = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), e);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return std::pair{text.substr(0, open), e};
}

std::string_view expert_reason_name(ExpertReason r) noexcept {
  switch (r) {
    case ExpertReason::NoBudget: return "no-budget";
    case ExpertReason::StackCopied: return "stack-copied";
    case ExpertReason::HotFits: return "hot-fits";
    case ExpertReason::OverBudget: return "over-budget";
  }
  return "?";
}

std::string expert_words(const ExpertSlice& e) {
  const std::string heat = e.routed >= 0 ? fmt::format("routed {:.1f}% of tokens in calibration", 100 * e.routed)
                                         : std::string("no --expert-stats: all experts equal, taken in index order");
  switch (e.reason) {
    case ExpertReason::NoBudget:
      return fmt::format("{}; evictable: no --budget, the stack stays mapped from the file", heat);
    case ExpertReason::StackCopied: return fmt::format("{}; pinned: the whole stack is copied into memory", heat);
    case ExpertReason::HotFits: return fmt::format("{}; pinned: among the hottest experts that fit the budget", heat);
    case ExpertReason::OverBudget:
      return fmt::format("{}; evictable: budget (spent on hotter experts and what the run must hold)", heat);
  }
  return heat;
}

std::string explain_expert(const Decision& d, uint32_t expert) {
  if (d.experts.empty())
    throw InvalidArgument(fmt::format("'{}' is not an expert stack: it has no [N] slices", d.tensor));
  if (expert >= d.experts.size())
    throw InvalidArgument(fmt::format("'{}' has {} experts (0 to {}); there is no expert {}", d.tensor,
                                      d.experts.size(), d.experts.size() - 1, expert));
  const ExpertSlice& e = d.experts[expert];
  const uint64_t file_slice = d.file_bytes / d.experts.size();
  const uint64_t edge = e.bytes - e.pinned_bytes;
  const std::string pages =
      e.pinned ? fmt::format("{} in anonymous pages{}", base::format_bytes(e.pinned_bytes),
                             edge > 0 && !is_pinned(d)
                                 ? fmt::format(", {} in the partial pages at its run's edges stays file pages "
                                               "(counted evictable)",
                                               base::format_bytes(edge))
                                 : std::string())
               : fmt::format("{} of file pages the kernel may drop and read back", base::format_bytes(e.bytes));
  return fmt::format(
      "expert      {}[{}] (expert {} of {}: a slice of the 3-D stack)\n"
      "in short    {}\n"
      "reason      {}\n"
      "file        {}, {} at offset {}\n"
      "held        {}\n"
      "stack       {}\n",
      d.tensor, expert, expert, d.experts.size(), expert_words(e), expert_reason_name(e.reason), type_name(d.file_type),
      base::format_bytes(file_slice), d.file_offset + expert * file_slice, pages, plain_words(d));
}

}  // namespace skainet::placement
