#include <cmath>

#include <fmt/format.h>

#include "skainet/model/model.hpp"
#include "skainet/compute/ops.hpp"

namespace skainet::model {

kernels::RopeParams rope_params(const arch::ModelShape& s, uint32_t layer) {
  const bool windowed = s.is_swa_layer(layer);
  kernels::RopeParams p{.base = windowed ? s.rope_base_swa : s.rope_base,
                        .dims = static_cast<int64_t>(s.rope_dims),
                        .neox = s.features.neox_rope,
                        .freq_scale = 1.0f / (windowed ? s.rope_scale_swa : s.rope_scale),
                        .attn_factor = s.rope_attn_factor};
  if (s.rope_scaling != arch::RopeScaling::Yarn) return p;
  // llama_context's yarn_attn_factor, from the global layers' factor for every layer: YaRN's mscale
  // times the inverse of the 1 + 0.1 ln(1 / freq_scale) that ggml's rope_yarn multiplies in again
  // (llama.cpp cancels it so that the magnitude is applied once), in llama.cpp's float order.
  const float factor = 1.0f / (1.0f / s.rope_scale);  // 1 / rope_freq_scale there
  const float mscale = factor <= 1.0f ? 1.0f : 1.0f + 0.1f * std::log(factor);
  p.ext_factor = 1.0f;
  p.attn_factor = mscale * (1.0f / (1.0f + 0.1f * std::log(factor))) * s.rope_attn_factor;
  p.orig_ctx = s.yarn_orig_ctx;
  return p;
}

Transformer::Transformer(arch::ModelShape shape, TransformerWeights weights, load::KvCacheStore& kv,
                         uint64_t layer_slab_bytes)
    : shape_(std::move(shape)), w_(std::move(weights)), kv_(&kv), layer_scope_({.slab_bytes = layer_slab_bytes}) {}

Transformer::Transformer(arch::ModelShape shape, TransformerWeights weights, uint64_t layer_slab_bytes)
    : shape_(std::move(shape)), w_(std::move(weights)), kv_(nullptr), layer_scope_({.slab_bytes = layer_slab_bytes}) {}

void Transformer::count_experts(std::span<uint64_t> routed) {
  if (!routed.empty() && routed.size() != uint64_t{shape_.layers} * shape_.experts)
    throw InvalidArgument(fmt::format("count_experts: {} counts for {} layers x {} experts", routed.size(),
                                      shape_.layers, shape_.experts));
  routed_ = routed;
}

uint32_t Transformer::n_ctx() const {
  if (!kv_) throw InvalidArgument("this transformer is bound to no KV cache: its batches name theirs");
  return kv_->n_ctx();
}

Tensor Transformer::forward(memory::ExecutionContext& ctx, std::span<const int32_t> tokens, int64_t pos, Logits which) {
  if (!kv_) throw InvalidArgument("forward: this transformer is bound to no KV cache; pass the batch's entries");
  const BatchEntry one{.kv = kv_, .pos = pos, .rows = static_cast<int64_t>(tokens.size())};
  return forward(ctx, tokens, std::span(&one, 1), which);
}

void Transformer::check(std::span<const int32_t> tokens, std::span<const BatchEntry> entries) const {
  if (tokens.empty() || entries.empty()) throw InvalidArgument("forward: no tokens");
  int64_t rows = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const BatchEntry& e = entries[i];
    // One sequence keeps the message it always had; in a batch the entry is named. Formatted only
    // on the way to a throw: a step allocates nothing.
    auto who = [&] { return entries.size() == 1 ? std::string() : fmt::format("batch entry {}: ", i); };
    if (!e.kv) throw InvalidArgument(fmt::format("forward: {}no KV cache", who()));
    if (e.rows <= 0) throw InvalidArgument(fmt::format("forward: {}{} rows", who(), e.rows));
    if (e.logits < 1 || e.logits > e.rows)
      throw InvalidArgument(fmt::format("forward: {}the logits of {} rows kept, of {}", who(), e.logits, e.rows));
    if (e.pos < 0 || e.pos + e.rows > static_cast<int64_t>(e.kv->n_ctx()))
      throw InvalidArgument(
          fmt::format("{}context full: {} tokens at position {} need {} cells, "
                      "the KV cache has {} (--ctx)",
                      who(), e.rows, e.pos, e.pos + e.rows, e.kv->n_ctx()));
    for (size_t j = 0; j < i; ++j)
      if (entries[j].kv == e.kv)
        throw InvalidArgument(fmt::format("forward: batch entries {} and {} share one KV cache", j, i));
    rows += e.rows;
  }
  if (rows != static_cast<int64_t>(tokens.size()))
    throw InvalidArgument(fmt::format("forward: the batch's entries have {} rows, the tokens {}", rows, tokens.size()));
  for (int32_t t : tokens)
    if (t < 0 || static_cast<uint32_t>(t) >= shape_.vocab)
      throw InvalidArgument(fmt::format("token id {} is outside the vocabulary of {}", t, shape_.vocab));
}

