#include "skainet/model/sequence.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace skainet::generate {
namespace {

plan::SequencePlan sequence_of(const plan::MemoryPlan& p) {
  std::optional<plan::SequencePlan> s = p.sequence();
  if (!s || !p.model) throw InvalidArgument("a sequence needs a plan with a model (its KV cache and slabs)");
  return *s;
}

}  // namespace

Sequence::Sequence(const plan::MemoryPlan& p, memory::ModelScope& scope, const load::LoadedModel& loaded,
                   const text::Tokenizer& tokenizer, int threads, SequenceParts parts)
    : plan(sequence_of(p)),
      kv(scope, plan.kv),
      llama(*p.model, model::TransformerWeights::bind(loaded, *p.model), kv,
            parts == SequenceParts::Whole ? plan.layer_bytes : 0),
      ctx(parts == SequenceParts::Whole ? threads : 1),
      sampler(tokenizer.vocab_size(), text::SamplerConfig{}, plan.kv.n_ctx),
      generator(llama, tokenizer, sampler, ctx,
                {.step_slab_bytes = parts == SequenceParts::Whole ? plan.step_bytes : 0,
                 .prefill_chunk = plan.prefill_chunk,
                 .verify_rows = plan.verify_rows}),
      vocab_size_(tokenizer.vocab_size()),
      recorded_at_step_(generator.step_stats().step) {
  if (parts == SequenceParts::Whole) ctx.reserve_scratch(plan.scratch_bytes);
  cached_.reserve(size_t{plan.kv.n_ctx} + 1);
  generated_.reserve(size_t{plan.kv.n_ctx} + 1);
}

Generator& Sequence::sample_with(const text::SamplerConfig& config) {
  sampler = text::Sampler(vocab_size_, config, plan.kv.n_ctx);
  return generator;
}

bool Sequence::record_current() const noexcept { return generator.step_stats().step == recorded_at_step_; }

std::span<const int32_t> Sequence::cached() const noexcept {
  if (!record_current()) return {};
  return cached_;
}

size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) noexcept {
  const size_t n = std::min(a.size(), b.size());
  return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + n, b.begin()).first - a.begin());
}

size_t reusable_prefix(std::span<const int32_t> cached, std::span<const int32_t> prompt) noexcept {
  return prompt.empty() ? 0 : std::min(common_prefix(cached, prompt), prompt.size() - 1);
}

size_t Sequence::reusable(std::span<const int32_t> prompt) const noexcept { return reusable_prefix(cached(), prompt); }

size_t Sequence::start(std::span<const int32_t> prompt, PrefixReuse reuse) {
  const size_t reused = reuse == PrefixReuse::Reuse ? reusable(prompt) : 0;
  if (!record_current()) cached_.clear();
  cached_.resize(std::min(cached_.size(), reused));
  recorded_at_step_ = generator.step_stats().step;
  return reused;
}

void Sequence::ran(std::span<const int32_t> tokens) {
  // The cache holds n_ctx cells, so this never outgrows the capacity reserved.
  const size_t room = cached_.capacity() - cached_.size();
  cached_.insert(cached_.end(), tokens.begin(),
                 tokens.begin() + static_cast<std::ptrdiff_t>(std::min(room, tokens.size())));
}

uint64_t Sequence::cell_bytes() const noexcept {
  return uint64_t{plan.kv.layers} * (kv.k(0).row_bytes() + kv.v(0).row_bytes());
}

// Layer by layer, the first rows of K, then of V: each layer's cache is one contiguous [n_ctx, width].
template <class Fn>
void Sequence::each_prefix_rows(size_t tokens, Fn&& fn) const {
  size_t at = 0;
  for (uint32_t l = 0; l < plan.kv.layers; ++l)
    for (const Tensor* t : {&kv.k(l), &kv.v(l)}) {
      const size_t n = tokens * t->row_bytes();
      fn(*t, at, n);
      at += n;
    }
}

SavedPrefix Sequence::save() const {
  const std::span<const int32_t> tokens = cached();
  SavedPrefix saved{.tokens = {tokens.begin(), tokens.end()}, .cells = {}};
  saved.cells.resize(tokens.size() * cell_bytes());
  each_prefix_rows(tokens.size(),
                   [&](const Tensor& t, size_t at, size_t n) { std::memcpy(saved.cells.data() + at, t.bytes(), n); });
  return saved;
}

void Sequence::restore(const SavedPrefix& saved) {
  if (saved.tokens.size() > plan.kv.n_ctx || saved.cells.size() != saved.tokens.size() * cell_bytes())
    throw InvalidArgument(
        fmt::format("a saved prefix of {} tokens in {} bytes does not fit this KV cache ({} cells "
                    "of {} bytes)",
                    saved.tokens.size(), saved.cells.size(), plan.kv.n_ctx, cell_bytes()));
  each_prefix_rows(saved.tokens.size(), [&](const Tensor& t, size_t at, size_t n) {
    std::memcpy(t.mutable_bytes(), saved.cells.data() + at, n);
  });
  cached_.assign(saved.tokens.begin(), saved.tokens.end());
  recorded_at_step_ = generator.step_stats().step;
}

Stats Sequence::generate(std::span<const int32_t> prompt, const Options& options, const TokenCallback& on_token,
                         PrefixReuse reuse, std::vector<int32_t>* out) {
  // From here the cells past the reused prefix may be overwritten: until the call returns, only the
  // prefix is known to be there (an exception mid-way leaves exactly that recorded).
  const size_t reused = start(prompt, reuse);
  std::vector<int32_t>& ids = out ? *out : generated_;
  if (!out) generated_.clear();
  const size_t first_new = ids.size();
  Stats s;
  try {
    s = generator.continue_ids(prompt, static_cast<int64_t>(reused), options, on_token, &ids);
  } catch (...) {
    recorded_at_step_ = generator.step_stats().step;
    throw;
  }
  // Every generated token but the last was forwarded at the step after it was sampled.
  const size_t forwarded = ids.size() > first_new ? ids.size() - first_new - 1 : 0;
  cached_.assign(prompt.begin(), prompt.end());
  cached_.insert(cached_.end(), ids.begin() + static_cast<std::ptrdiff_t>(first_new),
                 ids.begin() + static_cast<std::ptrdiff_t>(first_new + forwarded));
  recorded_at_step_ = generator.step_stats().step;
  return s;
}

}  // namespace skainet::generate
