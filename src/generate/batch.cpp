#include "skainet/model/batch.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "skainet/model/speculative.hpp"

namespace skainet::generate {
namespace {

plan::BatchPlan batch_of(const plan::MemoryPlan& p) {
  std::optional<plan::BatchPlan> b = p.batched();
  if (!b || !p.model) throw InvalidArgument("a batch needs a plan with a model and a batch (its rows and slabs)");
  return *b;
}

}  // namespace

void log_probabilities(std::span<const float> logits, int32_t token, int32_t top, TokenLogprobs& out) noexcept {
  const auto n_top = static_cast<size_t>(std::clamp(top, 0, kMaxTopLogprobs));
  float max = -INFINITY;
  for (const float l : logits) max = std::max(max, l);
  double sum = 0;
  out.n_top = 0;
  // The best n_top so far, kept sorted by insertion: a logit below the last kept is dropped at once,
  // so the pass is about one comparison per token.
  auto better = [](const TokenLogprob& a, const TokenLogprob& b) { return a.logprob > b.logprob; };
  for (size_t id = 0; id < logits.size(); ++id) {
    sum += std::exp(static_cast<double>(logits[id] - max));
    if (n_top == 0 || (out.n_top == static_cast<int32_t>(n_top) && logits[id] <= out.top[n_top - 1].logprob)) continue;
    const TokenLogprob t{static_cast<int32_t>(id), logits[id]};
    auto end = out.top.begin() + out.n_top;
    auto at = std::upper_bound(out.top.begin(), end, t, better);  // after equals: the lower id stays first
    if (out.n_top < static_cast<int32_t>(n_top)) ++out.n_top, ++end;
    std::move_backward(at, end - 1, end);
    *at = t;
  }
  const auto log_sum = static_cast<float>(std::log(sum));
  for (int32_t k = 0; k < out.n_top; ++k) out.top[k].logprob = out.top[k].logprob - max - log_sum;
  out.sampled = {token, logits[static_cast<size_t>(token)] - max - log_sum};
}

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
      sampled_(plan_.rows),
      prompt_rows_(plan_.sequences) {
  ctx_.reserve_scratch(plan_.scratch_bytes);
}

void Batch::speculate(uint32_t draft_max, uint32_t draft_min) {
  if (draft_max == 0) throw InvalidArgument("--draft-max 0: a draft needs at least one token");
  if (plan_.logit_rows < plan_.rows)
    throw InvalidArgument(
        fmt::format("--draft-max {}: the plan priced no drafts in a batch (PlanOptions::draft_max)", draft_max));
  draft_max_ = draft_max;
  draft_min_ = draft_min;
  contexts_.resize(slots_.size());
  drafts_.resize(slots_.size());
  for (auto& d : drafts_) d.reserve(draft_max);
}

uint32_t Batch::add(Sequence& seq, std::span<const int32_t> prompt, const Options& options, PrefixReuse reuse,
                    Drafter* drafter) {
  const int64_t n_ctx = seq.kv.n_ctx();
  if (prompt.empty()) throw InvalidArgument("the prompt has no tokens");
  if (static_cast<int64_t>(prompt.size()) >= n_ctx)
    throw InvalidArgument(fmt::format("the prompt has {} tokens; the context of {} leaves no room to generate (--ctx)",
                                      prompt.size(), n_ctx));
  if (drafter && draft_max_ == 0) throw InvalidArgument("a drafter, but the batch does not speculate (speculate())");
  for (const Slot& s : slots_)
    if (s.active && s.seq == &seq) throw InvalidArgument("this sequence is already in the batch");
  const auto free = std::find_if(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.active; });
  if (free == slots_.end())
    throw InvalidArgument(fmt::format("the batch's {} slots are all busy (plan: --slots)", slots_.size()));
  const auto i = static_cast<uint32_t>(free - slots_.begin());
  const auto reused = static_cast<int64_t>(seq.start(prompt, reuse));
  seq.sampler.reset();
  for (int32_t t : prompt) seq.sampler.accept(t);  // the repetition penalty sees the prompt, as in Generator
  if (drafter) {
    contexts_[i].reserve(static_cast<size_t>(n_ctx) + 1);
    contexts_[i].assign(prompt.begin(), prompt.end());
  }
  *free = {.seq = &seq,
           .prompt = prompt,
           .cached = reused,
           .prompt_done = reused,
           .pos = reused,
           .max_tokens = options.max_tokens,
           .stop_at_eos = options.stop_at_eos,
           .active = true,
           .logprobs = options.logprobs,
           .drafter = drafter};
  free->pacing.reset(draft_max_);
  return i;
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

// Slot i's draft for this step into drafts_[i], in at most `free_rows` rows, as its pacing says: none,
// a probe (one token drafted, compared with what the slot's plain row samples), or a draft never past
// the tokens it may still generate or its context. Returns the draft's length (0: a plain decode row).
uint32_t Batch::draft(uint32_t i, size_t free_rows) {
  Slot& s = slots_[i];
  std::vector<int32_t>& d = drafts_[i];
  d.clear();
  switch (s.pacing.next()) {
    case DraftPacing::Move::Decode: return 0;
    case DraftPacing::Move::Probe:
      s.drafter->draft(contexts_[i], 1, d);
      s.probe = d.empty() ? -1 : d.front();
      d.clear();
      return 0;
    case DraftPacing::Move::Draft: break;
  }
  const int64_t n_ctx = s.seq->kv.n_ctx();
  const int64_t room = s.max_tokens < 0 ? n_ctx : s.max_tokens - s.generated;
  const int64_t max =
      std::min({static_cast<int64_t>(s.pacing.length()), static_cast<int64_t>(free_rows), room - 1, n_ctx - s.pos - 1});
  return s.drafter->draft_within(contexts_[i], max, draft_min_, d);
}

// Decodes first, one row each (there are at most slots - 1 of them beside a prompt, and the plan has
// at least as many rows as slots), so every step moves every sequence; prompts share what is left,
// and drafts take the rows the prompts leave (a prompt's first token matters more than a guess).
void Batch::gather_rows() {
  n_tokens_ = n_entries_ = 0;
  auto decoding = [](const Slot& s) { return s.active && s.prompt_done == static_cast<int64_t>(s.prompt.size()); };
  size_t free_rows = tokens_.size();
  for (const Slot& s : slots_) free_rows -= decoding(s) ? 1 : 0;
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    const auto left = static_cast<size_t>(static_cast<int64_t>(s.prompt.size()) - s.prompt_done);
    prompt_rows_[i] = s.active && !decoding(s) ? std::min(left, free_rows) : 0;
    free_rows -= prompt_rows_[i];
  }
  auto enter = [&](uint32_t i, std::span<const int32_t> rows, int64_t logits) {
    Slot& s = slots_[i];
    std::copy(rows.begin(), rows.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(n_tokens_));
    n_tokens_ += rows.size();
    entries_[n_entries_] = {
        .kv = &s.seq->kv, .pos = s.pos, .rows = static_cast<int64_t>(rows.size()), .logits = logits};
    entry_slot_[n_entries_++] = i;
  };
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (!decoding(s)) continue;
    const uint32_t k = s.drafter ? draft(i, free_rows) : 0;
    free_rows -= k;
    enter(i, std::span(&s.next, 1), 1);
    if (k == 0) continue;
    // The draft's rows follow the token before it in the same entry; every row's logits are kept.
    std::copy(drafts_[i].begin(), drafts_[i].end(), tokens_.begin() + static_cast<std::ptrdiff_t>(n_tokens_));
    n_tokens_ += k;
    entries_[n_entries_ - 1].rows += k;
    entries_[n_entries_ - 1].logits += k;
  }
  for (uint32_t i = 0; i < slots_.size(); ++i)
    if (prompt_rows_[i] > 0)
      enter(i, slots_[i].prompt.subspan(static_cast<size_t>(slots_[i].prompt_done), prompt_rows_[i]), 1);
}

