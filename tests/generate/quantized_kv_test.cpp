// Quantized KV caches (-ctk/-ctv): a decode step reads the cells in their form, a prefill chunk reads
// them converted to F32 in the layer slab; both within what the plan prices, and the greedy text of a
// bigram-planted model (a decisive top-1 at every step) the same as over an F16 cache.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "alloc_counter.hpp"
#include "skainet/model/convert.hpp"
#include "skainet/model/engine.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using namespace skainet;

namespace {

// The "tiny" shape: 4 heads of 64 over 2 KV heads, so a KV head's part of a cell is two 32-blocks.
const fs::path& tiny_model() {
  static const test::TempDir dir("quantized-kv");
  static const fs::path file = [] {
    convert::SynthOptions s;
    s.shape = *convert::find_preset("tiny");
    s.scheme = convert::parse_scheme("Q8_0");
    s.seed = 5;
    s.threads = 2;
    s.bigram = true;
    const fs::path f = dir.path() / "tiny.gguf";
    convert::synth(f, s);
    return f;
  }();
  return file;
}

std::unique_ptr<generate::Engine> open(GgmlType k, GgmlType v, uint32_t chunk = 16) {
  generate::EngineOptions o;
  o.plan.n_ctx = 160;
  o.plan.k_type = k;
  o.plan.v_type = v;
  o.plan.prefill_chunk = chunk;
  o.threads = 2;
  o.progress = false;
  return generate::Engine::open(tiny_model(), o);
}

// Greedy ids after a 70-token prompt (prefilled in chunks of 16, so later chunks read quantized cells
// written by earlier ones), then 40 decode steps.
std::vector<int32_t> greedy(generate::Engine& e) {
  std::vector<int32_t> prompt(70);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(1 + (i * 37) % 250);
  generate::Generator& gen = e.sequence->sample_with({.temperature = 0.0f});
  std::vector<int32_t> out{gen.prefill(prompt, 0)};
  int64_t pos = static_cast<int64_t>(prompt.size());
  for (int i = 0; i < 40; ++i) out.push_back(gen.decode_step(out.back(), pos++));
  return out;
}

TEST(QuantizedKv, PlanPricesTheCacheInItsTypesAndTheConversionOfAPrefillChunk) {
  const auto f16 = open(GgmlType::F16, GgmlType::F16);
  const auto q8 = open(GgmlType::Q8_0, GgmlType::Q8_0);
  const auto mixed = open(GgmlType::Q4_0, GgmlType::F16);
  const plan::KvCachePlan& kv = *q8->plan.kv;
  // 2 layers x 160 cells x 128 elements: F16 256 bytes a row, Q8_0 4 blocks of 34, Q4_0 4 of 18.
  EXPECT_EQ(f16->plan.kv->bytes, 2u * 160 * (256 + 256));
  EXPECT_EQ(kv.bytes, 2u * 160 * (136 + 136));
  EXPECT_EQ(mixed->plan.kv->bytes, 2u * 160 * (72 + 256));
  EXPECT_EQ(q8->plan.decode->layer_bytes, f16->plan.decode->layer_bytes) << "a decode step converts nothing";
  // A prefill chunk converts K and V: [160, 128] floats each, one of them in the mixed plan.
  EXPECT_EQ(q8->plan.prefill->layer_bytes, f16->plan.prefill->layer_bytes + 2 * 160 * 128 * 4);
  EXPECT_EQ(mixed->plan.prefill->layer_bytes, f16->plan.prefill->layer_bytes + 160 * 128 * 4);
}

TEST(QuantizedKv, GreedyTextAsOverAnF16CacheAndTheSlabsHoldIt) {
  const std::vector<int32_t> want = greedy(*open(GgmlType::F16, GgmlType::F16));
  for (const auto& [k, v] : {std::pair{GgmlType::Q8_0, GgmlType::Q8_0}, std::pair{GgmlType::Q4_0, GgmlType::Q4_0},
                             std::pair{GgmlType::Q8_0, GgmlType::F16}, std::pair{GgmlType::BF16, GgmlType::Q5_1},
                             std::pair{GgmlType::IQ4_NL, GgmlType::Q4_1}}) {
    const auto e = open(k, v);
    const std::string name = std::string(type_name(k)) + "/" + std::string(type_name(v));
    EXPECT_EQ(greedy(*e), want) << name;
    EXPECT_EQ(e->sequence->llama.layer_stats().total_overflow_count, 0u) << name << ": the layer slab was too small";
    EXPECT_EQ(e->sequence->generator.step_stats().total_overflow_count, 0u) << name;
  }
}

TEST(QuantizedKv, DecodeStepsMakeNoHeapAllocations) {
  if (!test::allocation_counter_available()) GTEST_SKIP() << "malloc is owned by the sanitizer in this build";
  const auto e = open(GgmlType::Q4_0, GgmlType::Q8_0);
  generate::Generator& gen = e->sequence->sample_with({.temperature = 0.0f});
  const std::vector<int32_t> prompt = {1, 20, 30, 40};
  int32_t tok = gen.prefill(prompt, 0);
  int64_t pos = static_cast<int64_t>(prompt.size());
  for (int i = 0; i < 4; ++i) tok = gen.decode_step(tok, pos++);
  const uint64_t before = test::allocation_count();
  for (int i = 0; i < 32; ++i) tok = gen.decode_step(tok, pos++);
  EXPECT_EQ(test::allocation_count() - before, 0u);
}

TEST(QuantizedKv, AHeadOfPartBlocksIsRefusedByThePlanNamingIt) {
  generate::EngineOptions o;
  o.plan.k_type = o.plan.v_type = GgmlType::Q8_0;
  o.progress = false;
  try {
    generate::Engine::open(fs::path(SKAINET_SHARED_MODELS) / "stories260K.gguf", o);
    FAIL() << "stories260K's heads of 8 elements cannot hold Q8_0 blocks";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("the head size 8 is not a whole number of Q8_0's 32-element blocks"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