Tensor Transformer::forward(memory::ExecutionContext& ctx, std::span<const int32_t> tokens,
                            std::span<const BatchEntry> entries, Logits which) {
  check(tokens, entries);
  memory::Scope& step = ctx.scope();
  Tensor x = ops::gather_rows(ctx, w_.tok_embd, tokens);
  if (shape_.features.embed_scale) x = ops::scale(ctx, x, std::sqrt(static_cast<float>(shape_.dim)));
  for (uint32_t l = 0; l < shape_.layers; ++l) {
    // Each layer's temporaries die at its end; only the residual stream moves on, retained into the
    // step scope (the sanctioned escape).
    x = ctx.step(layer_scope_, [&] { return memory::retain(layer(ctx, l, x, entries), step); });
  }
  const Tensor rows = which == Logits::All ? x : kept_rows(ctx, x, entries);
  const Tensor h = ops::rms_norm(ctx, rows, w_.output_norm, shape_.rms_eps);
  const Tensor logits = ops::matmul(ctx, h, w_.output);
  return shape_.final_softcap > 0 ? ops::softcap(ctx, logits, shape_.final_softcap) : logits;
}

// Each entry's last `logits` rows, the ones its next tokens are sampled from: a view for one sequence
// (or when every row is kept), gathered into [kept, dim] for several.
Tensor Transformer::kept_rows(memory::ExecutionContext& ctx, const Tensor& x, std::span<const BatchEntry> entries) {
  int64_t kept = 0;
  for (const BatchEntry& e : entries) kept += e.logits;
  if (kept == x.dim(0)) return x;
  if (entries.size() == 1) return x.rows(x.dim(0) - kept, kept);
  const Tensor out = ctx.scope().allocate({kept, x.dim(1)}, GgmlType::F32, "kept rows of each sequence");
  int64_t end = 0, at = 0;
  for (const BatchEntry& e : entries) {
    end += e.rows;
    ops::write_rows(ctx, x.rows(end - e.logits, e.logits), out, at);
    at += e.logits;
  }
  return out;
}

Tensor Transformer::layer(memory::ExecutionContext& ctx, uint32_t l, const Tensor& x,
                          std::span<const BatchEntry> entries) {
  const LayerWeights& w = w_.layers[l];
  const int64_t n = x.dim(0);
  const int64_t hd = shape_.head_dim, heads = shape_.heads, kv_heads = shape_.kv_heads;

  const Tensor h = ops::rms_norm(ctx, x, w.attn_norm, shape_.rms_eps);
  Tensor q = ops::matmul(ctx, h, w.wq);
  Tensor k = ops::matmul(ctx, h, w.wk);
  Tensor v = ops::matmul(ctx, h, w.wv);
  if (shape_.features.qkv_bias) {
    q = ops::add(ctx, q, w.bq);
    k = ops::add(ctx, k, w.bk);
    v = ops::add(ctx, v, w.bv);
  }
  if (shape_.features.qk_norm) {  // each head's vector normalized on its own, before RoPE
    q = ops::rms_norm(ctx, q.reshape({n * heads, hd}), w.q_norm, shape_.rms_eps).reshape({n, heads * hd});
    k = ops::rms_norm(ctx, k.reshape({n * kv_heads, hd}), w.k_norm, shape_.rms_eps).reshape({n, kv_heads * hd});
  }
  const Tensor attn = attend(ctx, l, q, k, v, entries);
  Tensor attn_out = ops::matmul(ctx, attn, w.wo);
  if (shape_.features.out_bias) attn_out = ops::add(ctx, attn_out, w.bo);
  if (shape_.features.post_norms) attn_out = ops::rms_norm(ctx, attn_out, w.attn_post_norm, shape_.rms_eps);
  const Tensor x1 = ops::add(ctx, x, attn_out);
  const Tensor h2 = ops::rms_norm(ctx, x1, w.ffn_norm, shape_.rms_eps);
  const std::span<uint64_t> routed =
      routed_.empty() ? std::span<uint64_t>() : routed_.subspan(uint64_t{l} * shape_.experts, shape_.experts);
  Tensor ffn_out = shape_.features.moe ? experts_ffn(ctx, h2,
                                                     {.router = w.router,
                                                      .gate = w.gate_exps,
                                                      .up = w.up_exps,
                                                      .down = w.down_exps,
                                                      .routed = routed,
                                                      .router_bias = w.router_bias,
                                                      .gate_bias = w.gate_exps_bias,
                                                      .up_bias = w.up_exps_bias,
                                                      .down_bias = w.down_exps_bias,
                                                      .oai_swiglu = shape_.features.oai_swiglu},
                                                     shape_.experts_used)
                                       : ffn(ctx, w, h2);
  if (shape_.features.post_norms) ffn_out = ops::rms_norm(ctx, ffn_out, w.ffn_post_norm, shape_.rms_eps);
  return ops::add(ctx, x1, ffn_out);
}

