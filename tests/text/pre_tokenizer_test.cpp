// The tokenizer.ggml.pre table: every name parses and builds, and each regex list splits a few
// hand-worked strings as llama.cpp's does (the peer check, tests/peer/check_pre_tokenizers.sh,
// compares whole tokenizations against llama-tokenize).
#include <gtest/gtest.h>

#include <cctype>
#include <ostream>
#include <set>
#include <string>

#include "skainet/core/base.hpp"
#include "text/pre_tokenizer.hpp"
#include "text/regex.hpp"
#include "text/unicode.hpp"

namespace skainet::text {
namespace {

std::vector<size_t> split_lengths(PreTokenizer p, std::string_view text) {
  return PreTokenizerSplitter(p).split_lengths(unicode::decode_lenient(text));
}

TEST(PreTokenizerTable, EveryNameParsesAndCompiles) {
  std::set<std::string_view> seen;
  for (std::string_view name : pre_tokenizer_names()) {
    EXPECT_TRUE(seen.insert(name).second) << "duplicate " << name;
    const std::optional<PreTokenizerSpec> spec = find_pre_tokenizer(name);
    ASSERT_TRUE(spec) << name;
    EXPECT_NO_THROW(PreTokenizerSplitter{spec->pre}) << name;
    EXPECT_TRUE(pre_tokenizer_refusal(name).empty()) << name;
    EXPECT_EQ(parse_pre_tokenizer(pre_tokenizer_name(spec->pre)), spec->pre) << name;
  }
  EXPECT_GE(seen.size(), 80u);
}

TEST(PreTokenizerTable, FlagsFollowTheName) {
  // Same regexes, different settings (llama.cpp's llama_vocab::load).
  EXPECT_EQ(find_pre_tokenizer("dbrx")->pre, PreTokenizer::Llama3);
  EXPECT_FALSE(find_pre_tokenizer("dbrx")->ignore_merges);
  EXPECT_FALSE(find_pre_tokenizer("dbrx")->add_bos);
  EXPECT_TRUE(find_pre_tokenizer("llama-bpe")->ignore_merges);
  EXPECT_TRUE(find_pre_tokenizer("llama-bpe")->add_bos);
  EXPECT_TRUE(find_pre_tokenizer("glm4")->ignore_merges);
  EXPECT_FALSE(find_pre_tokenizer("chatglm-bpe")->ignore_merges);
  EXPECT_TRUE(find_pre_tokenizer("tekken")->add_bos);
  EXPECT_TRUE(find_pre_tokenizer("chameleon")->add_bos);
  EXPECT_FALSE(find_pre_tokenizer("chameleon")->ignore_merges);
  EXPECT_TRUE(find_pre_tokenizer("minicpm5")->ignore_merges);
  EXPECT_EQ(find_pre_tokenizer("exaone4")->pre, PreTokenizer::Gpt2);
  EXPECT_EQ(find_pre_tokenizer("grok-2")->pre, PreTokenizer::Qwen2);
  EXPECT_EQ(find_pre_tokenizer("llama4")->pre, PreTokenizer::Gpt4o);
  EXPECT_EQ(find_pre_tokenizer("roberta-bpe")->pre, PreTokenizer::Gpt2);
}

TEST(PreTokenizerTable, RefusedNamesSayWhy) {
  for (std::string_view name : {"sarvam-moe", "whitespace"}) {
    EXPECT_EQ(find_pre_tokenizer(name), std::nullopt) << name;
    EXPECT_FALSE(pre_tokenizer_refusal(name).empty()) << name;
  }
  EXPECT_TRUE(pre_tokenizer_refusal("no-such-name").empty());
}

// Gemma 4's SPM-style BPE: raw UTF-8, spaces as U+2581, BOS whatever the file says; split at newline runs.
TEST(PreTokenizerTable, Gemma4IsSpmStyle) {
  for (std::string_view name : {"gemma4", "granite-embed-multi-311m"}) {
    const std::optional<PreTokenizerSpec> spec = find_pre_tokenizer(name);
    ASSERT_TRUE(spec) << name;
    EXPECT_EQ(spec->pre, PreTokenizer::Gemma4) << name;
    EXPECT_TRUE(spec->spm_style && spec->force_bos && !spec->ignore_merges) << name;
    EXPECT_TRUE(pre_tokenizer_refusal(name).empty()) << name;
  }
  EXPECT_EQ(split_lengths(PreTokenizer::Gemma4, "a b\t c\n\n\nd\ne \n"), (std::vector<size_t>{6, 3, 1, 1, 2, 1}));
}

TEST(Regex, ZeroWidthMatchSplits) {
  // std::regex_iterator's walk: a bare lookahead ends the stretch before it.
  const std::vector<uint32_t> c = unicode::decode_lenient("1234567");
  const std::vector<size_t> whole{c.size()};
  EXPECT_EQ(Regex("(?=(\\d{3})+(?!\\d))").split(c, whole), (std::vector<size_t>{1, 3, 3}));
  // An empty match at every position splits between every code point, as std::regex does.
  EXPECT_EQ(Regex("x*").split(c, whole), (std::vector<size_t>{1, 1, 1, 1, 1, 1, 1}));
}

TEST(Regex, LongWordsNeverOverflowTheStack) {
  // gpt-4o / tekken's letter groups span one code point each: counted in a loop, any length works.
  const std::string letters(200000, 'a');
  EXPECT_EQ(split_lengths(PreTokenizer::Gpt4o, letters), (std::vector<size_t>{200000}));
  EXPECT_EQ(split_lengths(PreTokenizer::Tekken, letters), (std::vector<size_t>{200000}));
  // exaone-moe's words-joined-by-spaces group varies in width and recurses per iteration: a piece
  // past the matcher's stack budget is an error, not a crash.
  std::string words;
  for (int i = 0; i < 20000; ++i) words += "ab ";
  EXPECT_THROW(split_lengths(PreTokenizer::ExaoneMoe, words), InvalidArgument);
  EXPECT_EQ(split_lengths(PreTokenizer::ExaoneMoe, "ab ab ab"), (std::vector<size_t>{8}));
}

struct Case {
  PreTokenizer pre;
  const char* text;
  std::vector<size_t> want;  // piece lengths in code points, worked out by hand from the regexes
};

// Stable test names for ctest (the default printer dumps the struct's bytes, pointers included).
void PrintTo(const Case& c, std::ostream* os) { *os << pre_tokenizer_name(c.pre); }

class PreTokenizerHandSplits : public ::testing::TestWithParam<Case> {};

TEST_P(PreTokenizerHandSplits, Split) {
  const Case& c = GetParam();
  EXPECT_EQ(split_lengths(c.pre, c.text), c.want) << pre_tokenizer_name(c.pre) << " '" << c.text << "'";
}

INSTANTIATE_TEST_SUITE_P(
    Families, PreTokenizerHandSplits,
    ::testing::Values(
        Case{PreTokenizer::Superbpe, "1234567", {1, 3, 3}}, Case{PreTokenizer::Superbpe, "ab 12345", {3, 2, 3}},
        Case{PreTokenizer::Afmoe, "1234567", {1, 3, 3}}, Case{PreTokenizer::Afmoe, "東京abc", {2, 3}},
        Case{PreTokenizer::TinyAya, "1234567", {1, 3, 3}}, Case{PreTokenizer::Poro, "Hello, world!", {5, 1, 6, 1}},
        Case{PreTokenizer::Viking, "abc123", {3, 1, 1, 1}}, Case{PreTokenizer::Tekken, "HelloWorld", {5, 5}},
        Case{PreTokenizer::Tekken, "ABCdef", {6}}, Case{PreTokenizer::Gpt4o, "I'm HAPPY", {3, 6}},
        Case{PreTokenizer::GraniteEmbMulti, "Hello", {5}}, Case{PreTokenizer::Deepseek3, "abc123456", {3, 3, 3}},
        Case{PreTokenizer::DeepseekLlm, "Hi there", {2, 6}}, Case{PreTokenizer::Jais2, "a     b", {1, 4, 2}},
        Case{PreTokenizer::Bailingmoe, "don't", {3, 2}}, Case{PreTokenizer::SeedCoder, "12", {1, 1}},
        Case{PreTokenizer::ExaoneMoe, "hello world", {11}}, Case{PreTokenizer::Laguna, "a\n\nb", {1, 2, 1}},
        Case{PreTokenizer::Minicpm5, "12345", {3, 2}}, Case{PreTokenizer::Spark25, "12345", {1, 1, 1, 1, 1}},
        Case{PreTokenizer::Youtu, "한국어abc", {3, 3}}, Case{PreTokenizer::Qwen35, "e\xcc\x81x", {3}},
        Case{PreTokenizer::Qwen2, "e\xcc\x81x", {1, 2}},  // the mark leads the next word
        Case{PreTokenizer::Ufakzeka, "Ali'nin", {3, 4}},
        // Han runs split from other letters; the word before keeps its contraction.
        Case{PreTokenizer::KimiK2,
             "abc\xe4\xb8\xad\xe6\x96\x87"
             "def's 12345",
             {3, 2, 5, 1, 3, 2}}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string name(pre_tokenizer_name(info.param.pre));
      for (char& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name + "_" + std::to_string(info.index);
    });

}  // namespace
}  // namespace skainet::text
