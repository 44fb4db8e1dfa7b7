// Threads sharing the process: two engines generating at once, and synth/quantize on several worker
// threads. Correct in any build; what they are for is the tsan preset (make test-tsan), where a data
// race between the engines (a shared static, the kernel table, the tokenizer's caches) or among the
// convert workers is a ThreadSanitizer report.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "skainet/model/convert.hpp"
#include "skainet/model/engine.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using namespace skainet;

namespace {

const fs::path kStories = fs::path(SKAINET_SHARED_MODELS) / "stories260K.gguf";

std::vector<int32_t> greedy_ids(const fs::path& model, const char* prompt, int tokens) {
  generate::EngineOptions o;
  o.plan.n_ctx = 128;
  o.threads = 2;
  o.progress = false;
  auto e = generate::Engine::open(model, o);
  std::vector<int32_t> ids;
  generate::Generator& gen = e->sequence->sample_with({.temperature = 0.0f});
  gen.generate_ids(e->tokenizer->encode(prompt, true), {.max_tokens = tokens}, nullptr, &ids);
  return ids;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST(Concurrency, TwoEnginesOnTwoThreadsGenerateWhatEachGeneratesAlone) {
  const std::vector<int32_t> alone_a = greedy_ids(kStories, "Once upon a time", 24);
  const std::vector<int32_t> alone_b = greedy_ids(kStories, "The little dog", 24);
  ASSERT_EQ(alone_a.size(), 24u);
  std::vector<int32_t> a, b;
  // Both threads open (header, plan, load, tokenizer) and generate at the same time, each engine with
  // its own pool of two workers.
  std::thread ta([&] { a = greedy_ids(kStories, "Once upon a time", 24); });
  std::thread tb([&] { b = greedy_ids(kStories, "The little dog", 24); });
  ta.join();
  tb.join();
  EXPECT_EQ(a, alone_a);
  EXPECT_EQ(b, alone_b);
}

TEST(Concurrency, SynthAndQuantizeOnFourThreadsWriteWhatOneThreadWrites) {
  const test::TempDir dir("concurrency");
  convert::SynthOptions s;
  s.shape = *convert::find_preset("tiny");
  s.scheme = convert::parse_scheme("Q4_K_M");
  s.seed = 5;
  std::string bytes[2];
  for (unsigned threads : {1u, 4u}) {
    s.threads = threads;
    const fs::path out = dir / ("synth-" + std::to_string(threads) + ".gguf");
    convert::synth(out, s);
    bytes[threads == 4] = slurp(out);
  }
  EXPECT_EQ(bytes[0], bytes[1]);
  for (unsigned threads : {1u, 4u}) {
    convert::QuantizeOptions q;
    q.scheme = convert::parse_scheme("Q8_0");
    q.threads = threads;
    const fs::path out = dir / ("q8-" + std::to_string(threads) + ".gguf");
    convert::quantize(kStories, out, q);
    bytes[threads == 4] = slurp(out);
  }
  EXPECT_EQ(bytes[0], bytes[1]);
}
