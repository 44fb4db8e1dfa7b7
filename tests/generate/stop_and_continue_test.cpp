// Stop strings (generate::StopMatcher, Options::stop_strings) and continuing a sequence whose prefix
// is already in the KV cache (Generator::continue_ids, what `skainet chat` does between turns).
#include <filesystem>

#include <gtest/gtest.h>

#include "alloc_counter.hpp"
#include "skainet/model/engine.hpp"

namespace fs = std::filesystem;
using namespace skainet;

namespace {

const fs::path kStories = fs::path(SKAINET_SHARED_MODELS) / "stories260K.gguf";

std::unique_ptr<generate::Engine> open_stories(uint32_t n_ctx = 256) {
  generate::EngineOptions o;
  o.plan.n_ctx = n_ctx;
  o.threads = 2;
  o.progress = false;
  return generate::Engine::open(kStories, o);
}

using Shown = std::pair<std::string, bool>;

// Feeds pieces through a matcher; returns what was emitted and whether a stop string appeared.
std::pair<std::string, bool> feed(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
  generate::StopMatcher m(stops);
  std::string shown;
  for (const auto& p : pieces)
    if (m.push(p, [&](std::string_view t) { shown += t; })) return {shown, true};
  shown += m.held();
  return {shown, false};
}

std::string greedy_text(generate::Engine& e, const generate::Options& options, generate::Stats* stats = nullptr) {
  std::string text;
  generate::Generator& gen = e.sequence->sample_with({.temperature = 0.0f});
  const generate::Stats s = gen.generate("Once upon a time", options, [&](std::string_view piece, int32_t) {
    text += piece;
    return true;
  });
  if (stats) *stats = s;
  return text;
}

}  // namespace

TEST(StopMatcher, FindsAStopStringSplitAcrossPiecesAndHidesIt) {
  EXPECT_EQ((feed({"User:"}, {"Hello", " Us", "er", ": hi"})), (Shown("Hello ", true)));
  EXPECT_EQ((feed({"User:"}, {"Hello", " Us", "ed", " it"})), (Shown("Hello Used it", false)));
  // Inside one piece, with text after it: only what precedes it is shown.
  EXPECT_EQ((feed({"<|im_end|>"}, {"ok<|im_end|>\nmore"})), (Shown("ok", true)));
  // The earliest of several.
  EXPECT_EQ((feed({"cd", "b"}, {"abcd"})), (Shown("a", true)));
  // A held tail that turns out not to be a stop string is shown, in order.
  EXPECT_EQ((feed({"aab"}, {"a", "a", "a", "c"})), (Shown("aaac", false)));
  EXPECT_EQ((feed({}, {"x", "y"})), (Shown("xy", false)));
}

TEST(Generate, StopStringEndsGenerationAndIsNotShown) {
  auto e = open_stories();
  const std::string full = greedy_text(*e, {.max_tokens = 128});
  const size_t at = full.find("Lily");
  ASSERT_NE(at, std::string::npos) << full;
  generate::Options options{.max_tokens = 128};
  options.stop_strings = {"Lily"};
  generate::Stats s;
  EXPECT_EQ(greedy_text(*e, options, &s), full.substr(0, at));
  EXPECT_EQ(s.stop, generate::StopReason::StopString);
  // A stop string that never appears changes nothing.
  options.stop_strings = {"zebra crossing"};
  EXPECT_EQ(greedy_text(*e, options, &s), full);
  EXPECT_EQ(s.stop, generate::StopReason::MaxTokens);
}

TEST(Generate, ContinuingFromTheCacheGivesWhatAFreshRunGives) {
  auto e = open_stories();
  generate::Generator& gen = e->sequence->sample_with({.temperature = 0.0f});
  const std::vector<int32_t> first = e->tokenizer->encode("Once upon a time", true);
  std::vector<int32_t> out;
  gen.generate_ids(first, {.max_tokens = 20}, nullptr, &out);
  // The cache now holds the prompt and every generated token but the last (sampled, never forwarded).
  std::vector<int32_t> second = first;
  second.insert(second.end(), out.begin(), out.end() - 1);
  const size_t cached = second.size();
  for (int32_t t : e->tokenizer->encode(" The dog said", false)) second.push_back(t);

  std::vector<int32_t> continued, fresh;
  const generate::Stats s =
      gen.continue_ids(second, static_cast<int64_t>(cached), {.max_tokens = 24}, nullptr, &continued);
  EXPECT_EQ(s.cached_tokens, static_cast<int32_t>(cached));
  EXPECT_EQ(s.prompt_tokens, static_cast<int32_t>(second.size() - cached)) << "only the new tokens are processed";
  gen.generate_ids(second, {.max_tokens = 24}, nullptr, &fresh);
  EXPECT_EQ(continued, fresh);
  // All of it cached: the last token is still processed, for its logits.
  const generate::Stats all = gen.continue_ids(first, static_cast<int64_t>(first.size()), {.max_tokens = 1}, nullptr);
  EXPECT_EQ(all.prompt_tokens, 1);
}

TEST(Generate, StopStringsAddNoHeapAllocationsPerToken) {
  if (!test::allocation_counter_available()) GTEST_SKIP() << "malloc is owned by the sanitizer in this build";
  auto e = open_stories();
  generate::Generator& gen = e->sequence->sample_with({.temperature = 0.0f});
  generate::Options options{.max_tokens = 0};
  options.stop_strings = {"zebra crossing", "<|im_end|>"};
  const std::vector<int32_t> prompt = e->tokenizer->encode("Once upon a time", true);
  auto count = [&](int32_t n) {
    options.max_tokens = n;
    const uint64_t before = test::allocation_count();
    gen.generate_ids(prompt, options, [](std::string_view, int32_t) { return true; });
    return test::allocation_count() - before;
  };
  count(8);  // warm
  // The per-call setup (decoder, matcher) is the same for 8 and 72 tokens: nothing per token.
  EXPECT_EQ(count(72), count(8));
}
