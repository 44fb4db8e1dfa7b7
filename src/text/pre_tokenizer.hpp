// BPE pre-tokenization: split text into words with llama.cpp's regex list for a tokenizer.ggml.pre.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "skainet/text.hpp"
#include "text/regex.hpp"

namespace skainet::text {

// nullopt for a name we have no regexes for.
std::optional<PreTokenizer> parse_pre_tokenizer(std::string_view name) noexcept;
// Extra settings llama.cpp ties to the name.
bool pre_tokenizer_ignores_merges(PreTokenizer p) noexcept;
bool pre_tokenizer_adds_bos(PreTokenizer p) noexcept;
std::vector<std::string_view> pre_tokenizer_patterns(PreTokenizer p);

class PreTokenizerSplitter {
 public:
  explicit PreTokenizerSplitter(PreTokenizer p);
  // Words of the text, each already mapped to GPT-2's byte alphabet (ready for merges). Invalid
  // UTF-8 turns into U+FFFD first, as in llama.cpp.
  std::vector<std::string> split(std::string_view text) const;
  // The same split as piece lengths in code points (what the tests compare).
  std::vector<size_t> split_lengths(std::span<const uint32_t> cps) const;

 private:
  std::vector<Regex> regexes_;
};

}  // namespace skainet::text
