// A model whose matmul weights are repacked to a kernel-feed order at load (the default profile on a
// machine whose kernels read one) predicts the same greedy tokens as the same file held in file
// order, teacher-forced along the file-order run: stories260K quantized to Q8_0 and Q4_0 (its 172-row
// FFN leaves a row-major tail after the 16-row groups), and a bigram-planted TinyLlama-shaped model
// (2 of its 22 layers) in Q4_0, Q8_0 and Q4_K_M (Q4_K and Q6_K weights, both repacked).
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "skainet/model/convert.hpp"
#include "skainet/model/engine.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using namespace skainet;

namespace {

const fs::path kStories = fs::path(SKAINET_SHARED_MODELS) / "stories260K.gguf";

struct Run {
  std::vector<int32_t> ids;
  int repacked = 0;
};

Run greedy(const fs::path& file, bool file_order, const std::string& prompt, int tokens) {
  generate::EngineOptions o;
  o.plan.n_ctx = 128;
  o.threads = 2;
  o.progress = false;
  // Every tensor as stored, in file order: the form a weight has when nothing repacks it.
  if (file_order) o.overrides.weight_form_for = [](std::string_view) { return std::optional(placement::WeightForm{}); };
  auto e = generate::Engine::open(file, o);
  Run r;
  for (const auto& d : e->plan.tensors) r.repacked += d.held_order != BlockOrder::RowMajor;
  EXPECT_EQ(static_cast<uint32_t>(r.repacked), e->loaded.stats.repacked);
  generate::Generator& gen = e->sequence->sample_with({.temperature = 0.0f});
  gen.generate_ids(e->tokenizer->encode(prompt, true), {.max_tokens = tokens}, nullptr, &r.ids);
  return r;
}

// The repacked model, teacher-forced along the file-order model's greedy tokens, predicts the same
// next token at every step. Teacher forcing keeps a step whose top two logits are a near tie (the two
// orders add the same products in another order, so their last bits differ) from derailing every step
// after it; one such step in the run is tolerated, a wrong kernel misses many.
void expect_same_tokens(const fs::path& file, const std::string& prompt, int tokens) {
  const Run plain = greedy(file, true, prompt, tokens);
  EXPECT_EQ(plain.repacked, 0);
  ASSERT_EQ(plain.ids.size(), static_cast<size_t>(tokens));

  generate::EngineOptions o;
  o.plan.n_ctx = 128;
  o.threads = 2;
  o.progress = false;
  auto e = generate::Engine::open(file, o);
  uint32_t repacked = 0;
  for (const auto& d : e->plan.tensors) repacked += d.held_order != BlockOrder::RowMajor;
  EXPECT_GT(repacked, 0u) << "the default profile repacked nothing";
  EXPECT_EQ(repacked, e->loaded.stats.repacked);
  generate::Generator& gen = e->sequence->sample_with({.temperature = 0.0f});
  const std::vector<int32_t> ids = e->tokenizer->encode(prompt, true);
  std::vector<int32_t> predicted{gen.prefill(ids, 0)};
  for (int i = 0; i + 1 < tokens; ++i)
    predicted.push_back(gen.decode_step(plain.ids[static_cast<size_t>(i)], static_cast<int64_t>(ids.size()) + i));
  int differ = 0;
  for (int i = 0; i < tokens; ++i) differ += predicted[static_cast<size_t>(i)] != plain.ids[static_cast<size_t>(i)];
  EXPECT_LE(differ, 1) << "steps where the repacked model predicts another token than file order";
}

bool feed_orders_here() { return !placement::Platform::detect().repack.empty(); }

}  // namespace

TEST(FeedOrderModel, StoriesGivesTheSameGreedyTokens) {
  if (!feed_orders_here()) GTEST_SKIP() << "no kernel on this CPU reads a kernel-feed order";
  test::TempDir dir("feed-order");
  for (const char* scheme : {"q8_0", "q4_0"}) {
    SCOPED_TRACE(scheme);
    const fs::path file = dir / (std::string(scheme) + ".gguf");
    convert::QuantizeOptions q;
    q.scheme = convert::parse_scheme(scheme);
    convert::quantize(kStories, file, q);
    expect_same_tokens(file, "Once upon a time", 64);
  }
}

TEST(FeedOrderModel, TinyLlamaShapedBigramModelGivesTheSameGreedyTokens) {
  if (!feed_orders_here()) GTEST_SKIP() << "no kernel on this CPU reads a kernel-feed order";
  test::TempDir dir("feed-order-1b");
  for (const char* type : {"Q4_0", "Q8_0", "Q4_K_M"}) {
    SCOPED_TRACE(type);
    convert::SynthOptions s;
    s.shape = *convert::find_preset("tinyllama-1.1b");
    s.shape.layers = 2;
    s.scheme = convert::parse_scheme(type);
    s.seed = 5;
    s.threads = 2;
    s.bigram = true;
    const fs::path file = dir / (std::string(type) + ".gguf");
    convert::synth(file, s);
    // A prompt of more than two 16-row tiles: the prefill runs the AMX tiles where the CPU has them.
    expect_same_tokens(file,
                       "Once upon a time, in a small village at the edge of a great forest, there lived a "
                       "little girl who loved to sing songs to the birds every morning",
                       32);
  }
}
