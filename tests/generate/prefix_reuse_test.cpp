// Prefix reuse on one sequence (Sequence::generate, what `chat` does between turns and each `serve`
// slot does between requests): only what follows the longest cached prefix of a prompt is computed,
// and the tokens are those of computing the whole prompt afresh — positions and the sampler's history
// (a repeat penalty, which reads it, is on in every case) included.
#include <filesystem>

#include <gtest/gtest.h>

#include "alloc_counter.hpp"
#include "skainet/model/engine.hpp"

namespace fs = std::filesystem;
using namespace skainet;

namespace {

const fs::path kStories = fs::path(SKAINET_SHARED_MODELS) / "stories260K.gguf";
constexpr text::SamplerConfig kGreedyPenalized{.temperature = 0.0f, .repeat_penalty = 1.3f, .repeat_last_n = 64};
constexpr std::string_view kStory =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
    "dog. One day, she saw a big red ball under a tree. She ran to get it, but the ball rolled away. Lily "
    "was sad, but her mom said: let us look for it together. They looked behind the bench and under the slide";

class PrefixReuse : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    generate::EngineOptions o;
    o.plan.n_ctx = 512;
    o.threads = 2;
    o.progress = false;
    engine_ = generate::Engine::open(kStories, o).release();
  }
  static void TearDownTestSuite() { delete std::exchange(engine_, nullptr); }

  generate::Sequence& seq() { return *engine_->sequence; }
  std::vector<int32_t> encode(std::string_view text, bool bos = true) { return engine_->tokenizer->encode(text, bos); }

  // Greedy tokens after `prompt`, with or without taking its prefix from the cache.
  std::vector<int32_t> run(std::span<const int32_t> prompt, generate::PrefixReuse reuse,
                           generate::Stats* stats = nullptr, int32_t n = 24) {
    seq().sample_with(kGreedyPenalized);
    std::vector<int32_t> out;
    const generate::Stats s = seq().generate(prompt, {.max_tokens = n}, nullptr, reuse, &out);
    if (stats) *stats = s;
    return out;
  }

  static generate::Engine* engine_;
};

generate::Engine* PrefixReuse::engine_ = nullptr;

std::vector<int32_t> joined(std::span<const int32_t> a, std::span<const int32_t> b) {
  std::vector<int32_t> v(a.begin(), a.end());
  v.insert(v.end(), b.begin(), b.end());
  return v;
}

TEST_F(PrefixReuse, ASharedPrefixIsNotComputedAgainAndTheTextIsTheSame) {
  const std::vector<int32_t> story = encode(kStory);
  ASSERT_GT(story.size(), 100u);
  const std::vector<int32_t> first(story.begin(), story.begin() + 90);
  const std::vector<int32_t> second = joined(first, encode(" and the dog barked at a cat", false));

  run(first, generate::PrefixReuse::Recompute);
  generate::Stats s;
  const std::vector<int32_t> reused = run(second, generate::PrefixReuse::Reuse, &s);
  EXPECT_EQ(s.cached_tokens, 90);
  EXPECT_EQ(s.prompt_tokens, static_cast<int32_t>(second.size()) - 90) << "only the new tokens are computed";

  generate::Stats fresh_stats;
  const std::vector<int32_t> fresh = run(second, generate::PrefixReuse::Recompute, &fresh_stats);
  EXPECT_EQ(fresh_stats.cached_tokens, 0);
  EXPECT_EQ(reused, fresh);
}

TEST_F(PrefixReuse, TheCacheHoldsThePromptAndEveryForwardedToken) {
  const std::vector<int32_t> prompt = encode("The cat sat on the mat");
  const std::vector<int32_t> out = run(prompt, generate::PrefixReuse::Recompute, nullptr, 12);
  ASSERT_EQ(out.size(), 12u);
  // The last generated token was sampled but never forwarded: its cell holds nothing yet.
  const std::vector<int32_t> want = joined(prompt, std::span(out).first(11));
  EXPECT_EQ(std::vector<int32_t>(seq().cached().begin(), seq().cached().end()), want);

  // A conversation's next turn: everything cached is reused.
  const std::vector<int32_t> next = joined(want, encode(" Then", false));
  EXPECT_EQ(seq().reusable(next), want.size());
  generate::Stats s;
  const std::vector<int32_t> continued = run(next, generate::PrefixReuse::Reuse, &s);
  EXPECT_EQ(s.cached_tokens, static_cast<int32_t>(want.size()));
  EXPECT_EQ(continued, run(next, generate::PrefixReuse::Recompute));
}

