// skainet::generate::Batch — continuous batching: N generate::Sequences advanced by one forward pass
// per step, the weights read once for all their rows. Each step every active sequence brings its next
// token (decode) or the next chunk of its prompt (prefill joins running decodes, in the rows the
// decodes leave); each samples its next token from its own row with its own sampler. The batch owns
// what a pass draws from — the layer slab (in its model::Transformer bound to no cache), the step
// slab and the execution context with the matmul scratch — sized by the plan's BatchPlan; a sequence
// brings only its KV cache and sampler (docs/architecture.md, "Sequence").
//
//   generate::Batch batch(engine.plan, engine.loaded, *engine.tokenizer, threads);
//   for (auto& s : seqs) s->sample_with({.temperature = 0}), batch.add(*s, prompt, {.max_tokens = 64});
//   batch.slot(i).cached;                       // prompt tokens its sequence's cache already held
//   while (batch.active())
//     for (const generate::Batch::Sampled& t : batch.step()) out[t.slot].push_back(t.token);
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "skainet/model/sequence.hpp"

namespace skainet::generate {

// OpenAI's most alternatives per token (top_logprobs), and so the most a response may ask for.
constexpr int32_t kMaxTopLogprobs = 20;

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0;
};
// One sampled token's log-probability and its position's most likely tokens', from the log-softmax of
// the model's raw logits (before penalties, temperature and filters: llama-server's default, its
// post_sampling_probs false). Fixed size, so handing it on allocates nothing.
struct TokenLogprobs {
  TokenLogprob sampled;
  int32_t n_top = 0;
  std::array<TokenLogprob, kMaxTopLogprobs> top{};  // best first, ties: lowest id
};
// `logits`' log-softmax at `token`, and its `top` best (clamped to kMaxTopLogprobs) into `out`. Two
// passes over the vocabulary and no allocation.
void log_probabilities(std::span<const float> logits, int32_t token, int32_t top, TokenLogprobs& out) noexcept;

class Batch {
 public:
  // A token a sequence sampled in a step; `slot` is what add() returned for it.
  struct Sampled {
    uint32_t slot = 0;
    int32_t token = -1;
    bool has_logprobs = false;  // the slot's Options::logprobs >= 0
    TokenLogprobs logprobs;
  };
  // Where one sequence stands. The prompt is the caller's and must outlive the generation.
  struct Slot {
    Sequence* seq = nullptr;
    std::span<const int32_t> prompt;
    int64_t cached = 0;       // prompt tokens taken from the sequence's cache (not computed)
    int64_t prompt_done = 0;  // prompt tokens in the cache
    int64_t pos = 0;          // position of the next row
    int32_t next = -1;        // the token its next decode row runs
    int32_t generated = 0, max_tokens = 0;
    bool stop_at_eos = true, active = false;
    int32_t logprobs = -1;                    // Options::logprobs
    StopReason stop = StopReason::MaxTokens;  // why it finished, once it has
    Drafter* drafter = nullptr;               // speculative decoding (speculate()); null: none
    DraftPacing pacing;                       // as Generator's: probes first, pauses while drafts miss
    int32_t probe = -1;                       // the token this step's probe drafted (-1: none)
    // As Stats counts them: drafted tokens verified, and accepted; probes, and those that hit.
    int64_t drafted = 0, accepted = 0, probes = 0, probe_hits = 0;
    // Why its sampler failed (a grammar that allows no token here), which ended this slot alone
    // (stop Failed); the other slots of the step go on.
    std::string error = {};
  };

  // `plan` must carry a batch (MemoryPlan::batched()); the weights are `loaded`'s, shared with the
  // sequences the batch steps (built from the same plan).
  Batch(const plan::MemoryPlan& plan, const load::LoadedModel& loaded, const text::Tokenizer& tokenizer, int threads);
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  // Starts `seq` on `prompt` in a free slot (one no sequence occupies, or whose sequence finished)
  // and returns the slot. Its sampler is reset and shown the prompt, as Generator does; it uses the
  // sequence's KV cache and sampler only, and computes only what follows the prefix of the prompt the
  // cache holds (Sequence::start; none with Recompute), keeping the sequence's record of its cache
  // (Sequence::cached) as Sequence::generate does. InvalidArgument when every slot is busy, the
  // prompt is empty or leaves its context no room, or the sequence is already in the batch. The batch
  // works in tokens: of `options` it reads max_tokens, stop_at_eos and logprobs (text, stop strings: the
  // caller's).
  uint32_t add(Sequence& seq, std::span<const int32_t> prompt, const Options& options,
               PrefixReuse reuse = PrefixReuse::Reuse, Drafter* drafter = nullptr);
  // Speculative decoding for sequences added with a drafter: before a step, each decoding one may
  // have `drafter` propose up to draft_max tokens (in the rows the decodes and prompts leave; a draft
  // shorter than draft_min is not run), which run in the same pass after its next token and are
  // verified row by row as Generator does, so the tokens are those of plain decoding; paced as
  // Generator paces them (DraftPacing), a verification paying when it accepts anything. InvalidArgument
  // when the plan priced no drafts (PlanOptions::draft_max) or draft_max is 0.
  void speculate(uint32_t draft_max, uint32_t draft_min = 0);
  // Ends slot `i`'s generation before its next step (StopReason::Callback: its reader stopped it).
  void cancel(uint32_t i);

  // One forward pass over every active sequence: decode rows first, then prompt chunks in the rows
  // left. Returns the tokens sampled (by sequences that decoded or finished their prompt), valid
  // until the next step; empty when no sequence is active. Allocates nothing.
  std::span<const Sampled> step();

  bool active() const noexcept;
  const Slot& slot(uint32_t i) const { return slots_.at(i); }
  const plan::BatchPlan& plan() const noexcept { return plan_; }
  const memory::ForwardStats& step_stats() const noexcept { return step_.stats(); }
  const memory::ForwardStats& layer_stats() const noexcept { return model_.layer_stats(); }
  const memory::ExecutionContext& context() const noexcept { return ctx_; }

 private:
  void gather_rows();
  uint32_t draft(uint32_t i, size_t free_rows);
  void sample(const Tensor& logits);
  void sample_entry(uint32_t i, int64_t rows, const int32_t* run, const float* kept, size_t vocab);
  void emit(uint32_t i, int32_t token, std::span<const float> logits);

  plan::BatchPlan plan_;
  const text::Tokenizer& tokenizer_;
  model::Transformer model_;
  memory::ExecutionContext ctx_;
  memory::ForwardScope step_;
  std::vector<Slot> slots_;
  // Filled each step, sized once: the rows' tokens, one entry per stepping slot, what was sampled.
  std::vector<int32_t> tokens_;
  std::vector<model::BatchEntry> entries_;
  std::vector<uint32_t> entry_slot_;
  std::vector<Sampled> sampled_;  // up to a token per row (a verified draft yields several)
  size_t n_tokens_ = 0, n_entries_ = 0, n_sampled_ = 0;
  // Speculation, reserved by speculate(): per slot, the context its drafter reads (prompt and
  // generated tokens) and its draft; a prompt's rows taken this step.
  uint32_t draft_max_ = 0, draft_min_ = 0;
  std::vector<std::vector<int32_t>> contexts_, drafts_;
  std::vector<size_t> prompt_rows_;
};

}  // namespace skainet::generate
