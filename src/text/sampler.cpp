#include <algorithm>
#include <cmath>
#include <limits>

#include "skainet/text/text.hpp"

namespace skainet::text {

namespace {

// Best first: higher logit, then lower id. A strict total order, so every sort gives one answer.
bool better(const Candidate& a, const Candidate& b) noexcept {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

uint64_t splitmix64(uint64_t& x) noexcept {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }

// The candidate where the cumulative probability passes u (the last one when rounding left u above
// the total). A masked candidate has p = 0 and is never drawn.
int32_t draw(std::span<const Candidate> c, double u) noexcept {
  double cum = 0.0;
  for (const Candidate& x : c) {
    cum += x.p;
    if (u < cum) return x.id;
  }
  for (size_t i = c.size(); i-- > 0;)
    if (c[i].p > 0.0f) return c[i].id;
  return c.back().id;
}

}  // namespace

void Rng::reseed(uint64_t seed) noexcept {
  for (uint64_t& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next() noexcept {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

namespace sampling {

int32_t greedy(std::span<const Candidate> c) noexcept {
  if (c.empty()) return -1;
  const Candidate* best = &c[0];
  for (const Candidate& x : c) {
    if (better(x, *best)) best = &x;
  }
  return best->id;
}

void penalize(std::span<Candidate> by_id, std::span<const int32_t> last, const Penalties& penalties,
              std::span<uint32_t> counts) noexcept {
  if (penalties.off()) return;
  const auto in_range = [&](int32_t id) {
    return id >= 0 && static_cast<size_t>(id) < by_id.size() && static_cast<size_t>(id) < counts.size();
  };
  for (int32_t id : last)
    if (in_range(id)) ++counts[id];
  // The second pass meets each distinct id first with its full count, and zeroes it there, so every
  // later repeat of the id is skipped and counts is all zeros again at the end.
  for (int32_t id : last) {
    if (!in_range(id) || counts[id] == 0) continue;
    const float c = static_cast<float>(counts[id]);
    counts[id] = 0;
    float& l = by_id[id].logit;
    l = l <= 0.0f ? l * penalties.repeat : l / penalties.repeat;
    l -= c * penalties.frequency + penalties.presence;
  }
}

size_t top_k(std::span<Candidate> c, int32_t k) noexcept {
  if (c.empty()) return 0;
  const size_t keep = k <= 0 ? c.size() : std::min(c.size(), static_cast<size_t>(k));
  std::partial_sort(c.begin(), c.begin() + keep, c.end(), better);
  return keep;
}

void softmax(std::span<Candidate> c) noexcept {
  if (c.empty()) return;
  float mx = -std::numeric_limits<float>::infinity();
  for (const Candidate& x : c) mx = std::max(mx, x.logit);
  if (!std::isfinite(mx)) {  // all -inf (everything masked) or +inf: no usable scale, share evenly
    for (Candidate& x : c) x.p = x.logit == mx ? 1.0f : 0.0f;
    float n = 0.0f;
    for (const Candidate& x : c) n += x.p;
    for (Candidate& x : c) x.p /= n;
    return;
  }
  double sum = 0.0;
  for (Candidate& x : c) {
    x.p = static_cast<float>(std::exp(static_cast<double>(x.logit) - mx));
    sum += x.p;
  }
  for (Candidate& x : c) x.p = static_cast<float>(x.p / sum);
}

size_t top_p(std::span<Candidate> sorted, float p) noexcept {
  if (sorted.empty() || p >= 1.0f) return sorted.size();
  softmax(sorted);
  double cum = 0.0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    cum += sorted[i].p;
    if (cum >= p) return i + 1;  // the candidate that reaches p is kept
  }
  return sorted.size();
}

size_t min_p(std::span<Candidate> sorted, float p) noexcept {
  if (sorted.empty() || p <= 0.0f) return sorted.size();
  // p_i >= p * p_max  <=>  logit_i >= logit_max + log(p)
  const float min_logit = sorted[0].logit + std::log(p);
  size_t keep = 1;
  while (keep < sorted.size() && sorted[keep].logit >= min_logit) ++keep;
  return keep;
}

void temperature(std::span<Candidate> c, float t) noexcept {
  if (!(t > 0.0f) || t == 1.0f) return;
  for (Candidate& x : c) x.logit /= t;
}

bool greedy_temperature(std::span<const Candidate> c, float t) noexcept {
  if (!(t > 0.0f)) return true;
  // The limit of softmax(logit / t) as t -> 0 is the best logit. When the largest finite logit / t
  // overflows, the draw would be uniform over the overflowed ones (every logit ±inf at 1e-40), so such
  // a t is that limit. When it does not, a smaller logit overflowing to -inf is probability 0, which is
  // right, and softmax subtracts the largest: nothing else overflows.
  float largest = -std::numeric_limits<float>::infinity();
  for (const Candidate& x : c)
    if (std::isfinite(x.logit)) largest = std::max(largest, x.logit);
  return std::isfinite(largest) && !std::isfinite(largest / t);
}

}  // namespace sampling

Sampler::Sampler(int32_t vocab_size, SamplerConfig config, uint32_t max_history)
    : config_(config), vocab_size_(vocab_size), rng_(config.seed) {
  if (vocab_size <= 0) throw InvalidArgument("sampler: vocab_size " + std::to_string(vocab_size) + " must be positive");
  // NaN has no meaning as any of these (a NaN temperature made every logit NaN).
  if (std::isnan(config.temperature) || std::isnan(config.top_p) || std::isnan(config.min_p))
    throw InvalidArgument("sampler: temperature, top_p and min_p must be numbers, not NaN");
  // llama.cpp's -1: the whole context, which only a sampler that knows the context can look back over.
  if (config.repeat_last_n < -1 || (config.repeat_last_n == -1 && max_history == 0))
    throw InvalidArgument("sampler: repeat_last_n " + std::to_string(config.repeat_last_n) +
                          " must be 0 (off), a token count, or -1 (the whole context, when the context is known)");
  if (!(config.repeat_penalty > 0.0f)) throw InvalidArgument("sampler: repeat_penalty must be positive");
  if (!std::isfinite(config.frequency_penalty) || !std::isfinite(config.presence_penalty))
    throw InvalidArgument("sampler: frequency_penalty and presence_penalty must be finite numbers");
  cand_.resize(static_cast<size_t>(vocab_size));
  uint64_t ring = config.repeat_last_n < 0 ? max_history : static_cast<uint64_t>(config.repeat_last_n);
  if (max_history > 0) ring = std::min<uint64_t>(ring, max_history);
  history_.resize(static_cast<size_t>(ring));
  counts_.assign(static_cast<size_t>(vocab_size), 0);
}

void Sampler::accept(int32_t id) noexcept {
  if (history_.empty()) return;
  history_[history_head_] = id;
  history_head_ = (history_head_ + 1) % history_.size();
  history_size_ = std::min(history_size_ + 1, history_.size());
}

void Sampler::reset() {
  history_size_ = history_head_ = 0;
  rng_.reseed(config_.seed);
  if (constraint_) constraint_->reset();
}

// Greedy under a constraint: the best candidates are tried one by one (a token's check is a few
// steps of the grammar's automaton), and only when the first few are all refused is the whole mask
// worked out. The answer is the same either way: the best allowed token.
int32_t Sampler::greedy_allowed(std::span<Candidate> c) {
  constexpr int kTries = 8;
  for (int i = 0; i < kTries; ++i) {
    const int32_t id = sampling::greedy(c);
    if (c[id].logit == -std::numeric_limits<float>::infinity()) break;
    if (constraint_->allows(id)) return id;
    c[id].logit = -std::numeric_limits<float>::infinity();
  }
  constraint_->mask(c);
  return sampling::greedy(c);
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (logits.size() != static_cast<size_t>(vocab_size_)) {
    throw InvalidArgument("sampler: " + std::to_string(logits.size()) + " logits for a vocabulary of " +
                          std::to_string(vocab_size_));
  }
  // A NaN would break the sort's ordering (undefined behaviour); treat it as "never".
  constexpr float kNever = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < vocab_size_; ++i) cand_[i] = {i, std::isnan(logits[i]) ? kNever : logits[i], 0.0f};
  std::span<Candidate> c(cand_);

  // The ring holds the last history_size_ ids; order does not matter for the penalties.
  sampling::penalize(c, std::span<const int32_t>(history_.data(), history_size_),
                     {config_.repeat_penalty, config_.frequency_penalty, config_.presence_penalty}, counts_);

  if (sampling::greedy_temperature(c, config_.temperature)) {
    const int32_t id = constraint_ ? greedy_allowed(c) : sampling::greedy(c);
    std::swap(cand_[0], cand_[id]);  // cand_ is in id order: id is its index
    kept_ = 1;
    if (constraint_) constraint_->accept(id);
    return id;
  }
  if (constraint_) constraint_->mask(c);

  // Sorting is only needed by the filters; with none of them on, draw from the whole vocabulary as is.
  size_t n = c.size();
  if (config_.top_k > 0 || config_.top_p < 1.0f || config_.min_p > 0.0f) n = sampling::top_k(c, config_.top_k);
  n = sampling::top_p(c.first(n), config_.top_p);
  n = sampling::min_p(c.first(n), config_.min_p);
  c = c.first(n);
  sampling::temperature(c, config_.temperature);
  sampling::softmax(c);
  kept_ = n;

  const int32_t id = draw(c, rng_.uniform());
  if (constraint_) constraint_->accept(id);
  return id;
}

}  // namespace skainet::text
