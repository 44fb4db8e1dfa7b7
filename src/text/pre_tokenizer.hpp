// BPE pre-tokenization: split text into words with llama.cpp's regex list for a tokenizer.ggml.pre.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "skainet/text/text.hpp"
#include "text/regex.hpp"

namespace skainet::text {

// A tokenizer.ggml.pre name: its regex list and the settings llama.cpp ties to the name (the same
// list can come with different settings: "dbrx" has llama3's regexes but merges every word).
struct PreTokenizerSpec {
  PreTokenizer pre = PreTokenizer::Default;
  bool ignore_merges = false;  // a word that is itself a token is emitted without merging
  bool add_bos = false;        // default for add_bos when the file has no tokenizer.ggml.add_bos_token
  bool spm_style = false;      // Vocab::spm_style (llama.cpp's escape_whitespaces without byte encoding)
  bool force_bos = false;      // add_bos whatever the file says
};
// nullopt for a name we have no regexes for ("" is Default).
std::optional<PreTokenizerSpec> find_pre_tokenizer(std::string_view name) noexcept;
std::optional<PreTokenizer> parse_pre_tokenizer(std::string_view name) noexcept;
// Why a name llama.cpp knows is refused here; empty for names nobody knows (and supported ones).
std::string_view pre_tokenizer_refusal(std::string_view name) noexcept;
// Every supported name, in table order.
std::vector<std::string_view> pre_tokenizer_names();
std::vector<std::string_view> pre_tokenizer_patterns(PreTokenizer p);

class PreTokenizerSplitter {
 public:
  // byte_encode: words come out in GPT-2's byte alphabet; otherwise as UTF-8 (SPM-style BPE).
  explicit PreTokenizerSplitter(PreTokenizer p, bool byte_encode = true);
  // Words of the text, each ready for merges. Invalid UTF-8 turns into U+FFFD first, as in llama.cpp.
  std::vector<std::string> split(std::string_view text) const;
  // The same split as piece lengths in code points (what the tests compare).
  std::vector<size_t> split_lengths(std::span<const uint32_t> cps) const;

 private:
  std::vector<Regex> regexes_;
  bool byte_encode_;
};

}  // namespace skainet::text
