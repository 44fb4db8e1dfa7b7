#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "alloc_counter.hpp"
#include "skainet/convert.hpp"
#include "skainet/engine.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using namespace skainet;

namespace {

const fs::path kStories = fs::path(SKAINET_SHARED_MODELS) / "stories260K.gguf";

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::unique_ptr<generate::Engine> open_stories(uint32_t ctx = 256, const char* profile = "default") {
  generate::EngineOptions o;
  o.profile = profile;
  o.plan.ctx = ctx;
  o.threads = 2;
  o.progress = false;
  return generate::Engine::open(kStories, o);
}

}  // namespace

// Expected text: llama.cpp's llama-simple, greedy, 128 tokens (command and provenance in docs/peer.md).
TEST(Generate, StoriesGreedyTextEqualsLlamaCpp) {
  const std::string expected = read_file(fs::path(SKAINET_SOURCE_DIR) / "tests/peer/data/stories260K-greedy-128.txt");
  ASSERT_FALSE(expected.empty());
  for (const char* profile : {"default", "in-memory"}) {
    auto e = open_stories(256, profile);
    text::Sampler greedy(e->tokenizer->vocab_size(), {.temperature = 0.0f});
    generate::Generator gen = e->generator(greedy);
    std::string text;
    const generate::Stats s = gen.generate("Once upon a time", {.max_tokens = 128}, [&](std::string_view piece, int32_t) {
      text += piece;
      return true;
    });
    EXPECT_EQ(text, expected) << profile;
    EXPECT_EQ(s.prompt_tokens, 5);
    EXPECT_EQ(s.generated_tokens, 128);
    EXPECT_EQ(s.stop, generate::StopReason::MaxTokens);
    EXPECT_EQ(s.overflow_count, 0u) << "the plan's slabs were too small";
  }
}

TEST(Generate, PrefillInChunksGivesTheSameTokens) {
  auto e = open_stories();
  text::Sampler greedy(e->tokenizer->vocab_size(), {.temperature = 0.0f});
  const std::vector<int32_t> prompt = e->tokenizer->encode("Once upon a time, there was a little girl", true);
  std::vector<int32_t> whole, chunked;
  generate::Generator one(*e->llama, *e->tokenizer, greedy, *e->ctx, {.step_slab_bytes = e->step_slab_bytes(), .prefill_chunk = 64});
  one.generate_ids(prompt, {.max_tokens = 16}, nullptr, &whole);
  generate::Generator three(*e->llama, *e->tokenizer, greedy, *e->ctx, {.step_slab_bytes = e->step_slab_bytes(), .prefill_chunk = 3});
  three.generate_ids(prompt, {.max_tokens = 16}, nullptr, &chunked);
  EXPECT_EQ(whole, chunked);
}

TEST(Generate, SeededSamplingIsReproducible) {
  auto e = open_stories();
  auto run = [&](uint64_t seed) {
    text::Sampler s(e->tokenizer->vocab_size(), {.temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .seed = seed});
    std::vector<int32_t> ids;
    e->generator(s).generate_ids(e->tokenizer->encode("Once upon a time", true), {.max_tokens = 32}, nullptr, &ids);
    return ids;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(Generate, StopsWhenTheContextIsFull) {
  auto e = open_stories(16);
  text::Sampler greedy(e->tokenizer->vocab_size(), {.temperature = 0.0f});
  const generate::Stats s = e->generator(greedy).generate("Once upon a time", {.max_tokens = 100}, nullptr);
  EXPECT_EQ(s.stop, generate::StopReason::ContextFull);
  EXPECT_EQ(s.prompt_tokens + s.generated_tokens, 17) << "16 cells, and the last token is sampled, not stored";
  EXPECT_THROW(e->generator(greedy).generate(std::string(200, 'a'), {}, nullptr), InvalidArgument);
}

TEST(Generate, DecodeStepsMakeNoHeapAllocationsInSteadyState) {
  if (!test::allocation_counter_available()) GTEST_SKIP() << "malloc is owned by the sanitizer in this build";
  auto e = open_stories();
  text::Sampler sampler(e->tokenizer->vocab_size(), {.temperature = 0.8f, .top_k = 40, .top_p = 0.9f, .repeat_penalty = 1.1f});
  generate::Generator gen = e->generator(sampler);
  const std::vector<int32_t> prompt = e->tokenizer->encode("Once upon a time", true);
  int32_t tok = gen.prefill(prompt, 0);
  int64_t pos = static_cast<int64_t>(prompt.size());
  for (int i = 0; i < 4; ++i) tok = gen.decode_step(tok, pos++);  // warm: records, thread pool
  const uint64_t before = test::allocation_count();
  for (int i = 0; i < 64; ++i) {
    sampler.accept(tok);
    tok = gen.decode_step(tok, pos++);
  }
  EXPECT_EQ(test::allocation_count() - before, 0u) << "heap allocations in 64 decode steps";
  EXPECT_EQ(gen.step_stats().total_overflow_count, 0u);
}

// `synth --bigram` plants a successor per token (convert::BigramPlant) strong enough that greedy
// decoding follows it whatever the weight type and architecture (qwen2: biases, NeoX RoPE): the property the peer logits tests rely on to compare
// top-1s against llama.cpp on a synthetic model (docs/benchmarks.md).
TEST(Generate, SynthBigramModelFollowsItsPlantedSuccessors) {
  test::TempDir dir("bigram");
  for (const char* arch : {"llama", "qwen2"})
  for (const char* type : {"F32", "Q8_0", "Q4_0", "Q2_K", "Q3_K_M", "IQ4_NL", "IQ4_XS"}) {
    SCOPED_TRACE(std::string(arch) + " " + type);
    convert::SynthOptions s;
    s.arch = arch;
    s.shape = *convert::find_preset("tiny");
    s.scheme = convert::parse_scheme(type);
    s.seed = 3;
    s.threads = 2;
    s.bigram = true;
    const fs::path file = dir.path() / (std::string(arch) + "-" + type + ".gguf");
    convert::synth(file, s);
    const convert::BigramPlant plant = convert::bigram_plant(s.shape);

    generate::EngineOptions o;
    o.plan.ctx = 64;
    o.threads = 2;
    o.progress = false;
    auto e = generate::Engine::open(file, o);
    text::Sampler greedy(e->tokenizer->vocab_size(), {.temperature = 0.0f});
    const std::vector<int32_t> prompt = e->tokenizer->encode("Once upon a time", true);
    std::vector<int32_t> ids;
    e->generator(greedy).generate_ids(prompt, {.max_tokens = 24}, nullptr, &ids);
    ASSERT_GE(ids.size(), 8u) << "the chain reached end-of-sequence early; pick another seed";
    int32_t previous = prompt.back();
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(ids[i], static_cast<int32_t>(plant.successor(static_cast<uint64_t>(previous)))) << "step " << i;
      previous = ids[i];
    }
  }
}
