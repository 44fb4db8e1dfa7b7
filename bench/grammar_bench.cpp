// The grammar's cost per sampled token (docs/benchmarks.md, "Grammar cost"): one sample() with
// random logits, without a constraint and under a JSON Schema's grammar, on a real vocabulary,
// greedy (the best tokens tried one by one) and at temperature 0.8 (the whole mask). Each iteration
// generates one value under the grammar from a fresh matcher (its caches cold, as a request's are), so
// the figure is the average over a whole answer, warm-up included.
//
//   build/release/bench/bench_grammar_bench [--benchmark_filter=...]
//   SKAINET_BENCH_VOCAB=path.gguf picks the vocabulary (default: the 32,000-token llama-spm one)
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "skainet/text/grammar.hpp"

using namespace skainet;

namespace {

const char* kSchema =
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":40},"age":{"type":"integer"},
  "tags":{"type":"array","items":{"enum":["red","green","blue"]},"maxItems":4},
  "address":{"type":"object","properties":{"street":{"type":"string","maxLength":30},"zip":{"type":"string","maxLength":8}},
  "required":["street","zip"]}},"required":["name","age","tags","address"]})";

struct Fixture {
  text::Tokenizer tok;
  std::shared_ptr<const grammar::Vocabulary> vocab;
  std::shared_ptr<const grammar::Grammar> grammar;
  std::vector<std::vector<float>> logits;  // a pool of random rows, reused

  Fixture()
      : tok(text::Tokenizer::from_file(std::getenv("SKAINET_BENCH_VOCAB") ? std::getenv("SKAINET_BENCH_VOCAB")
                                                                          : SKAINET_SHARED_VOCAB
                                           "/ggml-vocab-llama-spm.gguf")),
        vocab(std::make_shared<const grammar::Vocabulary>(tok)),
        grammar(std::make_shared<const grammar::Grammar>(
            grammar::Grammar::parse(grammar::json_schema_gbnf(nlohmann::ordered_json::parse(kSchema))))) {
    text::Rng rng(1);
    logits.resize(64);
    for (auto& row : logits) {
      row.resize(static_cast<size_t>(tok.vocab_size()));
      for (float& l : row) l = static_cast<float>(rng.uniform() * 10.0);
    }
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

// state.range(0): 1 constrained, 0 free; state.range(1): temperature x 10.
void BM_SampleToken(benchmark::State& state) {
  Fixture& f = fixture();
  const bool constrained = state.range(0) != 0;
  const float temperature = static_cast<float>(state.range(1)) / 10.0f;
  int64_t tokens = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    text::Sampler s(f.tok.vocab_size(), {.temperature = temperature, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f});
    if (constrained) s.constrain(std::make_unique<grammar::Matcher>(f.grammar, f.vocab));
    for (int i = 0; i < 400; ++i) {  // one value (or 400 free tokens)
      const int32_t id = s.sample(f.logits[static_cast<size_t>(i) % f.logits.size()]);
      ++tokens;
      if (f.tok.is_eog(id)) break;
    }
  }
  const std::chrono::duration<double, std::micro> spent = std::chrono::steady_clock::now() - start;
  state.counters["us_per_token"] = spent.count() / static_cast<double>(tokens);
  state.counters["tokens_per_value"] = static_cast<double>(tokens) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_SampleToken)->ArgsProduct({{0, 1}, {0, 8}})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
