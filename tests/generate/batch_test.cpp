// Continuous batching (generate::Batch, model::Transformer's batched forward): a batch computes for
// each sequence what it would compute alone, and its steps allocate nothing.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <gtest/gtest.h>

#include "alloc_counter.hpp"
#include "skainet/compute/kernel_ops.hpp"
#include "skainet/model/batch.hpp"
#include "skainet/model/convert.hpp"
#include "skainet/model/engine.hpp"
#include "skainet/model/speculative.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using namespace skainet;

namespace {

const fs::path kStories = fs::path(SKAINET_SHARED_MODELS) / "stories260K.gguf";

// stories260K (llama, trained) and a synth model of another family: gemma2 has a tied output, post
// norms, GeGLU, soft caps and sliding-window layers (a small window, so positions pass it).
fs::path model_file(const std::string& name, const test::TempDir& dir) {
  if (name == "stories260K") return kStories;
  convert::SynthOptions s;
  s.arch = "gemma2";
  s.shape = *convert::find_preset("tiny");
  s.shape.sliding_window = 8;
  s.scheme = convert::parse_scheme("Q8_0");
  s.seed = 3;
  s.threads = 2;
  s.bigram = true;
  const fs::path file = dir.path() / "gemma2.gguf";
  if (!fs::exists(file)) convert::synth(file, s);
  return file;
}

std::unique_ptr<generate::Engine> open(const fs::path& file, uint32_t slots, uint32_t chunk, bool sequence,
                                       uint32_t draft_max = 0) {
  generate::EngineOptions o;
  o.plan.n_ctx = 96;
  o.plan.draft_max = draft_max;
  o.plan.slots = slots;
  o.plan.prefill_chunk = chunk;
  o.threads = 2;
  o.progress = false;
  o.sequence = sequence;
  return generate::Engine::open(file, o);
}

std::vector<int32_t> ids(size_t n, int32_t seed) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(1 + (seed * 37 + i * 11) % 250);
  return v;
}