Tensor Transformer::ffn(memory::ExecutionContext& ctx, const LayerWeights& w, const Tensor& h) const {
  const Tensor gate = ops::matmul(ctx, h, w.w_gate);
  const Tensor up = ops::matmul(ctx, h, w.w_up);
  const Tensor act = shape_.features.geglu ? ops::geglu(ctx, gate, up) : ops::swiglu(ctx, gate, up);
  return ops::matmul(ctx, act, w.w_down);
}

// The part of a layer that is per sequence: RoPE at its positions, the write into its cache and
// attention over it. One sequence's output is returned as it is; several are copied into one
// [n, heads * head_dim] for the output projection, which reads the weights once for all of them.
Tensor Transformer::attend(memory::ExecutionContext& ctx, uint32_t l, const Tensor& q, const Tensor& k, const Tensor& v,
                           std::span<const BatchEntry> entries) {
  if (entries.size() == 1) return attend_one(ctx, l, q, k, v, entries[0]);
  const Tensor out = ctx.scope().allocate(q.shape(), GgmlType::F32, "attention out of the batch");
  int64_t row = 0;
  for (const BatchEntry& e : entries) {
    const Tensor part = attend_one(ctx, l, q.rows(row, e.rows), k.rows(row, e.rows), v.rows(row, e.rows), e);
    ops::write_rows(ctx, part, out, row);
    row += e.rows;
  }
  return out;
}

// Attention over cache cells [0, pos + n), causal within the new tokens: the whole cache is passed and
// ops::attention reads only the cells its queries can see (so a recording, where pos is a runtime
// value, gets the same call).
Tensor Transformer::attend_one(memory::ExecutionContext& ctx, uint32_t l, const Tensor& q, const Tensor& k,
                               const Tensor& v, const BatchEntry& e) {
  const int64_t n = e.rows, hd = shape_.head_dim, heads = shape_.heads, kv_heads = shape_.kv_heads;
  const bool windowed = shape_.is_swa_layer(l);
  const kernels::RopeParams rope = rope_params(shape_, l);
  const Tensor qr = ops::rope(ctx, q.reshape({n, heads, hd}), e.pos, rope, w_.rope_freqs).reshape({n, heads * hd});
  const Tensor kr =
      ops::rope(ctx, k.reshape({n, kv_heads, hd}), e.pos, rope, w_.rope_freqs).reshape({n, kv_heads * hd});
  ops::write_rows(ctx, kr, e.kv->k(l), e.pos);
  ops::write_rows(ctx, v, e.kv->v(l), e.pos);
  return ops::attention(ctx, qr, e.kv->k(l), e.kv->v(l),
                        {.heads = shape_.heads,
                         .kv_heads = shape_.kv_heads,
                         .head_dim = shape_.head_dim,
                         .scale = shape_.attention_scale > 0 ? shape_.attention_scale
                                                             : 1.0f / std::sqrt(static_cast<float>(shape_.head_dim)),
                         .offset = e.pos,
                         .window = windowed ? int64_t{shape_.sliding_window} : 0,
                         .softcap = shape_.attn_softcap},
                        w_.layers[l].sinks);
}

}  // namespace skainet::model