// A token slot i sampled: handed out, and the slot stops as Generator would (end of generation, max
// tokens, context).
// `logits`: the row the token was sampled from, for its log-probabilities when the slot asked for them.
void Batch::emit(uint32_t i, int32_t token, std::span<const float> logits) {
  Slot& s = slots_[i];
  ++s.generated;
  Sampled& out = sampled_[n_sampled_++];
  out.slot = i;
  out.token = token;
  out.has_logprobs = s.logprobs >= 0;
  if (out.has_logprobs) log_probabilities(logits, token, s.logprobs, out.logprobs);
  s.next = token;
  if (s.drafter) contexts_[i].push_back(token);
  auto finish = [&](StopReason why) {
    s.stop = why;
    s.active = false;
  };
  if (s.stop_at_eos && tokenizer_.is_eog(token))
    finish(StopReason::EndOfGeneration);
  else if (s.max_tokens >= 0 && s.generated >= s.max_tokens)
    finish(StopReason::MaxTokens);
  else if (s.pos >= static_cast<int64_t>(s.seq->kv.n_ctx()))
    finish(StopReason::ContextFull);
}

// Advances every entry's slot past its rows. A slot whose rows ended its prompt samples its first
// token; a decoding slot samples row after row while each sample equals the draft's next token (a
// draft's row is valid only if every token before it was accepted), as Generator::verify does.
void Batch::sample(const Tensor& logits) {
  n_sampled_ = 0;
  const auto vocab = static_cast<size_t>(logits.dim(1));
  const float* logit_row = logits.data<float>();
  const int32_t* row = tokens_.data();
  for (size_t e = 0; e < n_entries_; ++e) {
    const uint32_t i = entry_slot_[e];
    const model::BatchEntry& entry = entries_[e];
    const int32_t* run = std::exchange(row, row + entry.rows);
    const float* kept = std::exchange(logit_row, logit_row + entry.logits * vocab);
    try {
      sample_entry(i, entry.rows, run, kept, vocab);
    } catch (const std::exception& ex) {
      // A sampler that cannot go on (a grammar allowing no token here) ends its own slot, not the step.
      Slot& s = slots_[i];
      s.error = ex.what();
      s.stop = StopReason::Failed;
      s.active = false;
    }
  }
}

