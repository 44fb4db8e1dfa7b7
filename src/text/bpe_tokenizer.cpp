// Byte-level BPE as llama.cpp runs it: pre-tokenize into words (regexes, GPT-2 byte alphabet), then
// within each word repeatedly merge the adjacent pair with the lowest merge rank (ties: leftmost).
#include <cstring>
#include <queue>

#include "text/tokenizer_impl.hpp"
#include "text/unicode.hpp"

namespace skainet::text {

namespace {

struct Symbol {
  int32_t prev, next;
  size_t offset, n;
};

struct Bigram {
  int32_t left, right;
  int32_t rank;
  size_t size;
};

struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);  // top: lowest rank, leftmost
  }
};

void make_key(std::string& key, std::string_view left, std::string_view right) {
  const uint32_t n = static_cast<uint32_t>(left.size());
  key.assign(reinterpret_cast<const char*>(&n), sizeof n);
  key.append(left);
  key.append(right);
}

}  // namespace

BpeModel::BpeModel(const Vocab& vocab, const TokenMap& map) : vocab_(vocab), map_(map), splitter_(vocab.pre) {
  ranks_.reserve(vocab.merges.size());
  std::string key;
  for (size_t i = 0; i < vocab.merges.size(); ++i) {
    const std::string& m = vocab.merges[i];
    // Split at the first space after the first byte (a token may itself be " "), as llama.cpp does;
    // a merge without one pairs "" with "" and can never apply.
    const size_t pos = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    const std::string_view left = pos == std::string::npos ? std::string_view() : std::string_view(m).substr(0, pos);
    const std::string_view right = pos == std::string::npos ? std::string_view() : std::string_view(m).substr(pos + 1);
    make_key(key, left, right);
    ranks_.emplace(key, static_cast<int32_t>(i));  // the first of duplicate merges wins
  }
}

int32_t BpeModel::rank(std::string_view left, std::string_view right, std::string& scratch) const {
  make_key(scratch, left, right);
  auto it = ranks_.find(std::string_view(scratch));
  return it == ranks_.end() ? -1 : it->second;
}

void BpeModel::tokenize_word(const std::string& word, std::vector<int32_t>& out) const {
  const std::string_view text(word);
  if (vocab_.ignore_merges) {
    const int32_t id = lookup(map_, text);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offs = 0; offs < text.size();) {
    const size_t n = std::min(unicode::sequence_length(static_cast<uint8_t>(text[offs])), text.size() - offs);
    const int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({index - 1, offs + n == text.size() ? -1 : index + 1, offs, n});
    offs += n;
  }

  std::string scratch;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    const int32_t rk = rank(text.substr(l.offset, l.n), text.substr(r.offset, r.n), scratch);
    if (rk < 0) return;
    queue.push({left, right, rk, l.n + r.n});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[b.left];
    Symbol& r = symbols[b.right];
    // Stale when either side changed since the pair was queued. Symbols only grow rightwards from a
    // fixed offset, so equal total size means the same two texts.
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size || l.next != b.right) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int32_t i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    const std::string_view piece = text.substr(s.offset, s.n);
    const int32_t id = lookup(map_, piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {  // llama.cpp's last resort: single bytes that happen to be tokens
      const int32_t b = lookup(map_, std::string_view(&c, 1));
      if (b >= 0) out.push_back(b);
    }
  }
}

void BpeModel::tokenize(std::string_view text, std::vector<int32_t>& out) const {
  for (const std::string& word : splitter_.split(text)) tokenize_word(word, out);
}

}  // namespace skainet::text
