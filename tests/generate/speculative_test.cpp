#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "alloc_counter.hpp"
#include "skainet/model/convert.hpp"
#include "skainet/model/speculative.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using namespace skainet;

namespace {

const fs::path kStories = fs::path(SKAINET_SHARED_MODELS) / "stories260K.gguf";
constexpr uint32_t kDraftMax = 8;

// A paragraph the prompt gives twice, so the continuation repeats what the context already holds.
const std::string kParagraph =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw "
    "a big red ball. She ran to the ball and kicked it. ";

generate::EngineOptions options(uint32_t n_ctx, uint32_t draft_max) {
  generate::EngineOptions o;
  o.plan.n_ctx = n_ctx;
  o.plan.draft_max = draft_max;
  o.threads = 2;
  o.progress = false;
  return o;
}

struct Output {
  std::vector<int32_t> ids;
  generate::Stats stats;
};

// Generates from `prompt` with `drafter` (null: plain decoding) under `sampling`.
Output generate_with(generate::Engine& e, generate::Drafter* drafter, const text::SamplerConfig& sampling,
                     const std::vector<int32_t>& prompt, int32_t n) {
  generate::Generator& gen = e.sequence->sample_with(sampling);
  gen.speculate_with(drafter, kDraftMax);
  Output r;
  r.stats = gen.generate_ids(prompt, {.max_tokens = n}, nullptr, &r.ids);
  EXPECT_EQ(gen.step_stats().total_overflow_count, 0u) << "the plan did not price the verification step";
  EXPECT_EQ(e.sequence->llama.layer_stats().total_overflow_count, 0u);
  EXPECT_EQ(e.sequence->ctx.scratch_stats().growths, 0u);
  return r;
}

fs::path synth_model(const fs::path& dir, const std::string& arch, uint64_t seed) {
  convert::SynthOptions s;
  s.arch = arch;
  s.shape = *convert::find_preset("tiny");
  s.scheme = convert::parse_scheme("Q8_0");
  s.seed = seed;
  s.threads = 2;
  const fs::path file = dir / (arch + "-" + std::to_string(seed) + ".gguf");
  convert::synth(file, s);
  return file;
}

// Drafts what plain decoding gave (`plain`, the ids generated after a prompt of `prompt_size`), with
// each token at an index i where i % wrong_every == wrong_at replaced by another: drafts that are
// accepted in part, at any temperature (a seed gives plain decoding's text). wrong_every 1: never right.
class OracleDrafter final : public generate::Drafter {
 public:
  OracleDrafter(std::vector<int32_t> plain, size_t prompt_size, size_t wrong_every, size_t wrong_at)
      : plain_(std::move(plain)), prompt_size_(prompt_size), wrong_every_(wrong_every), wrong_at_(wrong_at) {}
  void draft(std::span<const int32_t> context, uint32_t max, std::vector<int32_t>& out) override {
    out.clear();
    for (size_t i = context.size() - prompt_size_; i < plain_.size() && out.size() < max; ++i)
      out.push_back(i % wrong_every_ == wrong_at_ ? (plain_[i] + 1) % 256 : plain_[i]);
  }

 private:
  std::vector<int32_t> plain_;
  size_t prompt_size_, wrong_every_, wrong_at_;
};

}  // namespace

TEST(Speculative, NgramDraftIsTheContinuationOfTheLatestEarlierOccurrence) {
  std::vector<int32_t> out;
  const std::vector<int32_t> ctx = {5, 1, 2, 9, 9, 1, 2, 3, 4, 7, 1, 2};
  generate::ngram_draft(ctx, 2, 48, 16, out);
  EXPECT_EQ(out, (std::vector<int32_t>{3, 4, 7, 1, 2})) << "the latest earlier [1 2], up to the context's end";
  generate::ngram_draft(ctx, 2, 2, 16, out);
  EXPECT_EQ(out, (std::vector<int32_t>{3, 4})) << "at most m";
  generate::ngram_draft(ctx, 2, 48, 1, out);
  EXPECT_EQ(out, (std::vector<int32_t>{3})) << "at most max";
  generate::ngram_draft(ctx, 3, 48, 16, out);
  EXPECT_EQ(out, (std::vector<int32_t>{})) << "[7 1 2] was not seen before";
  generate::ngram_draft(std::vector<int32_t>{1, 2}, 2, 48, 16, out);
  EXPECT_TRUE(out.empty()) << "a context of n tokens has no earlier occurrence";
  generate::ngram_draft(std::vector<int32_t>{4, 4, 4}, 2, 48, 16, out);
  EXPECT_EQ(out, (std::vector<int32_t>{4})) << "overlapping occurrences";
  generate::ngram_draft(ctx, 0, 48, 16, out);
  EXPECT_TRUE(out.empty());
}

