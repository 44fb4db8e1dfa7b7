// skainet::generate — the generation loop: prefill in chunks that fit the prefill slab, then one token
// per decode step, with the step scope reset at every step boundary (zero heap allocations per step in
// steady state), streaming text through a callback.
//
//   plan::SequencePlan seq = *plan.sequence();
//   generate::Generator gen(llama, tokenizer, sampler, ctx, {.step_slab_bytes = seq.step_bytes,
//                                                            .prefill_chunk = seq.prefill_chunk});
//   generate::Stats s = gen.generate("Once upon a time", {.max_tokens = 128},
//                                    [](std::string_view piece, int32_t) { std::cout << piece; return true; });
//   generate::Options o{.max_tokens = 64};  o.stop_strings = {"\nUser:"};     // stops before "\nUser:"
//   gen.continue_ids(ids, ids_already_in_cache, o, on_token);  // new tokens only (Sequence::generate finds them)
//   gen.speculate_with(&drafter, /*draft_max=*/16);   // speculative decoding (speculative.hpp)
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "skainet/model/model.hpp"
#include "skainet/text/text.hpp"

namespace skainet::generate {

struct GeneratorConfig {
  uint64_t step_slab_bytes = 0;  // plan::SequencePlan::step_bytes
  uint32_t prefill_chunk = 64;   // tokens per prefill step
  uint32_t verify_rows = 0;      // plan::SequencePlan::verify_rows: the longest verification step priced
};

class Drafter;  // speculative.hpp

// When a sequence drafts (docs/generation.md, "Back-off"), so that a drafter that misses costs little;
// Generator and Batch pace each sequence with one. A generation starts probing: the drafter proposes
// one token and a plain decode step (one row, what decoding costs anyway) shows whether it would have
// been accepted. A probe that hits turns on drafting; a miss, or a verification that did not pay,
// pauses some steps and goes (back) to probing, each such miss in a row doubling the pause (up to
// kMaxBackoff); a hit or a verification that paid resets it. Drafts are at most length() long:
// doubled while all is accepted, else cut to twice what was.
class DraftPacing {
 public:
  enum class Move : uint8_t { Decode, Probe, Draft };
  static constexpr uint32_t kMaxBackoff = 32;

  // A generation starts: probing, no pause, drafts of draft_max at most.
  void reset(uint32_t draft_max) noexcept;
  // What the next decode step does (a pause is used up by it).
  Move next() noexcept;
  uint32_t length() const noexcept { return length_; }
  void probed(bool hit) noexcept;
  // A verification of `drafted` tokens accepted `accepted`. A draft accepted whole paid; a partial one
  // paid when `in_time` (the caller's clock says it cost no more than decoding the tokens it gave).
  void verified(uint32_t drafted, uint32_t accepted, bool in_time) noexcept;

