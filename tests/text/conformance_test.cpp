// llama.cpp's tokenizer conformance cases (test-tokenizer-0) on the real vocabularies.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>

#include "skainet/text/text.hpp"
#include "text_test_support.hpp"

namespace skainet::text {
namespace {

using testing::read_cases;

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

// How many of llama.cpp's cases `tok` encodes to their expected ids (without BOS, special tokens not
// parsed); each other case is a failure naming it.
size_t cases_matched(const Tokenizer& tok, const std::vector<testing::VocabCase>& cases, std::string_view name) {
  size_t passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> got = tok.encode(cases[i].input, /*add_special=*/false, /*parse_special=*/false);
    if (got == cases[i].expected) {
      ++passed;
    } else {
      ADD_FAILURE() << name << " case " << i << " '" << cases[i].input << "'\n  expected:" << show(cases[i].expected)
                    << "\n  got:     " << show(got);
    }
  }
  return passed;
}

class Conformance : public ::testing::TestWithParam<const char*> {};
// The case files beside each vocabulary (llama.cpp's test-tokenizer-0), every vocabulary there.
class VocabCases : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabCases, EveryCaseMatchesLlamaCpp) {
  const std::string name = GetParam();
  const Tokenizer& tok = testing::shared_tokenizer(name);
  const std::vector<testing::VocabCase> cases = read_cases(name);
  ASSERT_EQ(cases.size(), 46u);
  const size_t passed = cases_matched(tok, cases, name);
  std::cout << "[conformance] " << name << ": " << passed << "/" << cases.size() << " cases\n";
  RecordProperty("passed", static_cast<int>(passed));
}

// Random inputs the pinned llama.cpp peer tokenized (data/gen_peer_cases.py).
TEST_P(Conformance, PeerDifferentialCases) {
  const std::string name = GetParam();
  const Tokenizer& tok = testing::shared_tokenizer(name);
  const std::vector<testing::VocabCase> cases =
      read_cases(testing::text_data() / "peer-fuzz.inp", testing::text_data() / ("peer-fuzz-" + name + ".out"));
  ASSERT_EQ(cases.size(), 300u);
  size_t passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> got = tok.encode(cases[i].input, false, false);
    if (got == cases[i].expected) {
      ++passed;
    } else {
      ADD_FAILURE() << name << " peer case " << i << "\n  expected:" << show(cases[i].expected)
                    << "\n  got:     " << show(got);
    }
  }
  std::cout << "[peer] " << name << ": " << passed << "/" << cases.size() << " cases\n";
}

// The same with BOS and special tokens parsed (the peer's llama-tokenize defaults).
TEST_P(Conformance, PeerDifferentialCasesWithSpecialTokens) {
  const std::string name = GetParam();
  const Tokenizer& tok = testing::shared_tokenizer(name);
  const std::vector<testing::VocabCase> cases = read_cases(
      testing::text_data() / "peer-fuzz-special.inp", testing::text_data() / ("peer-fuzz-special-" + name + ".out"));
  ASSERT_EQ(cases.size(), 150u);
  size_t passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> got = tok.encode(cases[i].input, true, true);
    if (got == cases[i].expected) {
      ++passed;
    } else {
      ADD_FAILURE() << name << " special case " << i << "\n  expected:" << show(cases[i].expected)
                    << "\n  got:     " << show(got);
    }
  }
  std::cout << "[peer, special] " << name << ": " << passed << "/" << cases.size() << " cases\n";
}

// Gemma 4's test vocabulary ships with the peer's llama.cpp source, not in ../shared: scripts/setup.sh
// unpacks it (scripts/peer.sh --source) and CMake passes its folder (SKAINET_PEER_VOCAB_DIR).
std::filesystem::path gemma4_path() {
  return std::filesystem::path(SKAINET_PEER_VOCAB_DIR) / "ggml-vocab-gemma-4.gguf";
}

