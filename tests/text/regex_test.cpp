#include <gtest/gtest.h>

#include "skainet/core/base.hpp"
#include "text/pre_tokenizer.hpp"
#include "text/regex.hpp"
#include "text/unicode.hpp"
#include "text_test_support.hpp"

namespace skainet::text {
namespace {

std::vector<uint32_t> cps(std::string_view s) { return unicode::decode_lenient(s); }

std::vector<size_t> split(std::string_view pattern, std::string_view text) {
  const std::vector<uint32_t> c = cps(text);
  const std::vector<size_t> whole{c.size()};
  return Regex(pattern).split(c, whole);
}

TEST(Unicode, CategoriesAndWhitespace) {
  using unicode::Category;
  EXPECT_EQ(unicode::category('a'), Category::Letter);
  EXPECT_EQ(unicode::category('7'), Category::Number);
  EXPECT_EQ(unicode::category('!'), Category::Punctuation);
  EXPECT_EQ(unicode::category('$'), Category::Symbol);
  EXPECT_EQ(unicode::category(0x00E9), Category::Letter);  // é
  EXPECT_EQ(unicode::category(0x0663), Category::Number);  // Arabic-Indic 3
  EXPECT_EQ(unicode::category(0x2167), Category::Number);  // Roman numeral 8 (Nl)
  EXPECT_EQ(unicode::category(0x0301), Category::Mark);
  EXPECT_EQ(unicode::category(0x3002), Category::Punctuation);
  EXPECT_EQ(unicode::category(0x1F999), Category::Symbol);
  EXPECT_EQ(unicode::category(0x11F00), Category::Mark);  // Kawi, new in Unicode 15
  EXPECT_EQ(unicode::category(0x0378), Category::Undefined);
  EXPECT_EQ(unicode::category(0x10FFFF), Category::Undefined);
  EXPECT_EQ(unicode::category(0x110000), Category::Undefined);
  EXPECT_TRUE(unicode::is_whitespace(0x3000));
  EXPECT_TRUE(unicode::is_whitespace(0x85));
  EXPECT_FALSE(unicode::is_whitespace(0x1C));
  EXPECT_FALSE(unicode::is_whitespace(0x200B));
}

TEST(Unicode, LenientDecodeAndByteAlphabet) {
  EXPECT_EQ(cps("a\xc3\xa9"), (std::vector<uint32_t>{'a', 0xE9}));
  EXPECT_EQ(cps("\xc3"), (std::vector<uint32_t>{0xFFFD}));
  EXPECT_EQ(cps("\x80z"), (std::vector<uint32_t>{0xFFFD, 'z'}));
  EXPECT_EQ(cps("\xe2\x96z"), (std::vector<uint32_t>{0xFFFD, 0xFFFD, 'z'}));
  for (int b = 0; b < 256; ++b) EXPECT_EQ(unicode::byte_from_codepoint(unicode::byte_to_codepoint(b)), b);
  EXPECT_EQ(unicode::byte_to_codepoint(' '), 0x120u);   // "Ġ"
  EXPECT_EQ(unicode::byte_to_codepoint('\n'), 0x10Au);  // "Ċ"
  EXPECT_EQ(unicode::byte_to_codepoint('a'), uint32_t('a'));
  EXPECT_EQ(unicode::byte_from_codepoint(0x400), -1);
  EXPECT_EQ(unicode::complete_prefix("ab\xf0\x9f"), 2u);
  EXPECT_EQ(unicode::complete_prefix("ab\xf0\x9f\xa6\x99"), 6u);
  EXPECT_EQ(unicode::complete_prefix("a\xc3"), 1u);
  EXPECT_EQ(unicode::complete_prefix("a\x80"), 2u);
}

TEST(Regex, EcmaScriptSemantics) {
  // Ordered alternation: the first branch that leads to a match wins, not the longest.
  EXPECT_EQ(split("a|ab", "ab"), (std::vector<size_t>{1, 1}));
  // Greedy with backtracking: \s+(?!\S) leaves the last space for " ?\p{L}+".
  EXPECT_EQ(split(" ?\\p{L}+|\\s+(?!\\S)", "a   b"), (std::vector<size_t>{1, 2, 2}));
  // \s*[\r\n]+ gives back the newline it swallowed.
  EXPECT_EQ(split("\\s*[\\r\\n]+", "  \n\nx"), (std::vector<size_t>{4, 1}));
  EXPECT_EQ(split("\\p{N}{1,3}", "1234567"), (std::vector<size_t>{3, 3, 1}));
  EXPECT_EQ(split("(?i:'s|'ll)", "'S'Ll'x"), (std::vector<size_t>{2, 3, 2}));
  EXPECT_EQ(split("[^\\r\\n\\p{L}\\p{N}]?\\p{L}+", "$abc"), (std::vector<size_t>{4}));
  EXPECT_EQ(split("[\xe4\xb8\x80-\xe9\xbe\xa5]+",
                  "ab\xe4\xb8\xad\xe6\x96\x87"
                  "c"),
            (std::vector<size_t>{2, 2, 1}));
  EXPECT_EQ(split("\\s+$", "a  "), (std::vector<size_t>{1, 2}));
  EXPECT_EQ(split("(?:ab)+", "ababa"), (std::vector<size_t>{4, 1}));
  EXPECT_EQ(split("x(?=y)", "xxy"), (std::vector<size_t>{1, 1, 1}));
}

TEST(Regex, RefusesWhatItCannotDo) {
  for (const char* bad : {"a+?", "(a", "a)", "[a", "\\p{Han}", "\\1", "(?<=a)b", "a{3,1}", "*a"}) {
    EXPECT_THROW(Regex{bad}, InvalidArgument) << bad;
  }
}

// Families without a vocabulary file here: compare the split with the `regex` module's (see
// data/gen_pretokenizer_splits.py) on llama.cpp's inputs and a few extra ones.
class PreTokenizerSplits : public ::testing::TestWithParam<std::pair<const char*, PreTokenizer>> {};

TEST_P(PreTokenizerSplits, MatchPythonRegex) {
  const auto [name, pre] = GetParam();
  std::vector<testing::VocabCase> cases = testing::read_cases("gpt-2");
  const std::string extra = testing::read_bytes(testing::text_data() / "pretok-extra.inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (size_t at = 0, m; (m = extra.find(sep, at)) != std::string::npos; at = m + sep.size()) {
    cases.push_back({extra.substr(at, m - at), {}});
  }
  std::istringstream expected(testing::read_bytes(testing::text_data() / ("pretok-" + std::string(name) + ".txt")));
  const PreTokenizerSplitter splitter(pre);
  size_t i = 0, passed = 0;
  for (std::string line; std::getline(expected, line); ++i) {
    ASSERT_LT(i, cases.size());
    std::vector<size_t> want;
    std::istringstream ls(line);
    for (size_t n; ls >> n;) want.push_back(n);
    const std::vector<size_t> got = splitter.split_lengths(cps(cases[i].input));
    EXPECT_EQ(got, want) << name << " input " << i << " '" << cases[i].input << "'";
    passed += got == want;
  }
  EXPECT_EQ(i, cases.size());
  std::cout << "[pre-tokenizer] " << name << ": " << passed << "/" << i << " splits\n";
}

INSTANTIATE_TEST_SUITE_P(Families, PreTokenizerSplits,
                         ::testing::Values(std::make_pair("llama3", PreTokenizer::Llama3),
                                           std::make_pair("qwen2", PreTokenizer::Qwen2)),
                         [](const auto& info) { return std::string(info.param.first); });

TEST(PreTokenizer, NamesMapToFamilies) {
  EXPECT_EQ(parse_pre_tokenizer("llama-bpe"), PreTokenizer::Llama3);
  EXPECT_EQ(parse_pre_tokenizer("qwen2"), PreTokenizer::Qwen2);
  EXPECT_EQ(parse_pre_tokenizer(""), PreTokenizer::Default);
  EXPECT_EQ(parse_pre_tokenizer("gpt-2"), PreTokenizer::Gpt2);
  EXPECT_EQ(parse_pre_tokenizer("nope"), std::nullopt);
  for (PreTokenizer p : {PreTokenizer::Default, PreTokenizer::Gpt2, PreTokenizer::Llama3, PreTokenizer::Qwen2,
                         PreTokenizer::DeepseekCoder, PreTokenizer::Falcon, PreTokenizer::Starcoder}) {
    EXPECT_NO_THROW(PreTokenizerSplitter{p}) << pre_tokenizer_name(p);
    EXPECT_EQ(parse_pre_tokenizer(pre_tokenizer_name(p)), p);
  }
}

}  // namespace
}  // namespace skainet::text