 private:
  void missed() noexcept;
  uint32_t draft_max_ = 0, length_ = 0, skip_ = 0, backoff_ = 1;
  bool probing_ = true;
};

struct Options {
  int32_t max_tokens = 128;   // -n; < 0: until EOS or the context is full
  bool add_special = true;    // BOS/EOS as the vocabulary asks
  bool parse_special = true;  // "<s>" in the prompt becomes the control token
  bool stop_at_eos = true;
  // Generation stops when the generated text contains one of these (llama.cpp's --stop / -r); the text
  // from the stop string on is not passed to the callback. Text that could be the start of a stop
  // string is held back until it is known not to be one, so pieces may arrive a few tokens late.
  std::vector<std::string> stop_strings = {};
  // generate::Batch only: >= 0 hands each sampled token's log-probability under the raw logits with it,
  // and that many of the most likely tokens' (at most kMaxTopLogprobs; Batch::Sampled::logprobs).
  int32_t logprobs = -1;
  // Control tokens whose text the generated text shows (otherwise a control token shows nothing): the
  // markers a chat reply's tool calls are parsed by (generate::tool_call_markers).
  std::vector<int32_t> shown_control_tokens = {};
};

// Failed: generate::Batch only, a slot whose sampler threw (Batch::Slot::error says why).
enum class StopReason : uint8_t { MaxTokens, EndOfGeneration, ContextFull, Callback, StopString, Failed };
std::string_view stop_reason_name(StopReason r) noexcept;

struct Stats {
  int32_t prompt_tokens = 0, generated_tokens = 0;  // prompt_tokens: those processed (not reused)
  int32_t cached_tokens = 0;                        // prompt tokens whose KV was already in the cache
  double prompt_seconds = 0, decode_seconds = 0, first_token_seconds = 0;
  uint64_t step_slab_bytes = 0, step_slab_peak = 0, layer_slab_peak = 0;
  uint64_t overflow_bytes = 0, overflow_count = 0;  // highest per step / total, both slabs
  StopReason stop = StopReason::MaxTokens;
  // Speculative decoding: tokens drafted and verified, how many of them the target accepted, in how
  // many verification steps (each also yields one token of the target's own); probes: one drafted
  // token compared with a plain decode step's (no verification), and how many of them it equalled.
  int64_t drafted_tokens = 0, accepted_tokens = 0, verify_steps = 0;
  int64_t probes = 0, probe_hits = 0;
  double draft_seconds = 0;  // in the drafter (part of decode_seconds)
  double acceptance_rate() const noexcept {
    return drafted_tokens > 0 ? static_cast<double>(accepted_tokens) / static_cast<double>(drafted_tokens) : 0;
  }
  double prompt_tokens_per_second() const noexcept { return prompt_seconds > 0 ? prompt_tokens / prompt_seconds : 0; }
  // Decode rate over the tokens after the first (the first comes from prefill).
  double decode_tokens_per_second() const noexcept {
    return decode_seconds > 0 && generated_tokens > 1 ? (generated_tokens - 1) / decode_seconds : 0;
  }
};

// Called with the text that became complete (maybe empty) and the token id; return false to stop.
using TokenCallback = std::function<bool(std::string_view piece, int32_t id)>;

// Finds stop strings in streamed text: push() passes on what is certainly not part of a stop string
// and holds back a tail that could still become one. No allocation per piece once `reserve`d.
class StopMatcher {
 public:
  explicit StopMatcher(std::span<const std::string> stops);
  // Appends `piece`; calls emit(text) with what may be shown; true when a stop string appeared (the
  // text before it was emitted, the rest is dropped).
  template <typename Emit>
  bool push(std::string_view piece, Emit&& emit) {
    held_.append(piece);
    const size_t at = find_stop();
    if (at != std::string::npos) {
      if (at > 0) emit(std::string_view(held_.data(), at));
      held_.clear();
      return true;
    }
    const size_t keep = partial_tail();
    if (held_.size() > keep) {
      emit(std::string_view(held_.data(), held_.size() - keep));
      held_.erase(0, held_.size() - keep);
    }
    return false;
  }
  std::string_view held() const noexcept { return held_; }
  void clear() noexcept { held_.clear(); }

 private:
  size_t find_stop() const noexcept;     // earliest start of any stop string in held_, or npos
  size_t partial_tail() const noexcept;  // longest tail of held_ that is a proper prefix of a stop string
  std::span<const std::string> stops_;
  std::string held_;
};

// The text a generation shows for its token ids: each token's piece, joined to the prompt's text as
// the tokenizer joins it (text::StreamDecoder primed with the prompt), passed through a StopMatcher,
// and the decoder's and the matcher's tails at the end. One per generation: Generator::continue_ids
// drives one, and serve one per batched request (the batch samples, the request's thread shows).
class TextStream {
 public:
  // `stop_strings` and `on_token` must outlive the stream; `on_token` may be empty.
  TextStream(const text::Tokenizer& tokenizer, std::span<const int32_t> prompt,
             std::span<const std::string> stop_strings, const TokenCallback& on_token,
             std::span<const int32_t> shown_control_tokens = {});
  // Shows token `id`'s text; false to stop: the callback returned false, or a stop string appeared
  // (stopped_by_string()).
  bool push(int32_t id);
  // After the last token, unless a stop string ended the text: what the decoder and the stop matcher
  // still hold (a stop string may appear in it: stopped_by_string() says so afterwards).
  void finish();
  bool stopped_by_string() const noexcept { return stopped_by_string_; }