const Tokenizer& gemma4() {
  static const Tokenizer tok = [] {
    const std::filesystem::path p = gemma4_path();
    if (!std::filesystem::exists(p)) {
      throw std::runtime_error(p.string() + " is missing: run scripts/setup.sh (it calls scripts/peer.sh --source, " +
                               "which downloads and unpacks llama.cpp's source), or configure with " +
                               "-DSKAINET_PEER_VOCAB_DIR=<llama.cpp>/models");
    }
    return Tokenizer::from_file(p);
  }();
  return tok;
}

std::vector<testing::VocabCase> gemma4_cases() {
  return read_cases(gemma4_path().string() + ".inp", gemma4_path().string() + ".out");
}

TEST(Gemma4, EveryCaseMatchesLlamaCpp) {
  const Tokenizer& tok = gemma4();
  const std::vector<testing::VocabCase> cases = gemma4_cases();
  ASSERT_EQ(cases.size(), 45u);
  const size_t passed = cases_matched(tok, cases, "gemma-4");
  std::cout << "[conformance] gemma-4: " << passed << "/" << cases.size() << " cases\n";
}

// Spaces come back from U+2581, bytes no merge reached from their <0xXX> tokens.
TEST(Gemma4, DecodeGivesTheTextBack) {
  const Tokenizer& tok = gemma4();
  std::vector<std::string> texts;
  for (const testing::VocabCase& c : gemma4_cases()) texts.push_back(c.input);
  texts.push_back("tabs\tand\r\nCRLF, emoji \xF0\x9F\xA6\x99, \xE6\x9D\xB1\xE4\xBA\xAC, \x01\x7f control bytes");
  texts.push_back("\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n");
  for (const std::string& t : texts) {
    EXPECT_EQ(tok.decode(tok.encode(t, /*add_special=*/false, /*parse_special=*/false)), t);
  }
}

TEST(Gemma4, BosAndTurnTokens) {
  const Tokenizer& tok = gemma4();
  // The file says add_bos_token; llama.cpp would add BOS for Gemma 4 even if it did not.
  EXPECT_TRUE(tok.vocab().add_bos);
  EXPECT_EQ(tok.vocab().pre, PreTokenizer::Gemma4);
  const std::vector<int32_t> ids = tok.encode("<|turn>user\nHi<turn|>", /*add_special=*/true, /*parse_special=*/true);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), tok.bos());
  EXPECT_EQ(ids[1], *tok.find("<|turn>"));
  EXPECT_EQ(ids.back(), *tok.find("<turn|>"));
  EXPECT_TRUE(tok.is_eog(*tok.find("<turn|>")));
  EXPECT_TRUE(tok.is_eog(*tok.find("<eos>")));
  EXPECT_FALSE(tok.is_eog(*tok.find("<|turn>")));
  // Not parsed, the control text is plain text.
  const std::vector<int32_t> plain = tok.encode("<turn|>", false, false);
  EXPECT_EQ(tok.decode(plain), "<turn|>");
  EXPECT_NE(plain, std::vector<int32_t>{*tok.find("<turn|>")});
  // Rendered only when asked.
  EXPECT_EQ(tok.decode(ids), "user\nHi");
  EXPECT_EQ(tok.decode(ids, {.render_special = true}), "<bos><|turn>user\nHi<turn|>");
}

std::string vocab_test_name(const ::testing::TestParamInfo<const char*>& info) {
  std::string n = info.param;
  for (char& c : n) c = (c == '-') ? '_' : c;
  return n;
}

INSTANTIATE_TEST_SUITE_P(Vocabs, VocabCases,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "deepseek-coder", "falcon", "llama-bpe",
                                           "qwen2"),
                         vocab_test_name);

// The peer's differential cases were generated for these five (data/gen_peer_cases.py).
INSTANTIATE_TEST_SUITE_P(Vocabs, Conformance,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "deepseek-coder", "falcon"), vocab_test_name);

}  // namespace
}  // namespace skainet::text
