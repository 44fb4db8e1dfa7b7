#include "choices.hpp"

#include <exception>
#include <system_error>
#include <thread>

#include <fmt/format.h>

namespace skainet::serve {

uint64_t choice_seed(uint64_t seed, size_t i) {
  if (i == 0) return seed;
  uint64_t z = seed + i * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void for_each_choice(size_t n, const std::function<void(size_t)>& choice) {
  std::vector<std::exception_ptr> errors(n);
  auto run = [&](size_t i) {
    try {
      choice(i);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  std::vector<std::thread> others;
  size_t started = 1;
  try {
    for (; started < n; ++started) others.emplace_back(run, started);
  } catch (const std::system_error&) {
    // No thread to be had: the choices left run here, one after another (their slots are held anyway).
  }
  run(0);
  for (size_t i = started; i < n; ++i) run(i);
  for (std::thread& t : others) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

bool ChunkSender::send(std::string_view data) {
  std::lock_guard lock(mutex_);
  if (alive_.load() && !ex_.send(fmt::format("data: {}\n\n", data))) alive_.store(false);
  return alive_.load();
}

std::vector<TokenLogprobs> LogprobsReader::take(std::span<const generate::TokenLogprobs> raw, size_t upto) {
  std::vector<TokenLogprobs> out;
  for (; taken_ < upto && taken_ < raw.size(); ++taken_) {
    const generate::TokenLogprobs& t = raw[taken_];
    TokenLogprobs shown{.sampled = prob(t.sampled), .top = {}, .text_offset = offset_};
    for (int32_t k = 0; k < t.n_top; ++k) shown.top.push_back(prob(t.top[static_cast<size_t>(k)]));
    offset_ += static_cast<int64_t>(shown.sampled.text.size());
    out.push_back(std::move(shown));
  }
  return out;
}

TokenProb LogprobsReader::prob(const generate::TokenLogprob& t) const {
  return {t.token, tok_.token_to_piece(t.token, /*render_special=*/true), t.logprob};
}

}  // namespace skainet::serve
