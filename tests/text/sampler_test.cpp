#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>

#include "alloc_counter.hpp"
#include "skainet/text/text.hpp"

namespace skainet::text {
namespace {

std::vector<Candidate> by_id(const std::vector<float>& logits) {
  std::vector<Candidate> c;
  for (size_t i = 0; i < logits.size(); ++i) c.push_back({static_cast<int32_t>(i), logits[i], 0.0f});
  return c;
}

std::vector<int32_t> ids(std::span<const Candidate> c) {
  std::vector<int32_t> out;
  for (const Candidate& x : c) out.push_back(x.id);
  return out;
}

TEST(Sampling, GreedyPicksArgmaxLowestIdOnTies) {
  EXPECT_EQ(sampling::greedy(by_id({0.1f, 3.0f, -2.0f, 3.0f})), 1);
  EXPECT_EQ(sampling::greedy(by_id({-5.0f, -1.0f, -1.0f})), 1);
  Sampler s(4, {.temperature = 0.0f});
  const std::vector<float> logits{0.1f, 3.0f, -2.0f, 3.0f};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s.sample(logits), 1);
}

TEST(Sampling, TopKOneEqualsGreedy) {
  std::vector<float> logits(1000);
  Rng r(7);
  for (int round = 0; round < 20; ++round) {
    for (float& l : logits) l = static_cast<float>(r.uniform() * 10.0 - 5.0);
    Sampler s(1000, {.temperature = 1.3f, .top_k = 1, .seed = static_cast<uint64_t>(round)});
    EXPECT_EQ(s.sample(logits), sampling::greedy(by_id(logits)));
    EXPECT_EQ(s.last_candidates().size(), 1u);
  }
}

TEST(Sampling, TopKKeepsTheBestSorted) {
  std::vector<Candidate> c = by_id({1.0f, 5.0f, 3.0f, 5.0f, -1.0f});
  const size_t n = sampling::top_k(c, 3);
  EXPECT_EQ(ids(std::span(c).first(n)), (std::vector<int32_t>{1, 3, 2}));
}

TEST(Sampling, TopPKeepsTheSmallestPrefixReachingP) {
  // Probabilities 0.5, 0.25, 0.125, 0.125 (logits are their logs).
  std::vector<Candidate> c = by_id({std::log(0.5f), std::log(0.25f), std::log(0.125f), std::log(0.125f)});
  auto kept = [&](float p) {
    std::vector<Candidate> x = c;
    const size_t n = sampling::top_p(std::span(x).first(sampling::top_k(x, 0)), p);
    return ids(std::span(x).first(n));
  };
  EXPECT_EQ(kept(0.4f), (std::vector<int32_t>{0}));
  EXPECT_EQ(kept(0.5f), (std::vector<int32_t>{0}));  // reaching p exactly is enough
  EXPECT_EQ(kept(0.6f), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(kept(0.8f), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(kept(0.99f), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(kept(1.0f), (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(Sampling, MinPKeepsCandidatesAboveAFractionOfTheBest) {
  // p = 0.5, 0.25, 0.125, 0.125: min_p 0.5 keeps p >= 0.25.
  std::vector<Candidate> c = by_id({std::log(0.125f), std::log(0.5f), std::log(0.125f), std::log(0.25f)});
  auto kept = [&](float p) {
    std::vector<Candidate> x = c;
    const size_t n = sampling::min_p(std::span(x).first(sampling::top_k(x, 0)), p);
    return ids(std::span(x).first(n));
  };
  EXPECT_EQ(kept(0.5f), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(kept(0.2f), (std::vector<int32_t>{1, 3, 0, 2}));
  EXPECT_EQ(kept(0.9f), (std::vector<int32_t>{1}));
  EXPECT_EQ(kept(0.0f), (std::vector<int32_t>{1, 3, 0, 2}));
}

// OpenAI's (and llama.cpp's) frequency and presence penalties: count * frequency + presence off each
// token of the window, after the repeat penalty.
TEST(Sampling, FrequencyAndPresencePenaltiesSubtractPerCountAndOnce) {
  std::vector<Candidate> c = by_id({2.0f, -2.0f, 3.0f, 0.0f});
  std::vector<uint32_t> counts(4, 0);
  const std::vector<int32_t> last{0, 1, 0, 0, 3, -1};
  sampling::penalize(c, last, {.repeat = 2.0f, .frequency = 0.5f, .presence = 0.25f}, counts);
  EXPECT_FLOAT_EQ(c[0].logit, 2.0f / 2 - 3 * 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(c[1].logit, -2.0f * 2 - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(c[2].logit, 3.0f) << "not in the window";
  EXPECT_FLOAT_EQ(c[3].logit, 0.0f - 0.5f - 0.25f);
  EXPECT_EQ(counts, (std::vector<uint32_t>(4, 0)));

  // Through the sampler: a presence penalty moves greedy decoding off the token just produced.
  Sampler s(3, {.temperature = 0.0f, .repeat_last_n = 4, .presence_penalty = 1.5f});
  const std::vector<float> logits{3.0f, 2.0f, 1.0f};
  EXPECT_EQ(s.sample(logits), 0);
  s.accept(0);
  EXPECT_EQ(s.sample(logits), 1);  // 3 - 1.5 < 2
  EXPECT_THROW(Sampler(3, {.frequency_penalty = std::numeric_limits<float>::quiet_NaN()}), InvalidArgument);
}

TEST(Sampling, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  std::vector<Candidate> c = by_id({2.0f, -2.0f, 3.0f, 0.0f});
  std::vector<uint32_t> counts(4, 0);
  const std::vector<int32_t> last{0, 1, 0, 0, 3, 99};  // repeats count once; out-of-range ignored
  sampling::penalize(c, last, {.repeat = 2.0f}, counts);
  EXPECT_FLOAT_EQ(c[0].logit, 1.0f);
  EXPECT_FLOAT_EQ(c[1].logit, -4.0f);
  EXPECT_FLOAT_EQ(c[2].logit, 3.0f);
  EXPECT_FLOAT_EQ(c[3].logit, 0.0f);
  EXPECT_EQ(counts, (std::vector<uint32_t>(4, 0))) << "left all zeros for the next call";

  // Through the sampler: only the last repeat_last_n accepted tokens count.
  Sampler s(3, {.temperature = 0.0f, .repeat_penalty = 4.0f, .repeat_last_n = 2});
  const std::vector<float> logits{3.0f, 2.0f, 1.0f};
  EXPECT_EQ(s.sample(logits), 0);
  s.accept(0);
  EXPECT_EQ(s.sample(logits), 1);  // 3 / 4 = 0.75 < 2
  s.accept(1);
  EXPECT_EQ(s.sample(logits), 2);  // 0.75, 0.5, 1
  s.accept(2);                     // window is now {1, 2}: token 0 is free again
  EXPECT_EQ(s.sample(logits), 0);
  s.reset();
  EXPECT_EQ(s.sample(logits), 0);
}

TEST(Sampling, TemperatureScalesLogits) {
  std::vector<Candidate> c = by_id({2.0f, -1.0f});
  sampling::temperature(c, 0.5f);
  EXPECT_FLOAT_EQ(c[0].logit, 4.0f);
  EXPECT_FLOAT_EQ(c[1].logit, -2.0f);
  sampling::softmax(c);
  EXPECT_NEAR(c[0].p + c[1].p, 1.0f, 1e-6f);
  EXPECT_NEAR(c[0].p / c[1].p, std::exp(6.0f), 1e-2f * std::exp(6.0f));
}

TEST(Rng, FixedSequenceOnEveryPlatform) {
  // xoshiro256** from splitmix64(0): pinned so a platform that differs shows up here.
  Rng r(0);
  const uint64_t first = r.next();
  Rng again(0);
  EXPECT_EQ(again.next(), first);
  EXPECT_EQ(first, 0x99EC5F36CB75F2B4ull);
  Rng other(1);
  EXPECT_NE(other.next(), first);
  for (int i = 0; i < 1000; ++i) {
    const double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

std::vector<float> test_logits(int n) {
  std::vector<float> l(n);
  for (int i = 0; i < n; ++i) l[i] = std::sin(i * 0.37f) * 3.0f + (i % 7) * 0.1f;
  return l;
}

std::vector<int32_t> run(const SamplerConfig& cfg, int steps) {
  const std::vector<float> logits = test_logits(512);
  Sampler s(512, cfg);
  std::vector<int32_t> out;
  for (int i = 0; i < steps; ++i) {
    out.push_back(s.sample(logits));
    s.accept(out.back());
  }
  return out;
}

// Issue 10, defect 5: --repeat-last-n 500000000 made the sampler allocate a 1.9 GiB ring, outside the
// plan. The ring is bounded by the context the plan knows; the penalty behaves the same.
TEST(Sampler, HistoryRingIsBoundedByTheContext) {
  if (!test::allocation_counter_available()) GTEST_SKIP() << "no allocation counter under a sanitizer";
  const SamplerConfig huge{.temperature = 0.0f, .repeat_penalty = 2.0f, .repeat_last_n = 500000000};
  test::AllocWatch watch;
  Sampler s(512, huge, 256);
  const test::AllocStats stats = watch.stop();
  EXPECT_LT(stats.peak_live, 64u * 1024) << "bytes";
  // Same choices as a sampler whose look-back is exactly the context, and as llama.cpp's -1 (the context).
  SamplerConfig exact = huge;
  exact.repeat_last_n = 256;
  Sampler t(512, exact);
  SamplerConfig whole = huge;
  whole.repeat_last_n = -1;
  Sampler u(512, whole, 256);
  std::vector<float> logits(512);
  for (int i = 0; i < 512; ++i) logits[static_cast<size_t>(i)] = static_cast<float>(i % 7);
  for (int step = 0; step < 300; ++step) {
    const int32_t a = s.sample(logits), b = t.sample(logits), c = u.sample(logits);
    ASSERT_EQ(a, b) << step;
    ASSERT_EQ(c, b) << step;
    s.accept(a);
    t.accept(b);
    u.accept(c);
  }
}

TEST(Sampler, SameSeedSameSequence) {
  const SamplerConfig cfg{.temperature = 0.9f,
                          .top_k = 40,
                          .top_p = 0.95f,
                          .min_p = 0.05f,
                          .repeat_penalty = 1.1f,
                          .repeat_last_n = 16,
                          .seed = 1234};
  const std::vector<int32_t> a = run(cfg, 64);
  EXPECT_EQ(a, run(cfg, 64));
  SamplerConfig other = cfg;
  other.seed = 99;
  EXPECT_NE(a, run(other, 64));
  // Not degenerate: several different tokens were drawn.
  EXPECT_GT(std::set<int32_t>(a.begin(), a.end()).size(), 5u);
}

TEST(Sampler, DrawsFollowTheDistribution) {
  // Two candidates with p = 0.75 / 0.25: the draw frequency must be close.
  Sampler s(2, {.temperature = 1.0f, .seed = 5});
  const std::vector<float> logits{std::log(3.0f), 0.0f};
  int zeros = 0;
  for (int i = 0; i < 4000; ++i) zeros += s.sample(logits) == 0;
  EXPECT_NEAR(zeros / 4000.0, 0.75, 0.03);
}

TEST(Sampler, NoHeapAllocationPerSample) {
  if (!test::allocation_counter_available()) GTEST_SKIP() << "malloc is owned by the sanitizer in this build";
  const std::vector<float> logits = test_logits(32000);
  for (const SamplerConfig& cfg :
       {SamplerConfig{.temperature = 0.0f, .repeat_penalty = 1.2f},
        SamplerConfig{.temperature = 0.8f, .top_k = 40, .top_p = 0.9f, .min_p = 0.05f, .repeat_penalty = 1.1f},
        SamplerConfig{.temperature = 1.0f}}) {
    Sampler s(32000, cfg);
    const uint64_t before = test::allocation_count();
    for (int i = 0; i < 20; ++i) s.accept(s.sample(logits));
    EXPECT_EQ(test::allocation_count() - before, 0u);
  }
}

TEST(Sampler, SurvivesNanAndInfiniteLogits) {
  const float inf = std::numeric_limits<float>::infinity();
  Sampler s(4, {.temperature = 0.7f, .top_p = 0.9f, .seed = 3});
  const std::vector<float> masked{-inf, 1.0f, NAN, -inf};
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(masked), 1);
  const std::vector<float> all_masked{-inf, -inf, NAN, -inf};
  const int32_t id = s.sample(all_masked);
  EXPECT_GE(id, 0);
  EXPECT_LT(id, 4);
  Sampler g(3, {.temperature = 0.0f});
  const std::vector<float> nan_first{NAN, 0.5f, 0.25f};
  EXPECT_EQ(g.sample(nan_first), 1);
}

// Issue 24, finding 11: at t = 1e-40 every logit / t overflowed to ±inf and the draw was uniform.
TEST(Sampler, TinyTemperatureIsGreedy) {
  const std::vector<float> logits{0.5f, 3.0f, 2.9f, -1.0f};
  for (float t : {1e-40f, 1e-38f, 1e-30f, std::numeric_limits<float>::denorm_min()}) {
    Sampler s(4, {.temperature = t, .seed = 11});
    for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(logits), 1) << "t " << t;
  }
  // All-negative logits overflowed to -inf together, the same uniform draw.
  const std::vector<float> negative{-3.0f, -2.0f, -2.5f};
  Sampler n(3, {.temperature = 1e-40f, .seed = 2});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(n.sample(negative), 1);
  std::vector<Candidate> c = by_id(logits);
  EXPECT_TRUE(sampling::greedy_temperature(c, 0.0f));
  EXPECT_TRUE(sampling::greedy_temperature(c, -1.0f));
  EXPECT_TRUE(sampling::greedy_temperature(c, 1e-40f));
  EXPECT_FALSE(sampling::greedy_temperature(c, 1e-3f));
  EXPECT_FALSE(sampling::greedy_temperature(c, 0.8f));
  // A very negative logit overflowing to -inf is probability 0, right at any t: not a reason for greedy.
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(sampling::greedy_temperature(by_id({1.0f, -3e38f, -inf}), 0.5f));
  // A small but ordinary temperature still samples: two near-equal logits both come up.
  Sampler s(2, {.temperature = 1e-3f, .seed = 9});
  std::set<int32_t> seen;
  for (int i = 0; i < 200; ++i) seen.insert(s.sample(std::vector<float>{1.0f, 1.0f + 1e-4f}));
  EXPECT_EQ(seen.size(), 2u);
}

TEST(Sampler, RejectsBadInput) {
  EXPECT_THROW(Sampler(0, {}), InvalidArgument);
  EXPECT_THROW(Sampler(4, {.temperature = NAN}), InvalidArgument);
  EXPECT_THROW(Sampler(4, {.top_p = NAN}), InvalidArgument);
  EXPECT_THROW(Sampler(4, {.min_p = NAN}), InvalidArgument);
  EXPECT_THROW(Sampler(4, {.repeat_last_n = -1}), InvalidArgument) << "-1 is the context: none known";
  EXPECT_THROW(Sampler(4, {.repeat_last_n = -2}, 16), InvalidArgument);
  Sampler s(4, {});
  const std::vector<float> three{1, 2, 3};
  EXPECT_THROW(s.sample(three), InvalidArgument);
}

}  // namespace
}  // namespace skainet::text
