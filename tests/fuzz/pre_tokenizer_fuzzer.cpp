// Fuzz target: the BPE pre-tokenizer (llama.cpp's regex lists run by text::Regex) on arbitrary text.
// The first byte picks the pre-tokenizer; the rest is the text. The split must tile the text (piece
// lengths in code points, each non-empty, summing to the text's length) and give one word per
// piece. With the first byte's top bit set the rest is instead compiled as a pattern (never matched:
// the engine backtracks and is only given llama.cpp's fixed patterns), where InvalidArgument is the
// documented answer to a pattern it does not take.
#include <numeric>
#include <string>
#include <vector>

#include "fuzz_target.hpp"
#include "text/pre_tokenizer.hpp"
#include "text/regex.hpp"
#include "text/unicode.hpp"

namespace skainet::fuzz {
namespace {

// Every regex list (the enum is dense, Default first).
constexpr size_t kKinds = static_cast<size_t>(text::PreTokenizer::KimiK2) + 1;

const std::vector<text::PreTokenizerSplitter>& splitters() {
  static const std::vector<text::PreTokenizerSplitter> all = [] {
    std::vector<text::PreTokenizerSplitter> v;
    for (size_t i = 0; i < kKinds; ++i) v.emplace_back(static_cast<text::PreTokenizer>(i));
    return v;
  }();
  return all;
}

}  // namespace

int pre_tokenizer_one_input(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input = as_text(data + 1, size - 1);
  if (data[0] & 0x80) {
    try {
      const text::Regex re(input);
    } catch (const InvalidArgument&) {
    }
    return 0;
  }
  const text::PreTokenizerSplitter& splitter = splitters()[data[0] % kKinds];
  try {
    const std::vector<uint32_t> cps = text::unicode::decode_lenient(input);
    const std::vector<size_t> pieces = splitter.split_lengths(cps);
    for (size_t n : pieces)
      if (n == 0) fail("pre_tokenizer_fuzzer", "an empty piece");
    if (std::accumulate(pieces.begin(), pieces.end(), size_t{0}) != cps.size())
      fail("pre_tokenizer_fuzzer", "the pieces do not tile the text");
    const std::vector<std::string> words = splitter.split(input);
    if (words.size() != pieces.size()) fail("pre_tokenizer_fuzzer", "split and split_lengths disagree");
  } catch (const Error&) {
  }
  return 0;
}

std::vector<Bytes> pre_tokenizer_seeds() {
  const std::string_view texts[] = {
      "Hello world, it's 2024! I'm   here\n\n\tyou're ok?",
      "3333333333 12.5 +-*/ 'll 've 're 's 't 'm 'd",
      "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97 \xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xf0\x9f\x98\x80\xf0\x9f\x98\x81 a\xcc\x81",
      "\xff\xfe\x80 \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \r\n \xc2\xa0\xe3\x80\x80",
      "    indented\n        code();\n",
  };
  const std::string_view patterns[] = {
      "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+",
      "[\\p{P}\\$\\+<=>\\^~\\|`]+|[0-9][0-9][0-9]|(?:a|b)*c{2,}d?^$[^a-z\\d\\W]",
  };
  std::vector<Bytes> seeds;
  for (size_t k = 0; k < kKinds; ++k)
    for (std::string_view t : texts) {
      Bytes s{static_cast<uint8_t>(k + kKinds * (seeds.size() % 4))};  // stays below 0x80
      s.insert(s.end(), t.begin(), t.end());
      seeds.push_back(std::move(s));
    }
  for (std::string_view p : patterns) {
    Bytes s{0x80};
    s.insert(s.end(), p.begin(), p.end());
    seeds.push_back(std::move(s));
  }
  return seeds;
}

}  // namespace skainet::fuzz

SKAINET_FUZZ_ENTRY(skainet::fuzz::pre_tokenizer_one_input, skainet::fuzz::pre_tokenizer_seeds)
