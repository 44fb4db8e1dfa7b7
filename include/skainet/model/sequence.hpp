// skainet::generate::Sequence — one sequence over weights loaded once, built from the plan's final
// sizes (plan::SequencePlan): its KV cache, the model bound to the shared weights and that cache, an
// execution context with the matmul scratch reserved, a sampler and the generator. generate::Engine
// owns one for `run`, `chat` and `bench`; each of `serve`'s slots is one.
//
//   generate::Sequence seq(engine.plan, engine.scope, engine.loaded, *engine.tokenizer, threads);
//   seq.sample_with({.temperature = 0}).generate("Once upon a time", {.max_tokens = 64}, on_token);
//   seq.sample_with(sampling);
//   generate::Stats s = seq.generate(prompt_ids, options, on_token);   // reuses the cached prefix
//   s.cached_tokens;                                                    // how many were not computed
//
// Per sequence: the KV cache, the sampler's history and the generator's positions. The weights are
// shared by every sequence; the slabs (the layer slab inside `llama`, the step slab inside
// `generator`) and the context's scratch are what one forward pass draws from, one set per sequence
// while each sequence runs its own pass; a generate::Batch steps several sequences on one set of its
// own, using only their KV caches and samplers (docs/architecture.md, "Sequence").
#pragma once

#include "skainet/model/generate.hpp"
#include "skainet/model/load.hpp"
#include "skainet/model/plan.hpp"

namespace skainet::generate {

// Whether Sequence::generate may take the prompt's leading tokens from the KV cache (llama-server's
// `cache_prompt`) or computes the whole prompt afresh.
enum class PrefixReuse : uint8_t { Reuse, Recompute };

// What a sequence holds beside its KV cache and sampler: everything to run its own forward passes
// (`run`, `chat`, `bench`), or nothing more, as a member of a generate::Batch, which brings the slabs,
// scratch and threads of the passes it runs over its members' caches (serve's slots).
enum class SequenceParts : uint8_t { Whole, KvCache };

// A sequence's cached prefix copied out of its KV cache (serve's prompt cache, --cache-ram): the
// tokens, and for each layer the keys of their cells, then the values.
struct SavedPrefix {
  std::vector<int32_t> tokens;
  std::vector<std::byte> cells;
  uint64_t bytes() const noexcept { return cells.size() + tokens.size() * sizeof(int32_t); }
};

// How many leading tokens `a` and `b` share.
size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) noexcept;
// How many of `prompt`'s leading tokens a cache holding `cached` lets a generation skip: the common
// prefix, less the prompt's last token (it must run, for its logits).
size_t reusable_prefix(std::span<const int32_t> cached, std::span<const int32_t> prompt) noexcept;

class Sequence {
 public:
  // `plan` must have a model (MemoryPlan::sequence()); the KV cache is allocated in `scope`, where
  // `loaded` holds the weights. Nothing here grows after construction: decode steps do not allocate.
  // With SequenceParts::KvCache the slabs are empty and the context has one thread and no scratch:
  // the sequence's own passes would draw every tensor from the heap, so only a Batch runs it.
  Sequence(const plan::MemoryPlan& plan, memory::ModelScope& scope, const load::LoadedModel& loaded,
           const text::Tokenizer& tokenizer, int threads, SequenceParts parts = SequenceParts::Whole);
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  // Replaces the sampler by one of `config` (a request's sampling; a sampler's configuration is
  // fixed at construction), its history bounded by the context, and returns the generator using it.
  Generator& sample_with(const text::SamplerConfig& config);

  // Generates after `prompt` (Generator::continue_ids), computing only what follows the longest
  // prefix of it whose keys and values the cache already holds (`Stats::cached_tokens` of them; the
  // last prompt token always runs, for its logits). Afterwards the cache is known to hold the prompt
  // and every generated token that was forwarded (all but the last). Positions and the sampler's
  // history are those of a fresh run, so greedy text is the same with and without reuse. `out`, when
  // not null, receives the generated ids (appended).
  Stats generate(std::span<const int32_t> prompt, const Options& options, const TokenCallback& on_token,
                 PrefixReuse reuse = PrefixReuse::Reuse, std::vector<int32_t>* out = nullptr);

  // How many of `prompt`'s leading tokens generate() would take from the cache: the common prefix
  // with cached(), less the last prompt token (it must run).
  size_t reusable(std::span<const int32_t> prompt) const noexcept;
  // For passes run by someone else (generate::Batch) over this sequence's cache. start(): a
  // generation of `prompt` begins, taking reusable(prompt) tokens from the cache (none with
  // Recompute), which it returns; the record keeps only those, as the cells after them will be
  // overwritten. ran(): a pass wrote `tokens` into the cells after the recorded ones. Neither allocates.
  size_t start(std::span<const int32_t> prompt, PrefixReuse reuse);
  void ran(std::span<const int32_t> tokens);
  // The tokens whose keys and values are in the cache, cell i holding token i, as far as generate()
  // knows. A forward pass run around it (on `generator` directly) makes this empty: the cells may
  // have been overwritten.
  std::span<const int32_t> cached() const noexcept;
  // What one cached token's keys and values take over every layer, as save() copies them.
  uint64_t cell_bytes() const noexcept;
  // cached() and its cells copied out of the cache. Allocates: for request boundaries, never a step.
  SavedPrefix save() const;
  // Puts a saved prefix into this cache's first cells, after which cached() is its tokens. InvalidArgument
  // when it does not come from a cache of this one's shape (layers, types, width) or overflows the context.
  void restore(const SavedPrefix& saved);

  const plan::SequencePlan plan;
  load::KvCacheStore kv;
  model::Transformer llama;      // the shared weights over this sequence's KV cache; owns the layer slab
  memory::ExecutionContext ctx;  // its thread pool and the reserved matmul scratch
  text::Sampler sampler;
  Generator generator;  // owns the step slab; samples with `sampler`

 private:
  bool record_current() const noexcept;
  // fn(tensor, offset, bytes) for the first `tokens` rows of each layer's K, then V: where save() puts
  // them in SavedPrefix::cells, and restore() takes them from.
  template <class Fn>
  void each_prefix_rows(size_t tokens, Fn&& fn) const;

  int32_t vocab_size_;
  std::vector<int32_t> cached_;     // capacity n_ctx + 1, reserved once: recording a request allocates nothing
  std::vector<int32_t> generated_;  // generate()'s own `out` when the caller passes none; reserved likewise
  // The generator's step count when cached_ was recorded: any other forward pass moves it.
  uint64_t recorded_at_step_ = 0;
};

}  // namespace skainet::generate
