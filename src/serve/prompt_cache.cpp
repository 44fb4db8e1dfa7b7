// The prompt cache: prefixes saved from slots beyond the slots themselves (llama-server's --cache-ram).
// A handful of entries, each a conversation's keys and values (tens of MiB at most): a linear scan per
// request costs nothing beside the copy it saves, so no index.
#include <algorithm>

#include "skainet/app/serve.hpp"

namespace skainet::serve {

void PromptCache::put(generate::SavedPrefix saved) {
  if (saved.tokens.empty() || saved.bytes() > limit_) return;
  const std::span<const int32_t> tokens = saved.tokens;
  for (size_t i = entries_.size(); i-- > 0;) {
    const std::span<const int32_t> held = entries_[i].saved.tokens;
    const size_t common = generate::common_prefix(held, tokens);
    if (common == tokens.size()) {  // held already (the same tokens, or more of them)
      entries_[i].used = ++clock_;
      return;
    }
    if (common == held.size()) take(i);  // the new prefix holds this one whole
  }
  while (bytes_ + saved.bytes() > limit_) {
    const auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                         [](const Entry& a, const Entry& b) { return a.used < b.used; });
    take(static_cast<size_t>(oldest - entries_.begin()));
  }
  bytes_ += saved.bytes();
  entries_.push_back({std::move(saved), ++clock_});
}

std::optional<PromptCache::Match> PromptCache::best(std::span<const int32_t> prompt) const {
  std::optional<Match> best;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const size_t reusable = generate::reusable_prefix(entries_[i].saved.tokens, prompt);
    if (reusable > 0 && (!best || reusable > best->reusable ||
                         (reusable == best->reusable && entries_[i].used > entries_[best->entry].used)))
      best = Match{i, reusable};
  }
  return best;
}

generate::SavedPrefix PromptCache::take(size_t entry) {
  generate::SavedPrefix saved = std::move(entries_.at(entry).saved);
  bytes_ -= saved.bytes();
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(entry));
  return saved;
}

}  // namespace skainet::serve
