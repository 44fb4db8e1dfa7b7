#include "text/pre_tokenizer.hpp"

#include <array>
#include <initializer_list>

#include "text/unicode.hpp"

namespace skainet::text {

namespace {

// The patterns are llama.cpp's (llama-vocab.cpp, llm_tokenizer_bpe), themselves taken from each
// model's tokenizer.json. Several run in turn: each splits the pieces the previous one left.
constexpr std::string_view kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr std::string_view kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

}  // namespace

std::vector<std::string_view> pre_tokenizer_patterns(PreTokenizer p) {
  switch (p) {
    case PreTokenizer::Gpt2: return {kGpt2};
    case PreTokenizer::Llama3: return {kLlama3};
    case PreTokenizer::Qwen2: return {kQwen2};
    case PreTokenizer::DeepseekCoder:
      return {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+", "\\p{N}"};
    case PreTokenizer::Falcon: return {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"};
    case PreTokenizer::Starcoder: return {"\\p{N}", kGpt2};
    case PreTokenizer::Default: break;
  }
  return {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
}

namespace {

struct Alias {
  std::string_view name;
  PreTokenizer pre;
};
constexpr Alias kAliases[] = {
    {"default", PreTokenizer::Default},
    {"gpt-2", PreTokenizer::Gpt2}, {"phi-2", PreTokenizer::Gpt2}, {"jina-es", PreTokenizer::Gpt2},
    {"jina-de", PreTokenizer::Gpt2}, {"jina-v2-es", PreTokenizer::Gpt2}, {"jina-v2-de", PreTokenizer::Gpt2},
    {"gigachat", PreTokenizer::Gpt2}, {"mpt", PreTokenizer::Gpt2}, {"olmo", PreTokenizer::Gpt2},
    {"jais", PreTokenizer::Gpt2}, {"trillion", PreTokenizer::Gpt2},
    {"llama3", PreTokenizer::Llama3}, {"llama-v3", PreTokenizer::Llama3}, {"llama-bpe", PreTokenizer::Llama3},
    {"falcon3", PreTokenizer::Llama3}, {"falcon-h1", PreTokenizer::Llama3}, {"pixtral", PreTokenizer::Llama3},
    {"dbrx", PreTokenizer::Llama3}, {"smaug-bpe", PreTokenizer::Llama3},
    {"qwen2", PreTokenizer::Qwen2}, {"stablelm2", PreTokenizer::Qwen2}, {"hunyuan", PreTokenizer::Qwen2},
    {"deepseek-coder", PreTokenizer::DeepseekCoder},
    {"falcon", PreTokenizer::Falcon},
    {"starcoder", PreTokenizer::Starcoder}, {"refact", PreTokenizer::Starcoder},
    {"command-r", PreTokenizer::Starcoder}, {"smollm", PreTokenizer::Starcoder},
    {"codeshell", PreTokenizer::Starcoder}, {"exaone", PreTokenizer::Starcoder},
    {"minerva-7b", PreTokenizer::Starcoder},
};

}  // namespace

std::string_view pre_tokenizer_name(PreTokenizer p) noexcept {
  switch (p) {
    case PreTokenizer::Default: return "default";
    case PreTokenizer::Gpt2: return "gpt-2";
    case PreTokenizer::Llama3: return "llama-bpe";
    case PreTokenizer::Qwen2: return "qwen2";
    case PreTokenizer::DeepseekCoder: return "deepseek-coder";
    case PreTokenizer::Falcon: return "falcon";
    case PreTokenizer::Starcoder: return "starcoder";
  }
  return "?";
}

std::optional<PreTokenizer> parse_pre_tokenizer(std::string_view name) noexcept {
  if (name.empty()) return PreTokenizer::Default;
  for (const Alias& a : kAliases) {
    if (a.name == name) return a.pre;
  }
  return std::nullopt;
}

bool pre_tokenizer_ignores_merges(PreTokenizer p) noexcept { return p == PreTokenizer::Llama3; }
bool pre_tokenizer_adds_bos(PreTokenizer p) noexcept { return p == PreTokenizer::Llama3; }

PreTokenizerSplitter::PreTokenizerSplitter(PreTokenizer p) {
  for (std::string_view pat : pre_tokenizer_patterns(p)) regexes_.emplace_back(pat);
}

std::vector<size_t> PreTokenizerSplitter::split_lengths(std::span<const uint32_t> cps) const {
  std::vector<size_t> pieces{cps.size()};
  for (const Regex& re : regexes_) pieces = re.split(cps, pieces);
  return pieces;
}

std::vector<std::string> PreTokenizerSplitter::split(std::string_view text) const {
  const std::vector<uint32_t> cps = unicode::decode_lenient(text);
  const std::vector<size_t> pieces = split_lengths(cps);

  std::vector<std::string> words;
  words.reserve(pieces.size());
  size_t at = 0;
  std::string utf8;
  for (size_t len : pieces) {
    utf8.clear();
    for (size_t i = at; i < at + len; ++i) unicode::append_utf8(utf8, cps[i]);
    std::string word;
    word.reserve(utf8.size() * 2);
    for (unsigned char b : utf8) unicode::append_utf8(word, unicode::byte_to_codepoint(b));
    words.push_back(std::move(word));
    at += len;
  }
  return words;
}

}  // namespace skainet::text