float max_abs_diff(const float* a, const float* b, size_t n) {
  float d = 0;
  for (size_t i = 0; i < n; ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

// The largest |batched - alone| logit difference over both steps, on the kernels of `table`.
float batched_vs_alone(generate::Engine& e, const kernels::KernelTable& table) {
  const arch::ModelShape& shape = *e.plan.model;
  const plan::BatchPlan bp = *e.plan.batched();
  model::Transformer llama(shape, model::TransformerWeights::bind(e.loaded, shape),
                           std::max(bp.layer_bytes, e.plan.sequence()->layer_bytes));
  std::vector<std::unique_ptr<load::KvCacheStore>> alone, batched;
  for (int i = 0; i < 4; ++i) {
    alone.push_back(std::make_unique<load::KvCacheStore>(e.scope, *e.plan.kv));
    batched.push_back(std::make_unique<load::KvCacheStore>(e.scope, *e.plan.kv));
  }
  memory::ExecutionContext ctx(2, table);
  memory::ForwardScope step({.slab_bytes = 4 * bp.step_bytes});
  const std::array<int64_t, 4> cached = {7, 0, 20, 3};
  for (size_t i = 0; i < 4; ++i) {
    if (cached[i] == 0) continue;
    const std::vector<int32_t> prefix = ids(static_cast<size_t>(cached[i]), static_cast<int32_t>(i));
    for (auto* kv : {alone[i].get(), batched[i].get()}) {
      const model::BatchEntry entry{kv, 0, cached[i]};
      ctx.step(step, [&] { llama.forward(ctx, prefix, std::span(&entry, 1)); });
    }
  }
  const size_t vocab = shape.vocab;
  std::array<int64_t, 4> pos = cached;
  float worst = 0;
  for (const std::array<int64_t, 4> rows : {std::array<int64_t, 4>{1, 3, 1, 5}, std::array<int64_t, 4>{1, 1, 1, 1}})
    for (const model::Logits which : {model::Logits::Last, model::Logits::All}) {
      if (which == model::Logits::All && rows[1] == 1) continue;
      std::vector<int32_t> tokens;
      std::vector<model::BatchEntry> entries;
      for (size_t i = 0; i < 4; ++i) {
        const std::vector<int32_t> t = ids(static_cast<size_t>(rows[i]), static_cast<int32_t>(pos[i] + 5 * i));
        tokens.insert(tokens.end(), t.begin(), t.end());
        entries.push_back({batched[i].get(), pos[i], rows[i]});
      }
      ctx.step(step, [&] {
        const Tensor all = llama.forward(ctx, tokens, entries, which);
        int64_t row = 0;
        for (size_t i = 0; i < 4; ++i) {
          const model::BatchEntry entry{alone[i].get(), pos[i], rows[i]};
          const Tensor one = llama.forward(ctx, std::span(tokens).subspan(static_cast<size_t>(row), rows[i]),
                                           std::span(&entry, 1), which);
          const int64_t first = which == model::Logits::All ? row : static_cast<int64_t>(i);
          ASSERT_EQ(one.dim(0), which == model::Logits::All ? rows[i] : 1);
          const size_t n = static_cast<size_t>(one.dim(0)) * vocab;
          const float d = max_abs_diff(all.data<float>() + first * vocab, one.data<float>(), n);
          worst = std::max(worst, d);
          EXPECT_LT(d, 1e-4f) << "sequence " << i << " at " << pos[i] << ", " << rows[i] << " rows";
          row += rows[i];
        }
      });
      if (which == model::Logits::Last)
        for (size_t i = 0; i < 4; ++i) pos[i] += rows[i];
    }
  return worst;
}

class BatchFamilies : public ::testing::TestWithParam<std::string> {};

}  // namespace

// Four sequences at different positions, each bringing a different number of rows (decodes and
// prompt chunks), run through one batched pass and each through the same pass alone, on two copies
// of their caches; twice, so the second step also reads what the batch wrote into the caches.
// Exactness: the reference kernels compute each row on its own, so there the batch is bit for bit
// the sequence alone; the SIMD matmuls pick their path by row count (one-row dots for a lone decode,
// tiles for a batch's rows), which sum in another order, so there they agree within float tolerance.
TEST_P(BatchFamilies, BatchedLogitsEqualEachSequenceAlone) {
  test::TempDir dir("batch");
  auto e = open(model_file(GetParam(), dir), 4, 8, false);
  EXPECT_EQ(batched_vs_alone(*e, kernels::reference_table()), 0.0f) << "the reference kernels are row-independent";
  const float best = batched_vs_alone(*e, kernels::best_table());
  EXPECT_LT(best, 1e-4f);
  std::printf("largest |batched - alone| logit difference on the best kernels: %g\n", static_cast<double>(best));
}

// The greedy tokens of each sequence are those it gets alone, with prompts of different lengths
// split into chunks that join running decodes, different max_tokens, and a fifth sequence taking the
// slot of the first to finish.
TEST_P(BatchFamilies, GreedyTokensOfFourBatchedEqualEachAlone) {
  test::TempDir dir("batch");
  auto e = open(model_file(GetParam(), dir), 4, 4, true);
  const std::vector<std::vector<int32_t>> prompts = {
      e->tokenizer->encode("Once upon a time", true), e->tokenizer->encode("The little dog ran to the park and", true),
      e->tokenizer->encode("Lily", true), e->tokenizer->encode("One day, a big bird", true),
      e->tokenizer->encode("Tom and Sue were friends. They liked to", true)};
  const std::vector<int32_t> max_tokens = {30, 9, 24, 17, 20};
  std::vector<std::vector<int32_t>> expected(prompts.size()), got(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i)
    e->sequence->sample_with({.temperature = 0.0f})
        .generate_ids(prompts[i], {.max_tokens = max_tokens[i]}, nullptr, &expected[i]);

  generate::Batch batch(e->plan, e->loaded, *e->tokenizer, 2);
  EXPECT_EQ(batch.plan().rows, 4u + 3u);
  std::vector<std::unique_ptr<generate::Sequence>> seqs;
  std::vector<size_t> request_of_slot(4);
  for (size_t i = 0; i < 5; ++i) {
    seqs.push_back(e->new_sequence(1));
    seqs.back()->sample_with({.temperature = 0.0f});
  }
  for (size_t i = 0; i < 4; ++i) request_of_slot[batch.add(*seqs[i], prompts[i], {.max_tokens = max_tokens[i]})] = i;
  EXPECT_THROW(batch.add(*seqs[4], prompts[4], {}), InvalidArgument) << "four slots, all busy";
  bool fifth_added = false;
  while (batch.active()) {
    for (const generate::Batch::Sampled& t : batch.step()) got[request_of_slot[t.slot]].push_back(t.token);
    for (uint32_t s = 0; s < 4 && !fifth_added; ++s)
      if (!batch.slot(s).active) {
        request_of_slot[batch.add(*seqs[4], prompts[4], {.max_tokens = max_tokens[4]})] = 4;
        fifth_added = true;
      }
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_GE(expected[i].size(), 9u) << "sequence " << i << " ended early: pick other prompts";
    EXPECT_EQ(got[i], expected[i]) << "sequence " << i;
  }
  EXPECT_TRUE(fifth_added);
  EXPECT_EQ(batch.step_stats().total_overflow_count, 0u) << "the plan's batch step slab was too small";
  EXPECT_EQ(batch.layer_stats().total_overflow_count, 0u) << "the plan's batch layer slab was too small";
  EXPECT_EQ(batch.context().scratch_stats().growths, 0u) << "the plan's batch scratch was too small";
}

INSTANTIATE_TEST_SUITE_P(Generate, BatchFamilies, ::testing::Values("stories260K", "gemma2"));

// A full step of the batch (its rows, one entry per sequence) draws exactly the step slab the plan
// prices for it.
TEST(Batch, FullStepUsesThePlannedStepSlabExactly) {
  auto e = open(kStories, 4, 8, false);
  const plan::BatchPlan bp = *e->plan.batched();
  model::Transformer llama(*e->plan.model, model::TransformerWeights::bind(e->loaded, *e->plan.model), bp.layer_bytes);
  std::vector<std::unique_ptr<load::KvCacheStore>> kv;
  std::vector<model::BatchEntry> entries;
  for (int64_t i = 0; i < 4; ++i) {
    kv.push_back(std::make_unique<load::KvCacheStore>(e->scope, *e->plan.kv));
    entries.push_back({kv.back().get(), 0, i == 0 ? int64_t{bp.rows} - 3 : 1});
  }
  memory::ExecutionContext ctx(1);
  memory::ForwardScope step({.slab_bytes = bp.step_bytes});
  const std::vector<int32_t> tokens = ids(bp.rows, 1);
  ctx.step(step, [&] {
    llama.forward(ctx, tokens, entries);
    EXPECT_EQ(step.stats().demand, bp.step_bytes);
  });
  EXPECT_LE(llama.layer_stats().peak, bp.layer_bytes);
  EXPECT_EQ(llama.layer_stats().total_overflow_count, 0u);
}

TEST(Batch, MalformedBatchesAreRefusedByName) {
  auto e = open(kStories, 2, 8, false);
  model::Transformer llama(*e->plan.model, model::TransformerWeights::bind(e->loaded, *e->plan.model), 1 << 20);
  load::KvCacheStore a(e->scope, *e->plan.kv), b(e->scope, *e->plan.kv);
  memory::ExecutionContext ctx(1);
  memory::ForwardScope step({.slab_bytes = 1 << 20});
  const std::vector<int32_t> tokens = {1, 2, 3};
  auto refused = [&](std::vector<model::BatchEntry> entries, std::string_view what) {
    try {
      ctx.step(step, [&] { llama.forward(ctx, tokens, entries); });
      ADD_FAILURE() << "accepted: " << what;
    } catch (const InvalidArgument& err) {
      EXPECT_NE(err.message().find(what), std::string::npos) << err.message();
    }
  };
  refused({{&a, 0, 2}, {&a, 0, 1}}, "batch entries 0 and 1 share one KV cache");
  refused({{&a, 0, 2}, {&b, 0, 2}}, "the batch's entries have 4 rows, the tokens 3");
  refused({{&a, 0, 3}, {nullptr, 0, 0}}, "batch entry 1: no KV cache");
  refused({{&a, 0, 1}, {&b, 95, 2}}, "batch entry 1: context full");
  EXPECT_THROW(llama.n_ctx(), InvalidArgument);
  EXPECT_THROW(ctx.step(step, [&] { llama.forward(ctx, tokens, 0); }), InvalidArgument) << "bound to no cache";
}

// Four sequences decoding together, sampling with every filter: no heap allocation per step, counted
// as the single-sequence decode test counts it.
TEST(Batch, BatchedStepsOfFourSequencesMakeNoHeapAllocations) {
  if (!test::allocation_counter_available()) GTEST_SKIP() << "malloc is owned by the sanitizer in this build";
  auto e = open(kStories, 4, 8, false);
  generate::Batch batch(e->plan, e->loaded, *e->tokenizer, 2);
  std::vector<std::unique_ptr<generate::Sequence>> seqs;
  const std::vector<int32_t> prompt = e->tokenizer->encode("Once upon a time", true);
  for (uint64_t i = 0; i < 4; ++i) {
    seqs.push_back(e->new_sequence(1));
    seqs.back()->sample_with({.temperature = 0.8f, .top_k = 40, .top_p = 0.9f, .repeat_penalty = 1.1f, .seed = i});
    // Half of them ask for log-probabilities: computing them allocates nothing either.
    batch.add(*seqs.back(), prompt, {.max_tokens = -1, .stop_at_eos = false, .logprobs = i % 2 ? 20 : -1});
  }
  for (int i = 0; i < 6; ++i) batch.step();  // warm: prompts, the thread pool
  const uint64_t before = test::allocation_count();
  size_t sampled = 0;
  for (int i = 0; i < 32; ++i) sampled += batch.step().size();
  EXPECT_EQ(test::allocation_count() - before, 0u) << "heap allocations in 32 batched steps of 4 sequences";
  EXPECT_EQ(sampled, 4u * 32u);
  EXPECT_EQ(batch.step_stats().total_overflow_count, 0u);
  EXPECT_EQ(batch.layer_stats().total_overflow_count, 0u);
}

// Log-probabilities: the log-softmax of the raw logits at the sampled token and at the best N, best
// first, ties to the lower id, N clamped to kMaxTopLogprobs; in a batch, what the greedy token's is.
TEST(Batch, LogProbabilitiesAreTheLogSoftmaxAndItsBest) {
  std::vector<float> logits(100);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i) * 1.7f) * 8.0f;
  logits[41] = logits[7] = 9.5f;  // a tie for the best
  double sum = 0;
  for (const float l : logits) sum += std::exp(static_cast<double>(l) - 9.5);
  auto log_softmax = [&](size_t i) { return static_cast<double>(logits[i]) - 9.5 - std::log(sum); };
  generate::TokenLogprobs out;
  generate::log_probabilities(logits, 3, 5, out);
  EXPECT_EQ(out.sampled.token, 3);
  EXPECT_NEAR(out.sampled.logprob, log_softmax(3), 1e-5);
  ASSERT_EQ(out.n_top, 5);
  std::vector<size_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  for (size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(out.top[k].token, static_cast<int32_t>(order[k])) << k;
    EXPECT_NEAR(out.top[k].logprob, log_softmax(order[k]), 1e-5) << k;
  }
  EXPECT_EQ(out.top[0].token, 7) << "ties: the lower id first";
  generate::log_probabilities(logits, 3, 0, out);
  EXPECT_EQ(out.n_top, 0);
  generate::log_probabilities(logits, 3, 1000, out);
  EXPECT_EQ(out.n_top, generate::kMaxTopLogprobs);

  auto e = open(kStories, 1, 8, false);
  generate::Batch batch(e->plan, e->loaded, *e->tokenizer, 2);
  auto seq = e->new_sequence(1);
  seq->sample_with({.temperature = 0.0f});
  const std::vector<int32_t> prompt = e->tokenizer->encode("Once upon a time", true);  // the batch reads it
  batch.add(*seq, prompt, {.max_tokens = 4, .logprobs = 3});
  size_t seen = 0;
  while (batch.active())
    for (const generate::Batch::Sampled& t : batch.step()) {
      ASSERT_TRUE(t.has_logprobs);
      EXPECT_EQ(t.logprobs.n_top, 3);
      EXPECT_EQ(t.logprobs.top[0].token, t.token) << "greedy: the best token is the one sampled";
      EXPECT_EQ(t.logprobs.top[0].logprob, t.logprobs.sampled.logprob);
      EXPECT_LE(t.logprobs.sampled.logprob, 0.0f);
      ++seen;
    }
  EXPECT_EQ(seen, 4u);
}

