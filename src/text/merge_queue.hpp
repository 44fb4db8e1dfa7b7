// The merge loop BPE and SentencePiece share (private to src/text): split text into UTF-8
// characters, then repeatedly join the adjacent pair the model ranks best (ties: leftmost) until no
// adjacent pair is ranked. The two models differ only in how a pair is ranked.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

#include "text/unicode.hpp"

namespace skainet::text {

// One piece of the text being merged; a symbol only grows rightwards from a fixed offset.
struct MergeSymbol {
  int32_t prev, next;  // live neighbours, -1 at either end
  size_t offset, n;    // bytes of the text; n == 0 once merged away
};

// `rank(left, right)` returns std::optional<Priority>: empty when the pair never merges, otherwise
// higher merges first (BPE passes its negated merge rank, SentencePiece the joined token's score).
// Returns the symbols, live ones linked from index 0 in text order.
template <class Priority, class Rank>
std::vector<MergeSymbol> merge_pairs(std::string_view text, Rank rank) {
  std::vector<MergeSymbol> symbols;
  symbols.reserve(text.size());
  for (size_t offs = 0; offs < text.size();) {
    const size_t n = std::min(unicode::sequence_length(static_cast<uint8_t>(text[offs])), text.size() - offs);
    const int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({index - 1, offs + n == text.size() ? -1 : index + 1, offs, n});
    offs += n;
  }

  struct Pair {
    int32_t left, right;
    Priority priority;
    size_t size;
  };
  auto after = [](const Pair& a, const Pair& b) {  // the queue's top: best priority, then leftmost
    return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
  };
  std::priority_queue<Pair, std::vector<Pair>, decltype(after)> queue(after);
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const MergeSymbol& l = symbols[left];
    const MergeSymbol& r = symbols[right];
    const std::optional<Priority> p = rank(text.substr(l.offset, l.n), text.substr(r.offset, r.n));
    if (p) queue.push({left, right, *p, l.n + r.n});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Pair b = queue.top();
    queue.pop();
    MergeSymbol& l = symbols[b.left];
    MergeSymbol& r = symbols[b.right];
    // Stale when either side changed since the pair was queued. Symbols only grow rightwards from a
    // fixed offset, so two live symbols of the queued total size hold the same two texts; the
    // neighbour check follows from that, and stays as a cheap guard of the linking.
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size || l.next != b.right) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  return symbols;
}

// Calls piece(text) for each symbol merge_pairs left, in text order.
template <class Piece>
void for_each_piece(std::string_view text, const std::vector<MergeSymbol>& symbols, Piece piece) {
  for (int32_t i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next)
    piece(text.substr(symbols[i].offset, symbols[i].n));
}

}  // namespace skainet::text
