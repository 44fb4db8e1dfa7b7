// The grammar fuzz target (tests/fuzz/grammar_fuzzer.cpp) replayed in the default suite under any
// compiler: its seeds (every test schema, its GBNF, hand-written grammars), then seeded mutations.
#include <gtest/gtest.h>

#include "fuzz_replay.hpp"

namespace skainet::fuzz {
int grammar_one_input(const uint8_t* data, size_t size);
std::vector<Bytes> grammar_seeds();
}  // namespace skainet::fuzz

namespace skainet::fuzz {
namespace {

TEST(GrammarFuzzReplay, MutatedGrammarsCompileAndAreFollowedOrAreRefused) {
  const std::vector<Bytes> seeds = grammar_seeds();
  ASSERT_GE(seeds.size(), 50u);
  const double s = replay(grammar_one_input, seeds, 30000, 20261206);
  RecordProperty("seconds", std::to_string(s));
}

}  // namespace
}  // namespace skainet::fuzz
