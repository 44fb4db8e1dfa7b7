// skainet::generate — speculative decoding: a drafter proposes the next few tokens, the target model
// verifies them in one forward pass (model::Logits::All over the draft), and the generator keeps the
// longest prefix its own sampler agrees with, plus the token it sampled where they part.
//
//   generate::SpecOptions spec{.type = generate::SpecType::NgramSimple, .draft_max = 16};
//   engine_options.plan.draft_max = spec.draft_max;                        // the plan prices the verification
//   auto e = generate::Engine::open("model.gguf", engine_options);
//   generate::Speculation s = generate::open_speculation(spec, "model.gguf", *e, engine_options);
//   generate::Generator& gen = e->sequence->sample_with(sampling);
//   gen.speculate_with(s.drafter.get(), spec);                             // null: plain decoding
//   gen.generate("…", {.max_tokens = 128}, on_token);                      // Stats::drafted/accepted
//
// Drafts are point masses (the n-gram's continuation; the draft model's greedy choice), so speculative
// sampling's test — accept a drafted x with probability min(1, p(x)/q(x)), on rejection draw from
// norm(max(0, p − q)) — is exactly: draw from the target's sampler at that position and accept while the
// draw equals the draft. Each row is sampled as plain decoding would sample it (same history, same
// random stream), so for a seed the text is the text plain decoding gives, at any temperature.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "skainet/model/engine.hpp"

namespace skainet::generate {

enum class SpecType : uint8_t {
  None,
  NgramSimple,  // prompt lookup: the continuation of the last n-gram's latest earlier occurrence
  DraftModel,   // a smaller model with the same vocabulary (-md)
};
std::string_view spec_type_name(SpecType t) noexcept;
std::optional<SpecType> parse_spec_type(std::string_view name) noexcept;  // llama.cpp's --spec-type names

struct SpecOptions {
  SpecType type = SpecType::None;
  std::filesystem::path draft_model;  // DraftModel
  uint32_t draft_max = 16;            // tokens drafted per step at most (llama.cpp's default)
  uint32_t draft_min = 0;             // a shorter draft is not verified (decoding goes on one token)
  uint32_t ngram_n = 12;              // n-gram looked up (llama.cpp's --spec-ngram-size-n)
  uint32_t ngram_m = 48;              // continuation copied at most (--spec-ngram-size-m)
};

// Proposes what follows `context` (every token so far; its last one is the next to run through the
// target, not yet in its KV cache). Writes at most `max` tokens into `out` (cleared first); an empty
// draft means "decode one token". Must not allocate once warmed (out has room for max).
class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual void draft(std::span<const int32_t> context, uint32_t max, std::vector<int32_t>& out) = 0;
  // A draft a step can verify, into `out` (cleared first): at most `max` tokens (the drafter is not
  // asked when max is under max(min, 1)), none when shorter than `min`. Returns its length.
  uint32_t draft_within(std::span<const int32_t> context, int64_t max, uint32_t min, std::vector<int32_t>& out);
};

// The n-gram lookup itself: the last `n` tokens of `context` are searched for backwards; the tokens
// after the latest earlier occurrence, at most min(m, max) and no further than the context, are the
// draft. No occurrence, or a context shorter than n + 1: nothing.
void ngram_draft(std::span<const int32_t> context, uint32_t n, uint32_t m, uint32_t max, std::vector<int32_t>& out);

class NgramDrafter final : public Drafter {
 public:
  NgramDrafter(uint32_t n, uint32_t m);
  void draft(std::span<const int32_t> context, uint32_t max, std::vector<int32_t>& out) override;

 private:
  uint32_t n_, m_;
};

// Drafts greedily with a second model's sequence. It remembers which tokens its KV cache holds, so each
// draft first runs only what the context added since (the accepted tokens; a conversation's new turn).
class ModelDrafter final : public Drafter {
 public:
  explicit ModelDrafter(Sequence& draft);
  void draft(std::span<const int32_t> context, uint32_t max, std::vector<int32_t>& out) override;

 private:
  Sequence& seq_;
  std::vector<int32_t> cached_;  // the tokens whose K/V the draft's cache holds, by position
};

// Refuses (InvalidArgument naming both files and the first difference) a draft vocabulary that is not
// the target's: the draft's ids are fed to the target as they are.
void check_same_vocabulary(const text::Vocab& target, const std::filesystem::path& target_file,
                           const text::Vocab& draft, const std::filesystem::path& draft_file);

// What `run`, `chat` and `serve` hold while speculating: a drafter per sequence drafted for and, for a
// draft model, its engine and the draft sequences beyond the engine's own.
struct Speculation {
  std::unique_ptr<Engine> draft_engine;
  std::vector<std::unique_ptr<Sequence>> draft_sequences;
  std::vector<std::unique_ptr<Drafter>> drafters;  // empty: SpecType::None
  Drafter* drafter(size_t i = 0) const noexcept { return i < drafters.size() ? drafters[i].get() : nullptr; }
};
// Checks the options (InvalidArgument), opens the draft model with the target's context and threads
// (its vocabulary checked), and builds `sequences` drafters (serve: one per slot, each a draft sequence
// of its own on one thread; the draft engine's plan prices them).
Speculation open_speculation(const SpecOptions& spec, const std::filesystem::path& target_file, const Engine& target,
                             const EngineOptions& target_options, uint32_t sequences = 1);

}  // namespace skainet::generate