// Greedy text is the text of plain decoding, with either drafter, on every family (synth models: the
// draft model is the same family with other weights, so drafts are both accepted and rejected).
TEST(Speculative, GreedyTextIsUnchangedOnEveryFamily) {
  test::TempDir dir("spec");
  for (const char* arch : {"llama", "qwen2", "qwen3", "phi3", "llama3", "gemma", "gemma2", "gemma3"}) {
    SCOPED_TRACE(arch);
    const fs::path target_file = synth_model(dir.path(), arch, 3), draft_file = synth_model(dir.path(), arch, 4);
    const generate::EngineOptions o = options(160, kDraftMax);
    auto e = generate::Engine::open(target_file, o);
    std::vector<int32_t> prompt = e->tokenizer->encode(kParagraph + kParagraph, true);
    prompt.resize(std::min<size_t>(prompt.size(), 60));
    const Output plain = generate_with(*e, nullptr, {.temperature = 0.0f}, prompt, 64);
    generate::NgramDrafter ngram(2, 48);
    const Output by_ngram = generate_with(*e, &ngram, {.temperature = 0.0f}, prompt, 64);
    EXPECT_EQ(by_ngram.ids, plain.ids);
    EXPECT_GT(by_ngram.stats.drafted_tokens + by_ngram.stats.probes, 0);
    generate::Speculation draft = generate::open_speculation(
        {.type = generate::SpecType::DraftModel, .draft_model = draft_file}, target_file, *e, o);
    const Output by_model = generate_with(*e, draft.drafter(), {.temperature = 0.0f}, prompt, 64);
    EXPECT_EQ(by_model.ids, plain.ids);
    EXPECT_GT(by_model.stats.drafted_tokens + by_model.stats.probes, 0);
    // Drafts verified and cut at every offset (a wrong token every fifth): the rejected rows' K/V are
    // overwritten before anything reads them.
    OracleDrafter oracle(plain.ids, prompt.size(), 5, 3);
    const Output by_oracle = generate_with(*e, &oracle, {.temperature = 0.0f}, prompt, 64);
    EXPECT_EQ(by_oracle.ids, plain.ids);
    EXPECT_GT(by_oracle.stats.accepted_tokens, 0);
    EXPECT_GT(by_oracle.stats.drafted_tokens, by_oracle.stats.accepted_tokens);
  }
}

// stories260K continuing a paragraph it was given twice (it does not copy it: its n-gram drafts are
// mostly wrong), and a draft model that is the model itself, always right.
TEST(Speculative, StoriesGreedyTextIsUnchangedAndDraftsAreAccepted) {
  const generate::EngineOptions o = options(256, kDraftMax);
  auto e = generate::Engine::open(kStories, o);
  const std::vector<int32_t> prompt = e->tokenizer->encode(kParagraph + kParagraph, true);
  const Output plain = generate_with(*e, nullptr, {.temperature = 0.0f}, prompt, 96);
  generate::NgramDrafter ngram(4, 48);
  const Output by_ngram = generate_with(*e, &ngram, {.temperature = 0.0f}, prompt, 96);
  EXPECT_EQ(by_ngram.ids, plain.ids);
  EXPECT_GT(by_ngram.stats.probes, 0);
  generate::Speculation self =
      generate::open_speculation({.type = generate::SpecType::DraftModel, .draft_model = kStories}, kStories, *e, o);
  const Output by_self = generate_with(*e, self.drafter(), {.temperature = 0.0f}, prompt, 96);
  EXPECT_EQ(by_self.ids, plain.ids);
  EXPECT_EQ(by_self.stats.accepted_tokens, by_self.stats.drafted_tokens) << "the model drafting for itself";
  EXPECT_LT(by_self.stats.verify_steps, 96 / 2);
}

// Above temperature 0 each row is sampled as plain decoding samples it (the same history and random
// stream, the penalty seeing exactly the accepted tokens): a seed gives plain decoding's text.
TEST(Speculative, SampledTextFollowsTheSeedAndIsPlainDecodingsText) {
  const generate::EngineOptions o = options(256, kDraftMax);
  auto e = generate::Engine::open(kStories, o);
  const std::vector<int32_t> prompt = e->tokenizer->encode(kParagraph + kParagraph, true);
  const text::SamplerConfig sampling{
      .temperature = 0.7f, .top_k = 40, .top_p = 0.95f, .repeat_penalty = 1.1f, .seed = 11};
  const Output plain = generate_with(*e, nullptr, sampling, prompt, 80);
  generate::NgramDrafter ngram(4, 48);
  const Output a = generate_with(*e, &ngram, sampling, prompt, 80), b = generate_with(*e, &ngram, sampling, prompt, 80);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.ids, plain.ids);
  EXPECT_GT(a.stats.drafted_tokens + a.stats.probes, 0);
  OracleDrafter oracle(plain.ids, prompt.size(), 4, 2);
  const Output by_oracle = generate_with(*e, &oracle, sampling, prompt, 80);
  EXPECT_EQ(by_oracle.ids, plain.ids);
  EXPECT_GT(by_oracle.stats.accepted_tokens, 0);
  EXPECT_GT(by_oracle.stats.drafted_tokens, by_oracle.stats.accepted_tokens);
  generate::Speculation self =
      generate::open_speculation({.type = generate::SpecType::DraftModel, .draft_model = kStories}, kStories, *e, o);
  EXPECT_EQ(generate_with(*e, self.drafter(), sampling, prompt, 80).ids, plain.ids)
      << "greedy drafts, sampled verification";
  for (int32_t id : a.ids) EXPECT_TRUE(id >= 0 && id < e->tokenizer->vocab_size()) << id;
  const Output other = generate_with(*e, &ngram, {.temperature = 0.7f, .top_k = 40, .seed = 12}, prompt, 80);
  EXPECT_NE(other.ids, a.ids);
}

