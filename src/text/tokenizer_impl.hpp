// Internals shared by the tokenizer sources (private to src/text).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "skainet/text.hpp"
#include "text/pre_tokenizer.hpp"

namespace skainet::text {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
// Token text -> id. A text that appears twice maps to its last id, as in llama.cpp.
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

inline int32_t lookup(const TokenMap& map, std::string_view text) {
  auto it = map.find(text);
  return it == map.end() ? -1 : it->second;
}

// SentencePiece-style: `text` already has spaces as U+2581. Appends ids to out.
void spm_tokenize(const Vocab& vocab, const TokenMap& map, std::string_view text, std::vector<int32_t>& out);
// The token for one raw byte: "<0xXX>", else the byte itself as a token, else unk (-1 if none).
int32_t spm_byte_token(const Vocab& vocab, const TokenMap& map, uint8_t byte);

class BpeModel {
 public:
  BpeModel(const Vocab& vocab, const TokenMap& map);
  void tokenize(std::string_view text, std::vector<int32_t>& out) const;

 private:
  const Vocab& vocab_;
  const TokenMap& map_;
  PreTokenizerSplitter splitter_;
  // Merge rank by the pair's texts; key = 4-byte length of the left text, left, right.
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ranks_;
  int32_t rank(std::string_view left, std::string_view right, std::string& scratch) const;
  void tokenize_word(const std::string& word, std::vector<int32_t>& out) const;
};

}  // namespace skainet::text