void Batch::sample_entry(uint32_t i, int64_t rows, const int32_t* run, const float* kept, size_t vocab) {
  Slot& s = slots_[i];
  auto row_logits = [&](int64_t r) { return std::span(kept + r * vocab, vocab); };
  auto sample_at = [&](int64_t r) {
    const int32_t t = s.seq->sampler.sample(row_logits(r));
    s.seq->sampler.accept(t);
    return t;
  };
  if (s.prompt_done < static_cast<int64_t>(s.prompt.size())) {
    s.seq->ran(std::span(run, static_cast<size_t>(rows)));  // their keys and values are in its cache now
    s.pos += rows;
    s.prompt_done += rows;
    if (s.prompt_done < static_cast<int64_t>(s.prompt.size())) return;
    if (s.max_tokens == 0) {
      s.stop = StopReason::MaxTokens;
      s.active = false;
      return;
    }
    emit(i, sample_at(0), row_logits(0));
    return;
  }
  const int64_t drafted = rows - 1;
  const int32_t probe = std::exchange(s.probe, -1);
  int64_t r = 0;
  for (;; ++r) {
    s.seq->ran(std::span(run + r, 1));  // row r's inputs were all accepted: its cell holds the truth
    ++s.pos;
    const int32_t t = sample_at(r);
    emit(i, t, row_logits(r));
    if (r == 0 && probe >= 0) {
      ++s.probes;
      s.probe_hits += t == probe ? 1 : 0;
      s.pacing.probed(t == probe);
    }
    if (!s.active || r == drafted || t != run[r + 1]) break;
  }
  if (drafted == 0) return;
  s.drafted += drafted;
  s.accepted += r;
  // No clock here: the step's time is every sequence's. A draft that gave anything paid.
  s.pacing.verified(static_cast<uint32_t>(drafted), static_cast<uint32_t>(r), true);
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
