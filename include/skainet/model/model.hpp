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
// A batch (generate::Batch does this wiring): one pass over the next tokens of several sequences, each
// with its own KV cache and position; the weights are read once for all their rows.
//
//   model::Transformer shared(shape, model::TransformerWeights::bind(loaded, shape), batch.layer_bytes);
//   const int32_t tokens[] = {a_next, b0, b1, b2};                 // the sequences' rows, concatenated
//   const model::BatchEntry entries[] = {{&kv_a, 17, 1}, {&kv_b, 0, 3}};
//   Tensor logits = shared.forward(ctx, tokens, entries);          // [2, vocab]: row i is entry i's last
//
// Memory contract (plan::estimate_slabs mirrors it buffer for buffer): the step scope — the context's
// active scope when forward() is called — receives the embeddings, one retained residual per layer,
// the final norm and the logits; everything else lives in the layer slab, reset after each layer.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "skainet/model/load.hpp"
#include "skainet/compute/kernel_ops.hpp"
#include "skainet/compute/memory.hpp"
#include "skainet/model/plan.hpp"

namespace skainet::model {

struct LayerWeights {
  Tensor attn_norm, wq, wk, wv, wo;
  Tensor bq, bk, bv;                     // Qwen2 (and llama files that carry them)
  Tensor q_norm, k_norm;                 // Qwen3, Gemma 3: per-head RMS norm weights [head_dim]
  Tensor attn_post_norm, ffn_post_norm;  // Gemma 2/3
  Tensor ffn_norm, w_gate, w_up, w_down;
  Tensor router, gate_exps, up_exps, down_exps;  // a mixture of experts (arch::Features::moe), else undefined
  Tensor sinks, bo;                              // gpt-oss: attention sinks [heads], attn_output's bias
  Tensor router_bias, gate_exps_bias, up_exps_bias, down_exps_bias;  // gpt-oss: [experts], [experts, width]
};

// The mixture-of-experts FFN (qwen3moe, Mixtral), as llama.cpp's build_moe_ffn with softmax gating:
// probabilities p = softmax(router logits) over every expert, the k most probable experts chosen,
// their p renormalized to sum 1 (norm_topk_prob; the same as a softmax over the chosen logits), and
// out = sum over chosen e of w_e * down_e(silu(gate_e(x)) * up_e(x)).
// (ops::expert_ids and ops::expert_weights hold the routing.)
// The stacks as ggml stores them: router [experts, dim], gate and up [experts, expert_ffn, dim], down
// [experts, dim, expert_ffn]; expert e is the 2-D matrix at index e of a stack.
// gpt-oss adds a bias to the router's logits and to each expert's gate, up and down outputs (the
// expert's row of [experts, width]; llama.cpp's ggml_add_id), and runs the clamped SwiGLU
// (ops::swiglu_oai); its gating (softmax over the chosen logits) is the renormalized top-k above.
struct ExpertWeights {
  Tensor router, gate, up, down;
  // Optional (--record-expert-stats): routed[e] += 1 for each row routed to expert e. Caller-owned,
  // sized once; counting allocates nothing.
  std::span<uint64_t> routed = {};
  Tensor router_bias, gate_bias, up_bias, down_bias;  // undefined: none
  bool oai_swiglu = false;
};
// Rows h [n, dim] through the experts each row is routed to, grouped by expert: each expert some row
// chose runs once over its rows (views of the stacks the ordinary matmul takes); an expert no row chose
// is never read. k: the experts each row uses. Ops of the op list only, so a recording lowers it too.
Tensor experts_ffn(memory::ExecutionContext& ctx, const Tensor& h, const ExpertWeights& w, int64_t k);

// Layer l's RoPE as llama.cpp's context sets it up (llama_context's cparams, the model's
// get_rope_freq_base / get_rope_freq_scale): windowed layers on their own base and scale; with YaRN
// ext_factor 1, its original context, beta_fast 32 and beta_slow 1, and an attn_factor that cancels
// the magnitude ggml's rope_yarn adds (1 + 0.1 ln factor) down to the file's rope_attn_factor times
// YaRN's mscale (the same 1 + 0.1 ln factor above a factor of 1).
kernels::RopeParams rope_params(const arch::ModelShape& s, uint32_t layer);

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

// One sequence's rows in a forward pass: `rows` consecutive tokens at positions [pos, pos + rows),
// written into and attending over `kv`; the logits of its last `logits` rows are kept (1: the next
// token's; `rows`: a drafted continuation verified row by row).
struct BatchEntry {
  load::KvCacheStore* kv = nullptr;
  int64_t pos = 0;
  int64_t rows = 0;
  int64_t logits = 1;
};

class Transformer {
 public:
  // Bound to one sequence's cache, for forward(tokens, pos).
  Transformer(arch::ModelShape shape, TransformerWeights weights, load::KvCacheStore& kv, uint64_t layer_slab_bytes);
  // Bound to no cache: each forward(tokens, entries) names the caches it runs over.
  Transformer(arch::ModelShape shape, TransformerWeights weights, uint64_t layer_slab_bytes);

