#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "skainet/model/generate.hpp"
#include "skainet/model/speculative.hpp"

namespace skainet::generate {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

Generator::Generator(model::Transformer& model, const text::Tokenizer& tokenizer, text::Sampler& sampler,
                     memory::ExecutionContext& ctx, GeneratorConfig config)
    : model_(model),
      tokenizer_(tokenizer),
      sampler_(sampler),
      ctx_(ctx),
      config_(config),
      step_({.slab_bytes = config.step_slab_bytes}) {
  if (config_.prefill_chunk == 0) throw InvalidArgument("prefill chunk must be at least one token");
}

int32_t Generator::sample_in_step(std::span<const int32_t> tokens, int64_t pos) {
  // The logits live in the step slab: sample before the step ends.
  return ctx_.step(step_, [&] {
    const Tensor logits = model_.forward(ctx_, tokens, pos);
    return sampler_.sample(std::span(logits.data<float>(), static_cast<size_t>(logits.numel())));
  });
}

int32_t Generator::prefill(std::span<const int32_t> tokens, int64_t pos) {
  if (tokens.empty()) throw InvalidArgument("prefill: the prompt has no tokens");
  for (int32_t t : tokens) sampler_.accept(t);
  int32_t next = -1;
  for (size_t i = 0; i < tokens.size(); i += config_.prefill_chunk) {
    const size_t n = std::min<size_t>(config_.prefill_chunk, tokens.size() - i);
    // Only the last chunk's logits are sampled; earlier chunks just fill the KV cache.
    if (i + n < tokens.size()) {
      ctx_.step(step_, [&] { model_.forward(ctx_, tokens.subspan(i, n), pos + static_cast<int64_t>(i)); });
    } else {
      next = sample_in_step(tokens.subspan(i, n), pos + static_cast<int64_t>(i));
    }
  }
  return next;
}

int32_t Generator::decode_step(int32_t token, int64_t pos) { return sample_in_step(std::span(&token, 1), pos); }

void Generator::speculate_with(Drafter* drafter, uint32_t draft_max, uint32_t draft_min) {
  if (drafter && uint64_t{draft_max} + 1 > config_.verify_rows)
    throw InvalidArgument(
        fmt::format("--draft-max {}: the plan prices verification steps of {} tokens at most "
                    "(plan it with that draft length: PlanOptions::draft_max)",
                    draft_max, config_.verify_rows));
  drafter_ = drafter;
  draft_max_ = draft_max;
  draft_min_ = draft_min;
  if (!drafter) return;
  context_.reserve(size_t{model_.n_ctx()} + 2);
  draft_.reserve(draft_max);
  batch_.reserve(size_t{draft_max} + 1);
  ready_.reserve(size_t{draft_max} + 1);
}

int32_t Generator::next_token(int32_t token, int64_t& pos, int64_t room, Stats& s) {
  if (ready_at_ < ready_.size()) {  // its K/V was written by the verification that accepted it
    ++pos;
    return ready_[ready_at_++];
  }
  const int64_t at = pos++;
  const DraftPacing::Move move = drafter_ ? pacing_.next() : DraftPacing::Move::Decode;
  if (move == DraftPacing::Move::Probe) {
    const auto start = Clock::now();
    drafter_->draft(context_, 1, draft_);
    s.draft_seconds += seconds_since(start);
    if (!draft_.empty()) return probe(token, at, s);
  } else if (move == DraftPacing::Move::Draft) {
    // A draft of k tokens runs k + 1 (the token before it too) and yields up to k + 1.
    const int64_t max = std::min<int64_t>({pacing_.length(), room - 1, static_cast<int64_t>(model_.n_ctx()) - at - 1});
    draft_start_ = Clock::now();
    const uint32_t k = drafter_->draft_within(context_, max, draft_min_, draft_);
    s.draft_seconds += seconds_since(draft_start_);
    if (k > 0) return verify(token, at, s);
  }
  const int32_t next = timed_decode_step(token, at);
  sampler_.accept(next);
  return next;
}

int32_t Generator::timed_decode_step(int32_t token, int64_t pos) {
  if (!drafter_) return decode_step(token, pos);
  const auto start = Clock::now();
  const int32_t next = decode_step(token, pos);
  const double t = seconds_since(start);
  step_seconds_ = step_seconds_ > 0 ? 0.75 * step_seconds_ + 0.25 * t : t;
  return next;
}

// A plain decode step that also tells whether the drafter's one token would have been accepted: the
// verification of a one-token draft samples its first row exactly so. Costs the target nothing.
int32_t Generator::probe(int32_t token, int64_t pos, Stats& s) {
  const int32_t next = timed_decode_step(token, pos);
  sampler_.accept(next);
  ++s.probes;
  s.probe_hits += next == draft_[0] ? 1 : 0;
  pacing_.probed(next == draft_[0]);
  return next;
}

// Runs `token` and the draft at [pos, pos + 1 + k) in one pass and samples row after row, each as a
// decode step would (the history holds exactly the tokens accepted before it), while the sample
// equals the draft. Cells past the last accepted token hold rejected K/V; they are overwritten before
// anything reads them (attention reads only up to the position it runs).
int32_t Generator::verify(int32_t token, int64_t pos, Stats& s) {
  batch_.clear();
  batch_.push_back(token);
  batch_.insert(batch_.end(), draft_.begin(), draft_.end());
  ready_.clear();
  ctx_.step(step_, [&] {
    const Tensor logits = model_.forward(ctx_, batch_, pos, model::Logits::All);
    const auto vocab = static_cast<size_t>(logits.dim(1));
    for (size_t i = 0; i < batch_.size(); ++i) {
      const int32_t t = sampler_.sample(std::span(logits.data<float>() + i * vocab, vocab));
      sampler_.accept(t);
      ready_.push_back(t);
      if (i == draft_.size() || t != draft_[i]) break;
    }
  });
  s.drafted_tokens += static_cast<int64_t>(draft_.size());
  s.accepted_tokens += static_cast<int64_t>(ready_.size()) - 1;
  ++s.verify_steps;
  const auto accepted = static_cast<uint32_t>(ready_.size() - 1);
  // In time: the draft and its verification took no longer than the decode steps of the tokens they gave.
  pacing_.verified(static_cast<uint32_t>(draft_.size()), accepted,
                   static_cast<double>(accepted + 1) * step_seconds_ >= seconds_since(draft_start_));
  ready_at_ = 1;
  return ready_[0];
}

Stats Generator::generate(std::string_view prompt, const Options& options, const TokenCallback& on_token) {
  const std::vector<int32_t> ids = tokenizer_.encode(prompt, options.add_special, options.parse_special);
  return generate_ids(ids, options, on_token);
}

Stats Generator::generate_ids(std::span<const int32_t> prompt, const Options& options, const TokenCallback& on_token,
                              std::vector<int32_t>* out) {
  return continue_ids(prompt, 0, options, on_token, out);
}

Stats Generator::continue_ids(std::span<const int32_t> prompt, int64_t cached, const Options& options,
                              const TokenCallback& on_token, std::vector<int32_t>* out) {
  Stats s;
  const int64_t ctx_cells = model_.n_ctx();
  if (static_cast<int64_t>(prompt.size()) >= ctx_cells)
    throw InvalidArgument(fmt::format("the prompt has {} tokens; the context of {} leaves no room to generate (--ctx)",
                                      prompt.size(), ctx_cells));
  if (prompt.empty()) throw InvalidArgument("the prompt has no tokens");
  // The last prompt token is always processed: its logits give the first generated token.
  cached = std::clamp<int64_t>(cached, 0, static_cast<int64_t>(prompt.size()) - 1);
  s.cached_tokens = static_cast<int32_t>(cached);
  s.prompt_tokens = static_cast<int32_t>(prompt.size() - static_cast<size_t>(cached));
  sampler_.reset();
  for (int32_t t : prompt.first(static_cast<size_t>(cached))) sampler_.accept(t);  // the penalty sees them all
  TextStream text(tokenizer_, prompt, options.stop_strings, on_token, options.shown_control_tokens);

  const auto start = Clock::now();
  int32_t next = prefill(prompt.subspan(static_cast<size_t>(cached)), cached);
  sampler_.accept(next);  // each token is accepted as it is sampled: a verification samples several
  s.prompt_seconds = s.first_token_seconds = seconds_since(start);
  ready_.clear();
  ready_at_ = 0;
  pacing_.reset(draft_max_);
  if (drafter_) context_.assign(prompt.begin(), prompt.end());

  int64_t pos = static_cast<int64_t>(prompt.size());
  const auto decode_start = Clock::now();
  s.stop = StopReason::MaxTokens;
  while (options.max_tokens < 0 || s.generated_tokens < options.max_tokens) {
    ++s.generated_tokens;
    if (out) out->push_back(next);
    if (drafter_) context_.push_back(next);
    if (options.stop_at_eos && tokenizer_.is_eog(next)) {
      s.stop = StopReason::EndOfGeneration;
      break;
    }
    if (!text.push(next)) {
      s.stop = text.stopped_by_string() ? StopReason::StopString : StopReason::Callback;
      break;
    }
    if (options.max_tokens >= 0 && s.generated_tokens >= options.max_tokens) break;
    if (pos >= ctx_cells) {
      s.stop = StopReason::ContextFull;
      break;
    }
    const int64_t room = options.max_tokens < 0 ? ctx_cells : options.max_tokens - s.generated_tokens;
    next = next_token(next, pos, room, s);
  }
  s.decode_seconds = seconds_since(decode_start);
  text.finish();
  if (text.stopped_by_string()) s.stop = StopReason::StopString;

  const memory::ForwardStats& step = step_.stats();
  const memory::ForwardStats& layer = model_.layer_stats();
  s.step_slab_bytes = step.slab_bytes;
  s.step_slab_peak = step.peak;
  s.layer_slab_peak = layer.peak;
  s.overflow_bytes = std::max(step.max_overflow_bytes, layer.max_overflow_bytes);
  s.overflow_count = step.total_overflow_count + layer.total_overflow_count;
  return s;
}

namespace {

text::DecodeOptions showing(std::span<const int32_t> control_tokens) {
  text::DecodeOptions options;
  options.shown_tokens.assign(control_tokens.begin(), control_tokens.end());
  return options;
}

}  // namespace

TextStream::TextStream(const text::Tokenizer& tokenizer, std::span<const int32_t> prompt,
                       std::span<const std::string> stop_strings, const TokenCallback& on_token,
                       std::span<const int32_t> shown_control_tokens)
    : decoder_(tokenizer, showing(shown_control_tokens)),
      stop_strings_(stop_strings),
      on_token_(on_token),
      stops_(stop_strings) {
  // Primed with the prompt, so the first generated piece joins it as the tokenizer joins text.
  if (on_token_ || !stop_strings_.empty())
    for (int32_t t : prompt) decoder_.push(t);
}

bool TextStream::deliver(std::string_view piece, int32_t id) {
  if (stop_strings_.empty()) return !on_token_ || on_token_(piece, id);
  bool keep_going = true;
  stopped_by_string_ = stops_.push(piece, [&](std::string_view text) {
    if (on_token_) keep_going = on_token_(text, id) && keep_going;
  });
  return keep_going && !stopped_by_string_;
}

// Without a callback or stop strings nobody reads the text: the decoder is not even run.
bool TextStream::push(int32_t id) { return (!on_token_ && stop_strings_.empty()) || deliver(decoder_.push(id), id); }

void TextStream::finish() {
  if (stopped_by_string_ || (!on_token_ && stop_strings_.empty())) return;
  const std::string tail = decoder_.flush();
  if (!tail.empty() && !deliver(tail, -1) && stopped_by_string_) return;
  if (on_token_ && !stopped_by_string_ && !stops_.held().empty()) on_token_(stops_.held(), -1);
}

void DraftPacing::reset(uint32_t draft_max) noexcept {
  draft_max_ = length_ = draft_max;
  skip_ = 0;
  backoff_ = 1;
  probing_ = true;
}

DraftPacing::Move DraftPacing::next() noexcept {
  if (skip_ > 0) {
    --skip_;
    return Move::Decode;
  }
  return probing_ ? Move::Probe : Move::Draft;
}

void DraftPacing::probed(bool hit) noexcept {
  if (!hit) return missed();
  probing_ = false;
  backoff_ = 1;
}

void DraftPacing::verified(uint32_t drafted, uint32_t accepted, bool in_time) noexcept {
  // A draft accepted whole paid whatever the clock says (the drafter is right; its length is what
  // --draft-max sets), so a drafter that is right stays on.
  const bool whole = accepted == drafted;
  if (!whole && (accepted == 0 || !in_time)) {
    length_ = std::min(length_, 2 * (accepted + 1));
    return missed();
  }
  backoff_ = 1;
  // Where drafts are partly wrong, the rows past the first miss are work for nothing: draft about
  // twice what was accepted; where all is accepted, draft longer.
  length_ = whole ? std::min(draft_max_, 2 * length_) : std::min(length_, 2 * (accepted + 1));
}

void DraftPacing::missed() noexcept {
  probing_ = true;
  skip_ = backoff_;
  backoff_ = std::min(backoff_ * 2, kMaxBackoff);
}

StopMatcher::StopMatcher(std::span<const std::string> stops) : stops_(stops) {
  size_t longest = 0;
  for (const auto& stop : stops_) longest = std::max(longest, stop.size());
  held_.reserve(longest + 256);
}

size_t StopMatcher::find_stop() const noexcept {
  size_t best = std::string::npos;
  for (const auto& stop : stops_)
    if (!stop.empty()) best = std::min(best, held_.find(stop));
  return best;
}

size_t StopMatcher::partial_tail() const noexcept {
  size_t keep = 0;
  for (const auto& stop : stops_)
    for (size_t k = std::min(stop.size() - (stop.empty() ? 0 : 1), held_.size()); k > keep; --k)
      if (std::string_view(held_).substr(held_.size() - k) == std::string_view(stop).substr(0, k)) {
        keep = k;
        break;
      }
  return keep;
}

std::string_view stop_reason_name(StopReason r) noexcept {
  switch (r) {
    case StopReason::MaxTokens: return "max-tokens";
    case StopReason::EndOfGeneration: return "end-of-generation";
    case StopReason::ContextFull: return "context-full";
    case StopReason::Callback: return "callback";
    case StopReason::StopString: return "stop-string";
    case StopReason::Failed: return "failed";
  }
  return "?";
}

}  // namespace skainet::generate
