// Token masks: the trie walk that finds a state's mask agrees with walking each token's bytes alone,
// on every real vocabulary; tokens that split a character are followed byte by byte; the sampler
// draws only allowed tokens.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>

#include "alloc_counter.hpp"
#include "skainet/text/grammar.hpp"

namespace skainet::grammar {
namespace {

std::vector<std::string> vocabulary_files() {
  std::vector<std::string> out{std::string(SKAINET_SHARED_MODELS) + "/stories260K.gguf"};
  for (const auto& e : std::filesystem::directory_iterator(std::string(SKAINET_SHARED_MODELS) + "/vocab"))
    if (e.path().extension() == ".gguf") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Strings with any character, numbers, nesting: most of the trie is walked at some step.
constexpr const char* kGrammar =
    R"(root ::= "{" ws "\"k\":" ws (string | number | "[" ws string ("," ws string)* "]") ws "}"
string ::= "\"" ([^"\\] | "\\" ["\\nt])* "\""
number ::= "-"? [0-9]+ ("." [0-9]+)?
ws ::= [ \n]{0,2}
)";

TEST(TokenMask, TrieWalkAgreesWithEachTokenAloneOnEveryVocabulary) {
  const auto grammar = std::make_shared<const Grammar>(Grammar::parse(kGrammar));
  for (const std::string& file : vocabulary_files()) {
    SCOPED_TRACE(file);
    const text::Tokenizer tok = text::Tokenizer::from_file(file);
    const auto vocab = std::make_shared<const Vocabulary>(tok);
    Matcher m(grammar, vocab);
    text::Rng rng(7);
    std::vector<text::Candidate> c(static_cast<size_t>(tok.vocab_size()));
    for (int step = 0; step < 30; ++step) {
      for (int32_t id = 0; id < tok.vocab_size(); ++id) c[static_cast<size_t>(id)] = {id, 0.0f, 0.0f};
      m.mask(c);
      std::vector<int32_t> allowed;
      int mismatches = 0;
      for (int32_t id = 0; id < tok.vocab_size(); ++id) {
        const bool in_mask = c[static_cast<size_t>(id)].logit == 0.0f;
        if (in_mask != m.allows(id) && mismatches++ < 3)
          ADD_FAILURE() << "step " << step << ": token " << id << " '" << tok.token_to_piece(id) << "' mask " << in_mask
                        << " alone " << !in_mask;
        if (in_mask && !tok.is_eog(id)) allowed.push_back(id);
      }
      if (allowed.empty()) break;
      m.accept(allowed[rng.next() % allowed.size()]);
    }
  }
}

TEST(TokenMask, ByteTokensSplittingACharacterAreFollowed) {
  const text::Tokenizer tok =
      text::Tokenizer::from_file(std::string(SKAINET_SHARED_MODELS) + "/vocab/ggml-vocab-llama-spm.gguf");
  Matcher m(std::make_shared<const Grammar>(Grammar::parse("root ::= \"\\u4e2d\" \"x\"")),
            std::make_shared<const Vocabulary>(tok));
  const auto byte = [&](const char* name) { return *tok.find(name); };  // 中 is E4 B8 AD
  EXPECT_FALSE(m.allows(byte("<0xE5>")));
  EXPECT_FALSE(m.allows(byte("<0xB8>")));
  ASSERT_TRUE(m.allows(byte("<0xE4>")));
  m.accept(byte("<0xE4>"));
  EXPECT_FALSE(m.allows(byte("<0xB9>")));
  EXPECT_FALSE(m.allows(*tok.find("x")));
  m.accept(byte("<0xB8>"));
  m.accept(byte("<0xAD>"));
  EXPECT_TRUE(m.allows(*tok.find("x")));
  EXPECT_FALSE(m.allows(tok.eos()));
  m.accept(*tok.find("x"));
  EXPECT_TRUE(m.complete());
  EXPECT_TRUE(m.allows(tok.eos()));
}

TEST(TokenMask, SamplerDrawsOnlyAllowedTokensGreedyOrNot) {
  const text::Tokenizer tok = text::Tokenizer::from_file(std::string(SKAINET_SHARED_MODELS) + "/stories260K.gguf");
  const auto vocab = std::make_shared<const Vocabulary>(tok);
  const auto grammar = std::make_shared<const Grammar>(Grammar::parse("root ::= (\"yes\" | \"no\") \"!\""));
  for (const float temperature : {0.0f, 1.0f}) {
    text::Sampler s(tok.vocab_size(), {.temperature = temperature, .seed = 3});
    s.constrain(std::make_unique<Matcher>(grammar, vocab));
    for (int run = 0; run < 5; ++run) {
      s.reset();
      std::vector<int32_t> ids;
      std::vector<float> logits(static_cast<size_t>(tok.vocab_size()));
      text::Rng rng(static_cast<uint64_t>(run));
      for (int i = 0; i < 20; ++i) {
        for (float& l : logits) l = static_cast<float>(rng.uniform() * 8.0);
        const int32_t id = s.sample(logits);
        if (tok.is_eog(id)) break;
        ids.push_back(id);
      }
      const std::string text = tok.decode(ids, {.strip_leading_space = false});
      EXPECT_TRUE(text == "yes!" || text == "no!") << "temperature " << temperature << ": '" << text << "'";
    }
  }
}

// Once the states a generation moves between have been met, a constrained sample allocates nothing:
// the transitions and masks are cached. (A new state allocates: its stacks, its mask.)
TEST(TokenMask, AStateMetAgainAllocatesNothing) {
  const text::Tokenizer tok = text::Tokenizer::from_file(std::string(SKAINET_SHARED_MODELS) + "/stories260K.gguf");
  const auto grammar = std::make_shared<const Grammar>(Grammar::parse("root ::= \"\\\"\" [a-z ]* \"\\\"\""));
  std::vector<float> logits(static_cast<size_t>(tok.vocab_size()));
  text::Rng rng(11);
  for (const float temperature : {0.0f, 0.8f}) {
    text::Sampler s(tok.vocab_size(), {.temperature = temperature, .seed = 1});
    auto matcher = std::make_unique<Matcher>(grammar, std::make_shared<const Vocabulary>(tok));
    Matcher& m = *matcher;
    s.constrain(std::move(matcher));
    s.reset();
    ASSERT_TRUE(m.accept_text("\"a"));
    // Greedy tries a few tokens per step; the state's whole mask, worked out once, meets every token.
    std::vector<text::Candidate> all(static_cast<size_t>(tok.vocab_size()));
    for (int32_t id = 0; id < tok.vocab_size(); ++id) all[static_cast<size_t>(id)] = {id, 0.0f, 0.0f};
    m.mask(all);
    uint64_t allocations = 0;
    for (int i = 0; i < 100; ++i) {
      for (float& l : logits) l = static_cast<float>(rng.uniform() * 4.0);
      for (int32_t id = 0; id < tok.vocab_size(); ++id)  // stay inside the string
        if (tok.token_to_piece(id).find('"') != std::string::npos) logits[static_cast<size_t>(id)] = -100.0f;
      const uint64_t before = test::allocation_count();
      s.sample(logits);
      allocations += test::allocation_count() - before;
    }
    EXPECT_EQ(allocations, 0u) << "temperature " << temperature;
  }
}

}  // namespace
}  // namespace skainet::grammar