  // Runs `tokens` at positions [pos, pos + n): writes their K/V into the cache and returns the logits
  // of the last token, F32 [1, vocab] (or of every token, [n, vocab]), drawn from the active scope.
  // Throws InvalidArgument when the context would overflow (naming pos, n and n_ctx) — the cache is
  // never written past its end.
  // The bound cache's forward: the batch of one entry {kv, pos, tokens.size()}.
  Tensor forward(memory::ExecutionContext& ctx, std::span<const int32_t> tokens, int64_t pos,
                 Logits which = Logits::Last);
  // The rows of every entry, concatenated in `tokens` (entry i's rows follow entry i - 1's): each
  // row's RoPE at its own position, attention per entry over its own cache. Returns F32
  // [sum of logits, vocab]: each entry's last `logits` rows' logits, entry after entry (or
  // [tokens.size(), vocab] for Logits::All). InvalidArgument, naming the entry, for a null or repeated
  // cache, an entry of no rows or keeping logits of none or more than its rows, rows that do not add
  // up to the tokens, or a context overflow; nothing is written then.
  Tensor forward(memory::ExecutionContext& ctx, std::span<const int32_t> tokens, std::span<const BatchEntry> entries,
                 Logits which = Logits::Last);

  const arch::ModelShape& shape() const noexcept { return shape_; }
  // The bound cache's context (InvalidArgument for a Transformer bound to none).
  uint32_t n_ctx() const;
  const memory::ForwardStats& layer_stats() const noexcept { return layer_scope_.stats(); }
  // Counts every row's routed experts into routed[layer * experts + expert] from now on (an empty span
  // stops). The caller owns the counts (plan::ExpertStats::routed); InvalidArgument when the size is
  // not layers x experts.
  void count_experts(std::span<uint64_t> routed);

 private:
  void check(std::span<const int32_t> tokens, std::span<const BatchEntry> entries) const;
  Tensor layer(memory::ExecutionContext& ctx, uint32_t l, const Tensor& x, std::span<const BatchEntry> entries);
  Tensor attend(memory::ExecutionContext& ctx, uint32_t l, const Tensor& q, const Tensor& k, const Tensor& v,
                std::span<const BatchEntry> entries);
  Tensor attend_one(memory::ExecutionContext& ctx, uint32_t l, const Tensor& q, const Tensor& k, const Tensor& v,
                    const BatchEntry& e);
  Tensor ffn(memory::ExecutionContext& ctx, const LayerWeights& w, const Tensor& h) const;
  Tensor kept_rows(memory::ExecutionContext& ctx, const Tensor& x, std::span<const BatchEntry> entries);

  arch::ModelShape shape_;
  TransformerWeights w_;
  load::KvCacheStore* kv_;  // null: batches only
  memory::ForwardScope layer_scope_;
  std::span<uint64_t> routed_;  // count_experts's counts, or empty
};

}  // namespace skainet::model