// The back-off as data: a drafter that is never right is only probed (no verification), at pauses
// that double; one that is always right is probed once, then drafts at full length.
TEST(Speculative, ADrafterThatMissesIsProbedAtDoublingPausesAndOneThatHitsDraftsFully) {
  const generate::EngineOptions o = options(256, kDraftMax);
  auto e = generate::Engine::open(kStories, o);
  const std::vector<int32_t> prompt = e->tokenizer->encode(kParagraph + kParagraph, true);
  const Output plain = generate_with(*e, nullptr, {.temperature = 0.0f}, prompt, 96);
  OracleDrafter wrong(plain.ids, prompt.size(), 1, 0);
  const Output missed = generate_with(*e, &wrong, {.temperature = 0.0f}, prompt, 96);
  EXPECT_EQ(missed.ids, plain.ids);
  EXPECT_EQ(missed.stats.verify_steps, 0);
  EXPECT_EQ(missed.stats.probe_hits, 0);
  // Probes at decode steps 1, 3, 6, 11, 20, 37 and 70 of 95 (pauses of 1, 2, 4, ..., 32 steps).
  EXPECT_EQ(missed.stats.probes, 7);
  OracleDrafter right(plain.ids, prompt.size(), 1000, 999);
  const Output hit = generate_with(*e, &right, {.temperature = 0.0f}, prompt, 96);
  EXPECT_EQ(hit.ids, plain.ids);
  EXPECT_EQ(hit.stats.probes, 1);
  EXPECT_EQ(hit.stats.accepted_tokens, hit.stats.drafted_tokens);
  // After the probe 94 tokens remain; each verification of 8 drafted tokens yields 9: 11 of them.
  EXPECT_EQ(hit.stats.verify_steps, (95 - 1 + kDraftMax) / (kDraftMax + 1));
}

TEST(Speculative, ADraftModelWithAnotherVocabularyIsRefusedNamingBothFiles) {
  test::TempDir dir("spec-vocab");
  const fs::path other = synth_model(dir.path(), "llama", 5);
  const generate::EngineOptions o = options(128, kDraftMax);
  auto e = generate::Engine::open(kStories, o);
  try {
    generate::open_speculation({.type = generate::SpecType::DraftModel, .draft_model = other}, kStories, *e, o);
    FAIL() << "a draft vocabulary of another size was accepted";
  } catch (const InvalidArgument& err) {
    EXPECT_NE(err.message().find(other.string()), std::string::npos) << err.message();
    EXPECT_NE(err.message().find(kStories.string()), std::string::npos) << err.message();
  }
}

TEST(Speculative, AnUnpricedDraftLengthIsRefused) {
  auto e = generate::Engine::open(kStories, options(128, 4));
  EXPECT_EQ(e->sequence->plan.verify_rows, 5u);
  generate::NgramDrafter ngram(2, 48);
  generate::Generator& gen = e->sequence->sample_with({.temperature = 0.0f});
  EXPECT_THROW(gen.speculate_with(&ngram, 5), InvalidArgument);
  EXPECT_NO_THROW(gen.speculate_with(&ngram, 4));
  EXPECT_THROW(generate::open_speculation({.type = generate::SpecType::NgramSimple, .draft_max = 0}, kStories, *e,
                                          options(128, 4)),
               InvalidArgument);
}

// Drafting and verifying allocate nothing per step: a longer generation makes no more allocations.
TEST(Speculative, StepsMakeNoHeapAllocations) {
  if (!test::allocation_counter_available()) GTEST_SKIP() << "malloc is owned by the sanitizer in this build";
  const generate::EngineOptions o = options(256, kDraftMax);
  auto e = generate::Engine::open(kStories, o);
  const std::vector<int32_t> prompt = e->tokenizer->encode(kParagraph + kParagraph, true);
  generate::Speculation self =
      generate::open_speculation({.type = generate::SpecType::DraftModel, .draft_model = kStories}, kStories, *e, o);
  generate::NgramDrafter ngram(4, 48);
  for (generate::Drafter* drafter : {static_cast<generate::Drafter*>(&ngram), self.drafter()}) {
    generate::Generator& gen = e->sequence->sample_with({.temperature = 0.0f});
    gen.speculate_with(drafter, kDraftMax);
    int64_t drafted = 0;
    auto count = [&](int32_t n) {
      const uint64_t before = test::allocation_count();
      drafted = gen.generate_ids(prompt, {.max_tokens = n}, nullptr).drafted_tokens;
      return test::allocation_count() - before;
    };
    count(96);  // warm: records, thread pools
    const uint64_t short_run = count(48), long_run = count(96);
    EXPECT_GT(drafted, 0);
    EXPECT_LE(long_run, short_run) << "allocations grow with the tokens generated";
  }
}
