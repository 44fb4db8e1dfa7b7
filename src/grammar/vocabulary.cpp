// The vocabulary's token bytes as a trie in preorder: a node's subtree is the nodes up to its
// subtree_end, so a walk that finds a prefix refused skips every token that begins with it at once.
#include <algorithm>
#include <numeric>

#include "skainet/text/grammar.hpp"

namespace skainet::grammar {

Vocabulary::Vocabulary(const text::Tokenizer& tokenizer, std::span<const int32_t> shown) {
  const int32_t n = tokenizer.vocab_size();
  pieces_.resize(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    const bool show = std::find(shown.begin(), shown.end(), id) != shown.end();
    if (tokenizer.is_eog(id))
      eog_.push_back(id);
    else
      pieces_[static_cast<size_t>(id)] = tokenizer.token_to_piece(id, show);  // "" for control and unknown
  }
  for (int32_t id = 0; id < n; ++id)
    if (!pieces_[static_cast<size_t>(id)].empty()) ids_.push_back(id);
  std::sort(ids_.begin(), ids_.end(), [&](int32_t a, int32_t b) {
    return pieces_[static_cast<size_t>(a)] < pieces_[static_cast<size_t>(b)] ||
           (pieces_[static_cast<size_t>(a)] == pieces_[static_cast<size_t>(b)] && a < b);
  });

  std::vector<uint32_t> path;  // open nodes, one per byte of the previous piece
  const auto close_to = [&](size_t depth) {
    for (; path.size() > depth; path.pop_back()) nodes_[path.back()].subtree_end = static_cast<uint32_t>(nodes_.size());
  };
  std::string_view previous;
  for (size_t k = 0; k < ids_.size(); ++k) {
    const std::string_view piece = pieces_[static_cast<size_t>(ids_[k])];
    if (piece == previous) {  // the same bytes as the token before: the same node
      nodes_[path.back()].tokens_end = static_cast<uint32_t>(k + 1);
      continue;
    }
    const size_t common = static_cast<size_t>(
        std::mismatch(piece.begin(), piece.end(), previous.begin(), previous.end()).first - piece.begin());
    close_to(common);
    for (size_t d = common; d < piece.size(); ++d) {
      path.push_back(static_cast<uint32_t>(nodes_.size()));
      nodes_.push_back({static_cast<uint8_t>(piece[d]), 0, 0, 0});
    }
    nodes_[path.back()].tokens_begin = static_cast<uint32_t>(k);
    nodes_[path.back()].tokens_end = static_cast<uint32_t>(k + 1);
    previous = piece;
  }
  close_to(0);
}

}  // namespace skainet::grammar
