// skainet::generate::Sequence — one sequence over weights loaded once, built from the plan's final
// sizes (plan::SequencePlan): its KV cache, the model bound to the shared weights and that cache, an
// execution context with the matmul scratch reserved, a sampler and the generator. generate::Engine
// owns one for `run`, `chat` and `bench`; each of `serve`'s slots is one.
//
//   generate::Sequence seq(engine.plan, engine.scope, engine.loaded, *engine.tokenizer, threads);
//   seq.sample_with({.temperature = 0}).generate("Once upon a time", {.max_tokens = 64}, on_token);
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

class Sequence {
 public:
  // `plan` must have a model (MemoryPlan::sequence()); the KV cache is allocated in `scope`, where
  // `loaded` holds the weights. Nothing here grows after construction: decode steps do not allocate.
  Sequence(const plan::MemoryPlan& plan, memory::ModelScope& scope, const load::LoadedModel& loaded,
           const text::Tokenizer& tokenizer, int threads);
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  // Replaces the sampler by one of `config` (a request's sampling; a sampler's configuration is
  // fixed at construction), its history bounded by the context, and returns the generator using it.
  Generator& sample_with(const text::SamplerConfig& config);

  const plan::SequencePlan plan;
  load::KvCacheStore kv;
  model::Transformer llama;            // the shared weights over this sequence's KV cache; owns the layer slab
  memory::ExecutionContext ctx;  // its thread pool and the reserved matmul scratch
  text::Sampler sampler;
  Generator generator;           // owns the step slab; samples with `sampler`

 private:
  int32_t vocab_size_;
};

}  // namespace skainet::generate
