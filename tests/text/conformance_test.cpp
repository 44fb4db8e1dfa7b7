// llama.cpp's tokenizer conformance cases (test-tokenizer-0) on the real vocabularies.
#include <gtest/gtest.h>

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

class Conformance : public ::testing::TestWithParam<const char*> {};
// The case files beside each vocabulary (llama.cpp's test-tokenizer-0), every vocabulary there.
class VocabCases : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabCases, EveryCaseMatchesLlamaCpp) {
  const std::string name = GetParam();
  const Tokenizer& tok = testing::shared_tokenizer(name);
  const std::vector<testing::VocabCase> cases = read_cases(name);
  ASSERT_EQ(cases.size(), 46u);
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