// Speculative decoding in a batch: three sequences drafting (n-grams of a prompt that repeats itself,
// and a draft model that is the model itself, so most drafts are accepted) beside one that does not,
// greedy and sampled with a seed, give the tokens each gives alone without drafts; drafts were run and
// accepted, and the steps stay within the plan's slabs. Sampled tokens are compared only on the
// reference kernels, where a batch's rows are bit for bit each sequence alone (BatchFamilies): on a
// SIMD table they agree within 1e-4, and a seeded draw that lands between two tokens' cumulative
// probabilities may pick the neighbour (seen on the AVX-512 table built by clang: token 280 for 279).
// tests/CMakeLists.txt runs this test again with SKAINET_ISA=reference for that half.
TEST(Batch, SpeculatingSequencesGiveThePlainTokens) {
  auto e = open(kStories, 4, 8, true, 6);
  const std::string story = "Once upon a time, there was a little girl named Lily. She loved to play outside. ";
  const std::vector<std::vector<int32_t>> prompts = {e->tokenizer->encode(story + story + "Once upon", true),
                                                     e->tokenizer->encode("The little dog ran to the park and", true),
                                                     e->tokenizer->encode("Lily", true),
                                                     e->tokenizer->encode("One day, a big bird", true)};
  generate::NgramDrafter ngram(3, 16);
  const std::unique_ptr<generate::Sequence> draft_seq = e->new_sequence(1);
  generate::ModelDrafter self(*draft_seq);
  const std::array<generate::Drafter*, 4> drafters = {&ngram, &self, nullptr, &ngram};
  for (const text::SamplerConfig& sampling :
       {text::SamplerConfig{.temperature = 0.0f}, text::SamplerConfig{.temperature = 0.9f, .seed = 5}}) {
    SCOPED_TRACE(sampling.temperature);
    if (sampling.temperature > 0.0f && kernels::best_level() != kernels::IsaLevel::Reference) continue;
    std::vector<std::vector<int32_t>> expected(prompts.size()), got(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i)
      e->sequence->sample_with(sampling).generate_ids(prompts[i], {.max_tokens = 40, .stop_at_eos = false}, nullptr,
                                                      &expected[i]);
    generate::Batch batch(e->plan, e->loaded, *e->tokenizer, 2);
    batch.speculate(6);
    std::vector<std::unique_ptr<generate::Sequence>> seqs;
    std::array<size_t, 4> request_of_slot{};
    for (size_t i = 0; i < prompts.size(); ++i) {
      seqs.push_back(e->new_sequence(1, generate::SequenceParts::KvCache));
      seqs.back()->sample_with(sampling);
      request_of_slot[batch.add(*seqs.back(), prompts[i], {.max_tokens = 40, .stop_at_eos = false},
                                generate::PrefixReuse::Reuse, drafters[i])] = i;
    }
    while (batch.active())
      for (const generate::Batch::Sampled& t : batch.step()) got[request_of_slot[t.slot]].push_back(t.token);
    int64_t drafted = 0, accepted = 0;
    for (uint32_t s = 0; s < 4; ++s) {
      drafted += batch.slot(s).drafted;
      accepted += batch.slot(s).accepted;
    }
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], expected[i]) << "sequence " << i;
    EXPECT_GT(drafted, 0);
    EXPECT_GT(accepted, 0);
    EXPECT_EQ(batch.step_stats().total_overflow_count, 0u) << "the plan's batch step slab was too small";
    EXPECT_EQ(batch.layer_stats().total_overflow_count, 0u) << "the plan's batch layer slab was too small";
  }
  generate::Batch plain(open(kStories, 4, 8, false)->plan, e->loaded, *e->tokenizer, 1);
  EXPECT_THROW(plain.speculate(6), InvalidArgument) << "a plan without drafts priced";
}

