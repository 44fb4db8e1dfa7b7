// skainet::generate — the generation loop: prefill in chunks that fit the prefill slab, then one token
// per decode step, with the step scope reset at every step boundary (zero heap allocations per step in
// steady state), streaming text through a callback.
//
//   generate::Generator gen(llama, tokenizer, sampler, ctx, {.step_slab_bytes = plan.prefill->step_bytes,
//                                                            .prefill_chunk = plan.prefill->tokens});
//   generate::Stats s = gen.generate("Once upon a time", {.max_tokens = 128},
//                                    [](std::string_view piece, int32_t) { std::cout << piece; return true; });
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "skainet/model.hpp"
#include "skainet/text.hpp"

namespace skainet::generate {

struct GeneratorConfig {
  uint64_t step_slab_bytes = 0;   // the plan's step slab (the larger of decode and prefill)
  uint32_t prefill_chunk = 64;    // tokens per prefill step
};

struct Options {
  int32_t max_tokens = 128;       // -n; < 0: until EOS or the context is full
  bool add_special = true;        // BOS/EOS as the vocabulary asks
  bool parse_special = true;      // "<s>" in the prompt becomes the control token
  bool stop_at_eos = true;
};

enum class StopReason : uint8_t { MaxTokens, EndOfGeneration, ContextFull, Callback };
std::string_view stop_reason_name(StopReason r) noexcept;

struct Stats {
  int32_t prompt_tokens = 0, generated_tokens = 0;
  double prompt_seconds = 0, decode_seconds = 0, first_token_seconds = 0;
  uint64_t step_slab_bytes = 0, step_slab_peak = 0, layer_slab_peak = 0;
  uint64_t overflow_bytes = 0, overflow_count = 0;  // highest per step / total, both slabs
  StopReason stop = StopReason::MaxTokens;
  double prompt_tokens_per_second() const noexcept { return prompt_seconds > 0 ? prompt_tokens / prompt_seconds : 0; }
  // Decode rate over the tokens after the first (the first comes from prefill).
  double decode_tokens_per_second() const noexcept {
    return decode_seconds > 0 && generated_tokens > 1 ? (generated_tokens - 1) / decode_seconds : 0;
  }
};

// Called with the text that became complete (maybe empty) and the token id; return false to stop.
using TokenCallback = std::function<bool(std::string_view piece, int32_t id)>;

class Generator {
 public:
  Generator(model::Llama& model, const text::Tokenizer& tokenizer, text::Sampler& sampler,
            memory::ExecutionContext& ctx, GeneratorConfig config);

  Stats generate(std::string_view prompt, const Options& options, const TokenCallback& on_token);
  // The same from token ids (tests, bench); `out` receives the generated ids when not null.
  Stats generate_ids(std::span<const int32_t> prompt, const Options& options, const TokenCallback& on_token,
                     std::vector<int32_t>* out = nullptr);

  // Prefill only: runs `tokens` at [pos, pos+n) in chunks and returns the last chunk's sampled token.
  int32_t prefill(std::span<const int32_t> tokens, int64_t pos);
  // One decode step: forward `token` at `pos`, sample, return the next token.
  int32_t decode_step(int32_t token, int64_t pos);
  const memory::ForwardStats& step_stats() const noexcept { return step_.stats(); }

 private:
  int32_t sample_in_step(std::span<const int32_t> tokens, int64_t pos);

  model::Llama& model_;
  const text::Tokenizer& tokenizer_;
  text::Sampler& sampler_;
  memory::ExecutionContext& ctx_;
  GeneratorConfig config_;
  memory::ForwardScope step_;
};

}  // namespace skainet::generate
