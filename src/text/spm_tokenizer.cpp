// llama.cpp's SentencePiece (BPE-by-score) algorithm: start from UTF-8 characters, repeatedly merge
// the adjacent pair whose concatenation is the highest-scoring token (ties: leftmost), and spell
// whatever is left that is not a token as byte tokens.
#include "text/merge_queue.hpp"
#include "text/tokenizer_impl.hpp"

namespace skainet::text {

int32_t byte_token(const TokenMap& map, uint8_t byte) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const char name[6] = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
  return lookup(map, std::string_view(name, 6));
}

int32_t spm_byte_token(const Vocab& vocab, const TokenMap& map, uint8_t byte) {
  int32_t id = byte_token(map, byte);
  if (id < 0) id = lookup(map, std::string_view(reinterpret_cast<const char*>(&byte), 1));
  return id >= 0 ? id : vocab.unk;
}

void spm_tokenize(const Vocab& vocab, const TokenMap& map, std::string_view text, std::vector<int32_t>& out) {
  // Pieces are contiguous, so a pair's text is the left piece extended over the right one.
  auto score = [&](std::string_view left, std::string_view right) -> std::optional<float> {
    const int32_t id = lookup(map, std::string_view(left.data(), left.size() + right.size()));
    if (id < 0) return std::nullopt;
    return vocab.scores[id];
  };
  const std::vector<MergeSymbol> symbols = merge_pairs<float>(text, score);

  // Every merged symbol is a token by construction; a lone character may not be.
  for_each_piece(text, symbols, [&](std::string_view piece) {
    const int32_t id = lookup(map, piece);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
    for (char c : piece) {
      const int32_t b = spm_byte_token(vocab, map, static_cast<uint8_t>(c));
      if (b >= 0) out.push_back(b);
    }
  });
}

}  // namespace skainet::text
