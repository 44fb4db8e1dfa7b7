#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "skainet/model/plan.hpp"

namespace skainet::plan {
namespace {

constexpr uint64_t kSlabAlignment = 64;

void add(std::vector<ActivationBuffer>& list, uint64_t& total, std::string name, uint64_t floats) {
  const uint64_t bytes = checked_align_up(checked_mul<uint64_t>(floats, 4, "activation bytes"), kSlabAlignment, name);
  list.push_back({std::move(name), bytes});
  total = checked_add(total, bytes, "slab bytes");
}

// A buffer drawn once per sequence, `floats` over all of them: each piece is rounded up to the
// alignment on its own, so S pieces take at most S - 1 alignments more than one buffer would.
void add_split(std::vector<ActivationBuffer>& list, uint64_t& total, std::string name, uint64_t floats,
               uint32_t sequences) {
  add(list, total, std::move(name), floats);
  const uint64_t slack = checked_mul<uint64_t>(sequences - 1, kSlabAlignment, "slab alignment");
  list.back().bytes = checked_add(list.back().bytes, slack, "activation bytes");
  total = checked_add(total, slack, "slab bytes");
}

// `count` buffers of `floats` each, every one rounded up to the alignment on its own.
void add_each(std::vector<ActivationBuffer>& list, uint64_t& total, std::string name, uint64_t count, uint64_t floats) {
  const uint64_t one = checked_align_up(checked_mul<uint64_t>(floats, 4, "activation bytes"), kSlabAlignment, name);
  const uint64_t bytes = checked_mul(one, count, "activation bytes");
  list.push_back({std::move(name), bytes});
  total = checked_add(total, bytes, "slab bytes");
}

// ops::matmul_experts: its output [n, k, out], then its slot list [n * k] (I32), the rows gathered
// for one expert and their products, each sized for all n * k slots (the experts' groups share them).
void add_expert_matmul(SlabPlan& s, const char* name, uint64_t slots, uint64_t in, uint64_t out) {
  add(s.layer, s.layer_bytes, fmt::format("{} [n, k, {}]", name, out), slots * out);
  add(s.layer, s.layer_bytes, fmt::format("{}: slots of one expert's rows [n * k] (I32)", name), slots);
  add(s.layer, s.layer_bytes, fmt::format("{}: rows of one expert [n * k, {}]", name, in), slots * in);
  add(s.layer, s.layer_bytes, fmt::format("{}: products of one expert [n * k, {}]", name, out), slots * out);
}

// model::experts_ffn: the router's logits, the routes (ids, weights), gate, up, SwiGLU and down over
// every row's k choices, the down products weighted, and the k - 1 running sums of each row's k.
void add_experts(SlabPlan& s, const arch::ModelShape& m, uint64_t n) {
  const uint64_t k = m.experts_used, fe = m.expert_ffn, slots = n * k;
  add(s.layer, s.layer_bytes, "router logits [n, experts]", n * m.experts);
  if (m.features.expert_bias) add(s.layer, s.layer_bytes, "router logits + bias [n, experts]", n * m.experts);
  add(s.layer, s.layer_bytes, "experts of each row [n, k] (I32)", slots);
  add(s.layer, s.layer_bytes, "weights of each row's experts [n, k]", slots);
  add_expert_matmul(s, "expert gate", slots, m.dim, fe);
  add_expert_matmul(s, "expert up", slots, m.dim, fe);
  add(s.layer, s.layer_bytes, "expert swiglu [n, k, expert_ffn]", slots * fe);
  add_expert_matmul(s, "expert down", slots, fe, m.dim);
  add(s.layer, s.layer_bytes, "expert down * weight [n, k, dim]", slots * m.dim);
  if (k > 1) add_each(s.layer, s.layer_bytes, "sum of each row's experts [n, dim]", k - 1, n * m.dim);
}

}  // namespace

// Mirrors, buffer for buffer, what model::Transformer::forward draws from its two slabs (F32 activations).
// A test in the model checks a real step against it, so the two cannot drift apart silently.
// A batch of `sequences` runs RoPE, the cache write and attention once per sequence (its rows, its
// cache) and, with more than one, copies the attention outputs and each sequence's last row into one
// tensor; at one sequence it is exactly the single-sequence step.
SlabPlan estimate_slabs(const arch::ModelShape& m, uint32_t tokens, uint32_t n_ctx, StepRows rows) {
  const uint32_t sequences = rows.sequences;
  if (sequences == 0 || sequences > tokens)
    throw InvalidArgument(fmt::format("a step of {} tokens cannot hold {} sequences", tokens, sequences));
  SlabPlan s;
  s.tokens = tokens;
  s.sequences = sequences;
  s.logit_rows = rows.every_logit || rows.drafts ? tokens : sequences;
  const uint64_t n = tokens, seqs = sequences, kept = s.logit_rows;
  const uint64_t q_width = uint64_t{m.heads} * m.head_dim;
  const uint64_t kv_width = uint64_t{m.kv_heads} * m.head_dim;

  add(s.step, s.step_bytes, "embeddings [n, dim]", n * m.dim);
  if (m.features.embed_scale) add(s.step, s.step_bytes, "embeddings * sqrt(dim) [n, dim]", n * m.dim);
  for (uint32_t l = 0; l < m.layers; ++l)
    add(s.step, s.step_bytes, "residual of layer " + std::to_string(l) + " [n, dim]", n * m.dim);
  if (seqs > 1 && !rows.every_logit)
    add(s.step, s.step_bytes, "kept rows of each sequence [logit rows, dim]", kept * m.dim);
  add(s.step, s.step_bytes, "output norm [logit rows, dim]", kept * m.dim);
  add(s.step, s.step_bytes, "logits [logit rows, vocab]", kept * m.vocab);
  if (m.final_softcap > 0) add(s.step, s.step_bytes, "logits soft-capped [logit rows, vocab]", kept * m.vocab);

  add(s.layer, s.layer_bytes, "attn norm [n, dim]", n * m.dim);
  add(s.layer, s.layer_bytes, "q [n, heads*head_dim]", n * q_width);
  add(s.layer, s.layer_bytes, "k [n, kv_heads*head_dim]", n * kv_width);
  add(s.layer, s.layer_bytes, "v [n, kv_heads*head_dim]", n * kv_width);
  if (m.features.qkv_bias) {
    add(s.layer, s.layer_bytes, "q + bias", n * q_width);
    add(s.layer, s.layer_bytes, "k + bias", n * kv_width);
    add(s.layer, s.layer_bytes, "v + bias", n * kv_width);
  }
  if (m.features.qk_norm) {
    add(s.layer, s.layer_bytes, "q normed per head", n * q_width);
    add(s.layer, s.layer_bytes, "k normed per head", n * kv_width);
  }
  add_split(s.layer, s.layer_bytes, "q roped", n * q_width, sequences);
  add_split(s.layer, s.layer_bytes, "k roped", n * kv_width, sequences);
  // Each sequence with more than one row converts its quantized caches' visible cells (ops::attention).
  if (rows.packed_caches > 0 && n > seqs) {
    const uint64_t converting = std::min<uint64_t>(seqs, n - seqs);
    for (uint32_t c = 0; c < rows.packed_caches; ++c)
      add_split(s.layer, s.layer_bytes, "quantized K or V cells as F32 [ctx, kv_heads*head_dim]",
                converting * n_ctx * kv_width, static_cast<uint32_t>(converting));
  }
  add_split(s.layer, s.layer_bytes, "attention scores/probs [heads, n, ctx]", uint64_t{m.heads} * n * n_ctx, sequences);
  add_split(s.layer, s.layer_bytes, "attention out [n, heads*head_dim]", n * q_width, sequences);
  if (seqs > 1) add(s.layer, s.layer_bytes, "attention out of the batch [n, heads*head_dim]", n * q_width);
  add(s.layer, s.layer_bytes, "attn output proj [n, dim]", n * m.dim);
  if (m.features.out_bias) add(s.layer, s.layer_bytes, "attn output + bias [n, dim]", n * m.dim);
  if (m.features.post_norms) add(s.layer, s.layer_bytes, "attn post norm [n, dim]", n * m.dim);
  add(s.layer, s.layer_bytes, "residual [n, dim]", n * m.dim);
  add(s.layer, s.layer_bytes, "ffn norm [n, dim]", n * m.dim);
  if (m.features.moe) {
    add_experts(s, m, n);
  } else {
    add(s.layer, s.layer_bytes, "ffn gate [n, ffn]", n * m.ffn);
    add(s.layer, s.layer_bytes, "ffn up [n, ffn]", n * m.ffn);
    add(s.layer, s.layer_bytes, m.features.geglu ? "geglu [n, ffn]" : "swiglu [n, ffn]", n * m.ffn);
    add(s.layer, s.layer_bytes, "ffn down [n, dim]", n * m.dim);
  }
  if (m.features.post_norms) add(s.layer, s.layer_bytes, "ffn post norm [n, dim]", n * m.dim);
  add(s.layer, s.layer_bytes, "residual out [n, dim]", n * m.dim);
  return s;
}

// The largest scratch any matmul of the run asks: every weight a matmul reads (an embedding too,
// the output of a tied model), held as the plan decided, at one row (decode) and at `rows` (the
// prefill chunk): the kernels' preparation need not grow with rows (the BF16 tiles start at 16).
ScratchPlan estimate_scratch(const std::vector<placement::Decision>& tensors, const placement::Platform& platform,
                             uint32_t rows) {
  ScratchPlan best;
  bool best_is_matmul = false;  // on a tie the report names a matmul weight, not the embedding
  if (!platform.matmul_scratch) return best;
  for (const placement::Decision& d : tensors) {
    // An expert stack (3-D) is read one expert's 2-D matrix at a time, rows as for any weight.
    if (d.role == placement::TensorRole::Vector || d.shape.size() < 2) continue;
    const auto k = static_cast<int64_t>(d.shape[0]);
    const bool matmul = d.role == placement::TensorRole::MatmulWeight;
    for (const uint32_t n : {uint32_t{1}, rows}) {
      const uint64_t bytes = platform.matmul_scratch(d.held_type, d.held_order, n, k);
      if (bytes > best.bytes || (bytes == best.bytes && bytes > 0 && matmul && !best_is_matmul)) {
        best = {d.tensor, n, bytes};
        best_is_matmul = matmul;
      }
    }
  }
  return best;
}

}  // namespace skainet::plan
