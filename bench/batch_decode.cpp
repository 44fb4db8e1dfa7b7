// Aggregate decode speed of continuous batching (generate::Batch) against one sequence alone and the
// same sequences run one after another, on one file and thread count, side by side in one process:
//   build/release/bench/bench_batch_decode MODEL.gguf [threads=2] [sequences=4] [tokens=64] [rounds=3]
// Decode only: the clock starts once every sequence has its first token (its prompt processed) and
// counts the tokens after it. Prints one markdown row per way and round, then each way's median.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "skainet/model/batch.hpp"
#include "skainet/model/engine.hpp"

using namespace skainet;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<int32_t> prompt_of(const text::Tokenizer& tok, int i) {
  return tok.encode("Once upon a time, in a town by the sea, there lived a child called " + std::to_string(i), true);
}

// tokens/s of n sequences one after another (n = 1: one alone), decode steps only.
double one_at_a_time(generate::Engine& e, generate::Sequence& seq, int n, int tokens) {
  double seconds = 0;
  for (int i = 0; i < n; ++i) {
    const generate::Stats s =
        seq.sample_with({.temperature = 0.0f})
            .generate_ids(prompt_of(*e.tokenizer, i), {.max_tokens = tokens, .stop_at_eos = false}, nullptr);
    seconds += s.decode_seconds;
  }
  return n * (tokens - 1) / seconds;
}

double batched(generate::Engine& e, generate::Batch& batch, std::vector<std::unique_ptr<generate::Sequence>>& seqs,
               int tokens) {
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < seqs.size(); ++i) prompts.push_back(prompt_of(*e.tokenizer, static_cast<int>(i)));
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i]->sample_with({.temperature = 0.0f});
    batch.add(*seqs[i], prompts[i], {.max_tokens = tokens, .stop_at_eos = false});
  }
  auto all_decoding = [&] {
    for (uint32_t s = 0; s < seqs.size(); ++s)
      if (batch.slot(s).generated == 0) return false;
    return true;
  };
  while (!all_decoding()) batch.step();
  const auto start = Clock::now();
  size_t sampled = 0;
  while (batch.active()) sampled += batch.step().size();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // Sequences that finished their prompt in different steps decode a step apart; count what came.
  return static_cast<double>(sampled) / seconds;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [threads=2] [sequences=4] [tokens=64] [rounds=3]\n", argv[0]);
    return 2;
  }
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2, n = argc > 3 ? std::atoi(argv[3]) : 4;
  const int tokens = argc > 4 ? std::atoi(argv[4]) : 64, rounds = argc > 5 ? std::atoi(argv[5]) : 3;
  generate::EngineOptions o;
  o.plan.n_ctx = 512;
  o.plan.slots = static_cast<uint32_t>(n);
  o.threads = threads;
  o.progress = false;
  o.sequence = false;
  auto e = generate::Engine::open(argv[1], o);
  auto alone = e->new_sequence(threads);
  generate::Batch batch(e->plan, e->loaded, *e->tokenizer, threads);
  std::vector<std::unique_ptr<generate::Sequence>> seqs;
  for (int i = 0; i < n; ++i) seqs.push_back(e->new_sequence(1));

  std::printf("| way | round | decode t/s (aggregate) |\n|---|---|---|\n");
  std::map<std::string, std::vector<double>> rates;
  const std::string in_turn = std::to_string(n) + " one after another", together = std::to_string(n) + " batched";
  for (int r = 1; r <= rounds; ++r) {
    for (const auto& [way, rate] : {std::pair{std::string("1 alone"), one_at_a_time(*e, *alone, 1, tokens)},
                                    std::pair{in_turn, one_at_a_time(*e, *alone, n, tokens)},
                                    std::pair{together, batched(*e, batch, seqs, tokens)}}) {
      std::printf("| %s | %d | %.2f |\n", way.c_str(), r, rate);
      rates[way].push_back(rate);
    }
  }
  for (auto& [way, v] : rates) {
    std::sort(v.begin(), v.end());
    std::printf("median %s: %.2f t/s\n", way.c_str(), v[v.size() / 2]);
  }
  return 0;
}