 private:
  bool deliver(std::string_view piece, int32_t id);

  text::StreamDecoder decoder_;
  std::span<const std::string> stop_strings_;
  const TokenCallback& on_token_;
  StopMatcher stops_;
  bool stopped_by_string_ = false;
};

class Generator {
 public:
  Generator(model::Transformer& model, const text::Tokenizer& tokenizer, text::Sampler& sampler,
            memory::ExecutionContext& ctx, GeneratorConfig config);

  Stats generate(std::string_view prompt, const Options& options, const TokenCallback& on_token);
  // The same from token ids (tests, bench); `out` receives the generated ids when not null.
  Stats generate_ids(std::span<const int32_t> prompt, const Options& options, const TokenCallback& on_token,
                     std::vector<int32_t>* out = nullptr);
  // The same for a sequence whose first `cached` tokens are already in the KV cache at positions
  // [0, cached) — a conversation's next turn, a request sharing a previous one's prefix: only
  // prompt[cached..] is processed (at least its last token, for the logits). Cells past the prompt are
  // overwritten as generation reaches them; attention never reads a cell beyond the current position.
  // Sequence::generate knows what the cache holds and passes `cached`; callers use that.
  Stats continue_ids(std::span<const int32_t> prompt, int64_t cached, const Options& options,
                     const TokenCallback& on_token, std::vector<int32_t>* out = nullptr);

  // Prefill only: runs `tokens` at [pos, pos+n) in chunks and returns the last chunk's sampled token.
  int32_t prefill(std::span<const int32_t> tokens, int64_t pos);
  // One decode step: forward `token` at `pos`, sample, return the next token.
  int32_t decode_step(int32_t token, int64_t pos);
  const memory::ForwardStats& step_stats() const noexcept { return step_.stats(); }

  // Speculative decoding from now on (null: plain decoding): before each decode step `drafter` may
  // propose up to draft_max tokens, verified in one forward pass; a draft shorter than draft_min is not
  // run. The text is what plain decoding gives (speculative.hpp). InvalidArgument when the plan
  // priced no verification step that long (plan::PlanOptions::draft_max).
  void speculate_with(Drafter* drafter, uint32_t draft_max, uint32_t draft_min = 0);

 private:
  int32_t sample_in_step(std::span<const int32_t> tokens, int64_t pos);
  // The token after `token` (run at `pos`, which moves on by one): from the verified queue when it
  // holds one, else from a verification of a draft of at most `room` tokens, else a decode step.
  int32_t next_token(int32_t token, int64_t& pos, int64_t room, Stats& s);
  int32_t verify(int32_t token, int64_t pos, Stats& s);
  int32_t probe(int32_t token, int64_t pos, Stats& s);
  int32_t timed_decode_step(int32_t token, int64_t pos);  // decode_step, its time into step_seconds_

  Drafter* drafter_ = nullptr;
  uint32_t draft_max_ = 0, draft_min_ = 0;
  std::vector<int32_t> context_;                // prompt and generated tokens, what the drafter reads
  std::vector<int32_t> draft_, batch_, ready_;  // reserved by speculate_with: steps do not allocate
  size_t ready_at_ = 0;                         // ready_[ready_at_..] are verified tokens not yet handed out
  DraftPacing pacing_;
  double step_seconds_ = 0;  // a decode step's time, a moving average (0: none measured yet)
  std::chrono::steady_clock::time_point draft_start_;

  model::Transformer& model_;
  const text::Tokenizer& tokenizer_;
  text::Sampler& sampler_;
  memory::ExecutionContext& ctx_;
  GeneratorConfig config_;
  memory::ForwardScope step_;
};

}  // namespace skainet::generate
