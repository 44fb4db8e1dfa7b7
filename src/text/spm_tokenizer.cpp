// llama.cpp's SentencePiece (BPE-by-score) algorithm: start from UTF-8 characters, repeatedly merge
// the adjacent pair whose concatenation is the highest-scoring token (ties: leftmost), and spell
// whatever is left that is not a token as byte tokens.
#include <queue>

#include "text/tokenizer_impl.hpp"
#include "text/unicode.hpp"

namespace skainet::text {

namespace {

struct Symbol {
  int32_t prev, next;
  size_t offset, n;  // bytes of the text; n == 0 once merged away
};

struct Bigram {
  int32_t left, right;
  float score;
  size_t size;
};

struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);  // top: best score, leftmost
  }
};

}  // namespace

int32_t spm_byte_token(const Vocab& vocab, const TokenMap& map, uint8_t byte) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const char name[6] = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
  int32_t id = lookup(map, std::string_view(name, 6));
  if (id < 0) id = lookup(map, std::string_view(reinterpret_cast<const char*>(&byte), 1));
  return id >= 0 ? id : vocab.unk;
}

void spm_tokenize(const Vocab& vocab, const TokenMap& map, std::string_view text, std::vector<int32_t>& out) {
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offs = 0; offs < text.size();) {
    const size_t n = std::min(unicode::sequence_length(static_cast<uint8_t>(text[offs])), text.size() - offs);
    const int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({index - 1, offs + n == text.size() ? -1 : index + 1, offs, n});
    offs += n;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    const std::string_view joined = text.substr(l.offset, l.n + r.n);
    const int32_t id = lookup(map, joined);
    if (id < 0) return;
    queue.push({left, right, vocab.scores[id], joined.size()});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[b.left];
    Symbol& r = symbols[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // stale: one side merged since
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  // Every merged symbol is a token by construction; a lone character may not be.
  for (int32_t i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    const std::string_view piece = text.substr(s.offset, s.n);
    const int32_t id = lookup(map, piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      const int32_t b = spm_byte_token(vocab, map, static_cast<uint8_t>(c));
      if (b >= 0) out.push_back(b);
    }
  }
}

}  // namespace skainet::text
