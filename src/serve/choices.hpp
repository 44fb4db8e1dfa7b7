// What a request's choices share while each generates in its own slot (server.cpp): their seeds, the
// threads they run on, one stream's sends, and the log-probabilities as a response shows them.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "http.hpp"
#include "skainet/app/serve.hpp"
#include "skainet/model/batch.hpp"

namespace skainet::serve {

// Choice i's seed: the request's own for the first (so n = 1 answers as it always did), splitmix64 of
// it and i for the others, so that choices sampled at temperature > 0 differ yet repeat with the seed.
uint64_t choice_seed(uint64_t seed, size_t i);

// Runs choice(i) for each of n choices at once, the first on this thread (each blocks while its slot
// generates in the shared batch); the first exception any threw is rethrown once all are done.
void for_each_choice(size_t n, const std::function<void(size_t)>& choice);

// A stream's events ("data: ...\n\n"), one at a time whichever thread a choice generates on; once a
// send fails (the client is gone) none is tried again.
class ChunkSender {
 public:
  explicit ChunkSender(Exchange& ex) : ex_(ex) {}
  bool send(std::string_view data);
  bool alive() const { return alive_.load(); }

 private:
  Exchange& ex_;
  std::mutex mutex_;
  std::atomic<bool> alive_{true};
};

// The engine's log-probabilities of a choice's tokens as a response shows them: each token's text, and
// where it starts among the texts of those before it. Each call takes the tokens after the last taken.
class LogprobsReader {
 public:
  explicit LogprobsReader(const text::Tokenizer& tok) : tok_(tok) {}
  std::vector<TokenLogprobs> take(std::span<const generate::TokenLogprobs> raw, size_t upto);

 private:
  TokenProb prob(const generate::TokenLogprob& t) const;
  const text::Tokenizer& tok_;
  size_t taken_ = 0;
  int64_t offset_ = 0;
};

}  // namespace skainet::serve
