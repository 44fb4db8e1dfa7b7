#include <chrono>

#include <fmt/format.h>

#include "skainet/generate.hpp"

namespace skainet::generate {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

Generator::Generator(model::Llama& model, const text::Tokenizer& tokenizer, text::Sampler& sampler,
                     memory::ExecutionContext& ctx, GeneratorConfig config)
    : model_(model), tokenizer_(tokenizer), sampler_(sampler), ctx_(ctx), config_(config),
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

Stats Generator::generate(std::string_view prompt, const Options& options, const TokenCallback& on_token) {
  const std::vector<int32_t> ids = tokenizer_.encode(prompt, options.add_special, options.parse_special);
  return generate_ids(ids, options, on_token);
}

Stats Generator::generate_ids(std::span<const int32_t> prompt, const Options& options, const TokenCallback& on_token,
                              std::vector<int32_t>* out) {
  Stats s;
  s.prompt_tokens = static_cast<int32_t>(prompt.size());
  const int64_t ctx_cells = model_.ctx_size();
  if (static_cast<int64_t>(prompt.size()) >= ctx_cells)
    throw InvalidArgument(fmt::format("the prompt has {} tokens; the context of {} leaves no room to generate (--ctx)",
                                      prompt.size(), ctx_cells));
  sampler_.reset();
  text::StreamDecoder decoder(tokenizer_);
  // Prime the decoder with the prompt so the first generated piece joins it correctly.
  for (int32_t t : prompt) decoder.push(t);

  const auto start = Clock::now();
  int32_t next = prefill(prompt, 0);
  s.prompt_seconds = s.first_token_seconds = seconds_since(start);

  int64_t pos = static_cast<int64_t>(prompt.size());
  const auto decode_start = Clock::now();
  s.stop = StopReason::MaxTokens;
  while (options.max_tokens < 0 || s.generated_tokens < options.max_tokens) {
    ++s.generated_tokens;
    sampler_.accept(next);
    if (out) out->push_back(next);
    if (options.stop_at_eos && tokenizer_.is_eog(next)) {
      s.stop = StopReason::EndOfGeneration;
      break;
    }
    if (on_token && !on_token(decoder.push(next), next)) {
      s.stop = StopReason::Callback;
      break;
    }
    if (options.max_tokens >= 0 && s.generated_tokens >= options.max_tokens) break;
    if (pos >= ctx_cells) {
      s.stop = StopReason::ContextFull;
      break;
    }
    next = decode_step(next, pos++);
  }
  s.decode_seconds = seconds_since(decode_start);
  if (on_token) {
    const std::string tail = decoder.flush();
    if (!tail.empty()) on_token(tail, -1);
  }

  const memory::ForwardStats& step = step_.stats();
  const memory::ForwardStats& layer = model_.layer_stats();
  s.step_slab_bytes = step.slab_bytes;
  s.step_slab_peak = step.peak;
  s.layer_slab_peak = layer.peak;
  s.overflow_bytes = std::max(step.max_overflow_bytes, layer.max_overflow_bytes);
  s.overflow_count = step.total_overflow_count + layer.total_overflow_count;
  return s;
}

std::string_view stop_reason_name(StopReason r) noexcept {
  switch (r) {
    case StopReason::MaxTokens: return "max-tokens";
    case StopReason::EndOfGeneration: return "end-of-generation";
    case StopReason::ContextFull: return "context-full";
    case StopReason::Callback: return "callback";
  }
  return "?";
}

}  // namespace skainet::generate
