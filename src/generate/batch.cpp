#include "skainet/model/batch.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace skainet::generate {
namespace {

plan::BatchPlan batch_of(const plan::MemoryPlan& p) {
  std::optional<plan::BatchPlan> b = p.batched();
  if (!b || !p.model) throw InvalidArgument("a batch needs a plan with a model and a batch (its rows and slabs)");
  return *b;
}

}  // namespace

Batch::Batch(const plan::MemoryPlan& p, const load::LoadedModel& loaded, const text::Tokenizer& tokenizer, int threads)
    : plan_(batch_of(p)),
      tokenizer_(tokenizer),
      model_(*p.model, model::TransformerWeights::bind(loaded, *p.model), plan_.layer_bytes),
      ctx_(threads),
      step_({.slab_bytes = plan_.step_bytes}),
      slots_(plan_.sequences),
      tokens_(plan_.rows),
      entries_(plan_.sequences),
      entry_slot_(plan_.sequences),
      sampled_(plan_.sequences) {
  ctx_.reserve_scratch(plan_.scratch_bytes);
}

uint32_t Batch::add(Sequence& seq, std::span<const int32_t> prompt, const Options& options, PrefixReuse reuse) {
  const int64_t n_ctx = seq.kv.n_ctx();
  if (prompt.empty()) throw InvalidArgument("the prompt has no tokens");
  if (static_cast<int64_t>(prompt.size()) >= n_ctx)
    throw InvalidArgument(fmt::format("the prompt has {} tokens; the context of {} leaves no room to generate (--ctx)",
                                      prompt.size(), n_ctx));
  for (const Slot& s : slots_)
    if (s.active && s.seq == &seq) throw InvalidArgument("this sequence is already in the batch");
  const auto free = std::find_if(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.active; });
  if (free == slots_.end())
    throw InvalidArgument(fmt::format("the batch's {} slots are all busy (plan: --slots)", slots_.size()));
  const auto reused = static_cast<int64_t>(seq.start(prompt, reuse));
  seq.sampler.reset();
  for (int32_t t : prompt) seq.sampler.accept(t);  // the repetition penalty sees the prompt, as in Generator
  *free = {.seq = &seq,
           .prompt = prompt,
           .cached = reused,
           .prompt_done = reused,
           .pos = reused,
           .max_tokens = options.max_tokens,
           .stop_at_eos = options.stop_at_eos,
           .active = true};
  return static_cast<uint32_t>(free - slots_.begin());
}

void Batch::cancel(uint32_t i) {
  Slot& s = slots_.at(i);
  if (!s.active) return;
  s.stop = StopReason::Callback;
  s.active = false;
}

bool Batch::active() const noexcept {
  return std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.active; });
}

// Decodes first, one row each (there are at most slots - 1 of them beside a prompt, and the plan has
// at least as many rows as slots), so every step moves every sequence; prompts share what is left.
void Batch::gather_rows() {
  n_tokens_ = n_entries_ = 0;
  auto enter = [&](uint32_t i, Slot& s, std::span<const int32_t> rows) {
    std::copy(rows.begin(), rows.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(n_tokens_));
    n_tokens_ += rows.size();
    entries_[n_entries_] = {.kv = &s.seq->kv, .pos = s.pos, .rows = static_cast<int64_t>(rows.size())};
    entry_slot_[n_entries_++] = i;
  };
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.active && s.prompt_done == static_cast<int64_t>(s.prompt.size())) enter(i, s, std::span(&s.next, 1));
  }
  for (uint32_t i = 0; i < slots_.size() && n_tokens_ < tokens_.size(); ++i) {
    Slot& s = slots_[i];
    const auto left = static_cast<int64_t>(s.prompt.size()) - s.prompt_done;
    if (!s.active || left == 0) continue;
    const auto n = std::min<size_t>(static_cast<size_t>(left), tokens_.size() - n_tokens_);
    enter(i, s, s.prompt.subspan(static_cast<size_t>(s.prompt_done), n));
  }
}

// Advances every entry's slot past its rows; a slot whose rows ended its prompt, or decoded, samples
// from its row of the logits and stops as Generator would (end of generation, max tokens, context).
void Batch::sample(const Tensor& logits) {
  n_sampled_ = 0;
  const auto vocab = static_cast<size_t>(logits.dim(1));
  size_t row = 0;
  for (size_t e = 0; e < n_entries_; ++e) {
    Slot& s = slots_[entry_slot_[e]];
    const bool decoding = s.prompt_done == static_cast<int64_t>(s.prompt.size());
    const auto rows = static_cast<size_t>(entries_[e].rows);
    s.seq->ran(std::span(tokens_.data() + row, rows));  // their keys and values are in its cache now
    row += rows;
    s.pos += entries_[e].rows;
    if (!decoding) {
      s.prompt_done += entries_[e].rows;
      if (s.prompt_done < static_cast<int64_t>(s.prompt.size())) continue;
    }
    auto finish = [&](StopReason why) {
      s.stop = why;
      s.active = false;
    };
    if (s.max_tokens == 0) {
      finish(StopReason::MaxTokens);
      continue;
    }
    const int32_t token = s.seq->sampler.sample(std::span(logits.data<float>() + e * vocab, vocab));
    ++s.generated;
    s.seq->sampler.accept(token);
    sampled_[n_sampled_++] = {.slot = entry_slot_[e], .token = token};
    s.next = token;
    if (s.stop_at_eos && tokenizer_.is_eog(token))
      finish(StopReason::EndOfGeneration);
    else if (s.max_tokens >= 0 && s.generated >= s.max_tokens)
      finish(StopReason::MaxTokens);
    else if (s.pos >= static_cast<int64_t>(s.seq->kv.n_ctx()))
      finish(StopReason::ContextFull);
  }
}

std::span<const Batch::Sampled> Batch::step() {
  gather_rows();
  if (n_entries_ == 0) return {};
  ctx_.step(step_, [&] {
    // The logits live in the step slab: every slot samples before the step ends.
    sample(model_.forward(ctx_, std::span(tokens_.data(), n_tokens_), std::span(entries_.data(), n_entries_)));
  });
  return std::span(sampled_.data(), n_sampled_);
}

}  // namespace skainet::generate
