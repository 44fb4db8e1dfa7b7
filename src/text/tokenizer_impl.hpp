// Internals shared by the tokenizer sources (private to src/text).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "skainet/core/base.hpp"
#include "skainet/text/text.hpp"
#include "text/pre_tokenizer.hpp"

namespace skainet::text {

// Token text -> id. A text that appears twice maps to its last id, as in llama.cpp.
using TokenMap = base::StringMap<int32_t>;

inline int32_t lookup(const TokenMap& map, std::string_view text) {
  auto it = map.find(text);
  return it == map.end() ? -1 : it->second;
}

constexpr std::string_view kSpmSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's visible space

// The "<0xXX>" token of a byte, -1 if none.
int32_t byte_token(const TokenMap& map, uint8_t byte);

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
  base::StringMap<int32_t> ranks_;
  int32_t rank(std::string_view left, std::string_view right, std::string& scratch) const;
  void tokenize_word(const std::string& word, std::vector<int32_t>& out) const;
};

}  // namespace skainet::text
