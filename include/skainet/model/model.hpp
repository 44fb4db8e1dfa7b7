// skainet::model — the decoder-only transformer (model::Transformer), one forward pass for every
// family of arch::families(), their differences read from arch::Features and the shape, over weights a
// ResolvedGguf loaded. It binds views and owns nothing but its layer slab; every op goes through the
// ExecutionContext, so the same code runs eagerly or recorded.
//
//   const plan::SequencePlan sizes = *plan.sequence();  // generate::Sequence does this wiring
//   model::Transformer llama(shape, model::TransformerWeights::bind(loaded, shape), kv, sizes.layer_bytes);
//   memory::ForwardScope step({.slab_bytes = sizes.step_bytes});
//   ctx.step(step, [&] {
//     Tensor logits = llama.forward(ctx, tokens, /*pos=*/0);   // [1, vocab], from the step slab
//     next = sampler.sample(logits.data<float>());              // read it before the step ends
//   });
//
// Memory contract (plan::estimate_slabs mirrors it buffer for buffer): the step scope — the context's
// active scope when forward() is called — receives the embeddings, one retained residual per layer,
// the final norm and the logits; everything else lives in the layer slab, reset after each layer.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "skainet/model/load.hpp"
#include "skainet/compute/memory.hpp"
#include "skainet/model/plan.hpp"

namespace skainet::model {

struct LayerWeights {
  Tensor attn_norm, wq, wk, wv, wo;
  Tensor bq, bk, bv;          // Qwen2 (and llama files that carry them)
  Tensor q_norm, k_norm;      // Qwen3, Gemma 3: per-head RMS norm weights [head_dim]
  Tensor attn_post_norm, ffn_post_norm;  // Gemma 2/3
  Tensor ffn_norm, w_gate, w_up, w_down;
};

struct TransformerWeights {
  Tensor tok_embd, output_norm, output;  // output is tok_embd when the model ties them
  Tensor rope_freqs;                     // Llama 3.1+: RoPE frequency divisors, or undefined
  std::vector<LayerWeights> layers;
  // Binds every tensor the architecture needs, checking its shape; Error naming each missing or
  // mis-shaped tensor (all of them, not just the first).
  static TransformerWeights bind(const load::LoadedModel& loaded, const arch::ModelShape& shape);
};

// Which positions forward() returns logits for: the last (generation) or every one (a recorded
// prefill, conformity checks). All is outside the plan's step slab estimate: its extra demand is
// counted as overflow, as any demand the plan did not foresee.
enum class Logits : uint8_t { Last, All };

class Transformer {
 public:
  Transformer(arch::ModelShape shape, TransformerWeights weights, load::KvCacheStore& kv, uint64_t layer_slab_bytes);

  // Runs `tokens` at positions [pos, pos + n): writes their K/V into the cache and returns the logits
  // of the last token, F32 [1, vocab] (or of every token, [n, vocab]), drawn from the active scope.
  // Throws InvalidArgument when the context would overflow (naming pos, n and n_ctx) — the cache is
  // never written past its end.
  Tensor forward(memory::ExecutionContext& ctx, std::span<const int32_t> tokens, int64_t pos,
                 Logits which = Logits::Last);

  const arch::ModelShape& shape() const noexcept { return shape_; }
  uint32_t n_ctx() const noexcept { return kv_.n_ctx(); }
  const memory::ForwardStats& layer_stats() const noexcept { return layer_scope_.stats(); }

 private:
  Tensor layer(memory::ExecutionContext& ctx, uint32_t l, const Tensor& x, int64_t pos);
  Tensor attention(memory::ExecutionContext& ctx, uint32_t l, const Tensor& q, int64_t pos);

  arch::ModelShape shape_;
  TransformerWeights w_;
  load::KvCacheStore& kv_;
  memory::ForwardScope layer_scope_;
};

}  // namespace skainet::model