namespace {

// A constraint that lets everything through for `good` tokens, then cannot go on (as a grammar that
// allows no token of the vocabulary at some point).
class FailsAfter final : public text::TokenConstraint {
 public:
  explicit FailsAfter(int good) : good_(good) {}
  void mask(std::span<text::Candidate>) override { check(); }
  bool allows(int32_t) override {
    check();
    return true;
  }
  void accept(int32_t) override { ++seen_; }
  void reset() override { seen_ = 0; }

 private:
  void check() const {
    if (seen_ >= good_) throw InvalidArgument("no token can continue the text here");
  }
  int good_, seen_ = 0;
};

}  // namespace

// A sampler that throws ends its own slot (Failed, with why) and no other: the batch's other sequence
// gives the tokens it gives alone.
TEST(Batch, ASamplerThatFailsEndsOnlyItsSlot) {
  auto e = open(kStories, 2, 4, true);
  const std::vector<int32_t> prompt = e->tokenizer->encode("Once upon a time", true);
  std::vector<int32_t> expected;
  e->sequence->sample_with({.temperature = 0.0f}).generate_ids(prompt, {.max_tokens = 12}, nullptr, &expected);

  generate::Batch batch(e->plan, e->loaded, *e->tokenizer, 2);
  auto failing = e->new_sequence(1), plain = e->new_sequence(1);
  failing->sample_with({.temperature = 0.0f});
  failing->sampler.constrain(std::make_unique<FailsAfter>(3));
  plain->sample_with({.temperature = 0.0f});
  const uint32_t f = batch.add(*failing, prompt, {.max_tokens = 12});
  const uint32_t p = batch.add(*plain, prompt, {.max_tokens = 12});
  std::vector<int32_t> got, failed;
  while (batch.active())
    for (const generate::Batch::Sampled& t : batch.step()) (t.slot == p ? got : failed).push_back(t.token);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(failed.size(), 3u);
  EXPECT_EQ(batch.slot(f).stop, generate::StopReason::Failed);
  EXPECT_EQ(batch.slot(f).error, "no token can continue the text here");
}