TEST_F(PrefixReuse, AShorterPromptThatIsAPrefixOfTheCacheRunsOnlyItsLastToken) {
  const std::vector<int32_t> story = encode(kStory);
  run(story, generate::PrefixReuse::Recompute, nullptr, 4);
  const std::vector<int32_t> shorter(story.begin(), story.begin() + 40);
  EXPECT_EQ(seq().reusable(shorter), 39u);
  generate::Stats s;
  const std::vector<int32_t> reused = run(shorter, generate::PrefixReuse::Reuse, &s);
  EXPECT_EQ(s.cached_tokens, 39);
  EXPECT_EQ(s.prompt_tokens, 1) << "the last prompt token always runs, for its logits";
  EXPECT_EQ(reused, run(shorter, generate::PrefixReuse::Recompute));
}

TEST_F(PrefixReuse, APromptThatDivergesAtTokenZeroReusesNothing) {
  run(encode(kStory), generate::PrefixReuse::Recompute, nullptr, 4);
  const std::vector<int32_t> other = encode("Tom had a big blue kite", /*bos=*/false);
  ASSERT_NE(other.front(), seq().cached().front());
  generate::Stats s;
  const std::vector<int32_t> out = run(other, generate::PrefixReuse::Reuse, &s);
  EXPECT_EQ(s.cached_tokens, 0);
  EXPECT_EQ(s.prompt_tokens, static_cast<int32_t>(other.size()));
  EXPECT_EQ(out, run(other, generate::PrefixReuse::Recompute));
}

TEST_F(PrefixReuse, AForwardPassAroundTheSequenceForgetsWhatTheCacheHolds) {
  const std::vector<int32_t> prompt = encode("Lily wanted to play");
  run(prompt, generate::PrefixReuse::Recompute, nullptr, 4);
  ASSERT_FALSE(seq().cached().empty());
  // The generator used directly overwrites cells Sequence::generate did not record.
  seq().generator.prefill(encode("Tom ran", false), 1);
  EXPECT_TRUE(seq().cached().empty());
  EXPECT_EQ(seq().reusable(prompt), 0u);
  generate::Stats s;
  const std::vector<int32_t> out = run(prompt, generate::PrefixReuse::Reuse, &s);
  EXPECT_EQ(s.cached_tokens, 0);
  EXPECT_EQ(out, run(prompt, generate::PrefixReuse::Recompute));
}

TEST_F(PrefixReuse, ARefusedPromptKeepsTheCachedPrefix) {
  const std::vector<int32_t> prompt = encode("Once upon a time");
  run(prompt, generate::PrefixReuse::Recompute, nullptr, 4);
  std::vector<int32_t> too_long = prompt;
  too_long.resize(600, prompt.back());  // past the context of 512
  seq().sample_with(kGreedyPenalized);
  EXPECT_THROW(seq().generate(too_long, {.max_tokens = 4}, nullptr), InvalidArgument);
  EXPECT_EQ(seq().reusable(prompt), prompt.size() - 1) << "nothing ran: the prefix is still there";
}

TEST_F(PrefixReuse, RecordingTheCacheAddsNoHeapAllocationsPerToken) {
  if (!test::allocation_counter_available()) GTEST_SKIP() << "malloc is owned by the sanitizer in this build";
  const std::vector<int32_t> prompt = encode("Once upon a time");
  seq().sample_with(kGreedyPenalized);
  auto count = [&](int32_t n) {
    const uint64_t before = test::allocation_count();
    seq().generate(prompt, {.max_tokens = n}, nullptr, generate::PrefixReuse::Recompute);
    return test::allocation_count() - before;
  };
  count(8);  // warm
  EXPECT_EQ(count(72), count(8));
}

}  // namespace
