#include "skainet/model/sequence.hpp"

namespace skainet::generate {
namespace {

plan::SequencePlan sequence_of(const plan::MemoryPlan& p) {
  std::optional<plan::SequencePlan> s = p.sequence();
  if (!s || !p.model) throw InvalidArgument("a sequence needs a plan with a model (its KV cache and slabs)");
  return *s;
}

}  // namespace

Sequence::Sequence(const plan::MemoryPlan& p, memory::ModelScope& scope, const load::LoadedModel& loaded,
                   const text::Tokenizer& tokenizer, int threads)
    : plan(sequence_of(p)),
      kv(scope, plan.kv),
      llama(*p.model, model::TransformerWeights::bind(loaded, *p.model), kv, plan.layer_bytes),
      ctx(threads),
      sampler(tokenizer.vocab_size(), text::SamplerConfig{}, plan.kv.n_ctx),
      generator(llama, tokenizer, sampler, ctx,
                {.step_slab_bytes = plan.step_bytes,
                 .prefill_chunk = plan.prefill_chunk,
                 .verify_rows = plan.verify_rows}),
      vocab_size_(tokenizer.vocab_size()) {
  ctx.reserve_scratch(plan.scratch_bytes);
}

Generator& Sequence::sample_with(const text::SamplerConfig& config) {
  sampler = text::Sampler(vocab_size_, config, plan.kv.n_ctx);
  return generator;
}

}  // namespace skainet::generate
