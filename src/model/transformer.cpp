#include <cmath>

#include <fmt/format.h>

#include "skainet/model/model.hpp"
#include "skainet/compute/ops.hpp"

namespace skainet::model {

Transformer::Transformer(arch::ModelShape shape, TransformerWeights weights, load::KvCacheStore& kv, uint64_t layer_slab_bytes)
    : shape_(std::move(shape)), w_(std::move(weights)), kv_(kv), layer_scope_({.slab_bytes = layer_slab_bytes}) {}

Tensor Transformer::forward(memory::ExecutionContext& ctx, std::span<const int32_t> tokens, int64_t pos, Logits which) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) throw InvalidArgument("forward: no tokens");
  if (pos < 0 || pos + n > static_cast<int64_t>(kv_.n_ctx()))
    throw InvalidArgument(fmt::format("context full: {} tokens at position {} need {} cells, the KV cache has {} (--ctx)", n,
                                      pos, pos + n, kv_.n_ctx()));
  for (int32_t t : tokens)
    if (t < 0 || static_cast<uint32_t>(t) >= shape_.vocab)
      throw InvalidArgument(fmt::format("token id {} is outside the vocabulary of {}", t, shape_.vocab));

  memory::Scope& step = ctx.scope();
  Tensor x = ops::gather_rows(ctx, w_.tok_embd, tokens);
  if (shape_.features.embed_scale) x = ops::scale(ctx, x, std::sqrt(static_cast<float>(shape_.dim)));
  for (uint32_t l = 0; l < shape_.layers; ++l) {
    // Each layer's temporaries die at its end; only the residual stream moves on, retained into the
    // step scope (the sanctioned escape).
    x = ctx.step(layer_scope_, [&] { return memory::retain(layer(ctx, l, x, pos), step); });
  }
  const Tensor rows = which == Logits::All ? x : x.rows(n - 1, 1);
  const Tensor h = ops::rms_norm(ctx, rows, w_.output_norm, shape_.rms_eps);
  const Tensor logits = ops::matmul(ctx, h, w_.output);
  return shape_.final_softcap > 0 ? ops::softcap(ctx, logits, shape_.final_softcap) : logits;
}

Tensor Transformer::layer(memory::ExecutionContext& ctx, uint32_t l, const Tensor& x, int64_t pos) {
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
  const bool windowed = shape_.is_swa_layer(l);
  const kernels::RopeParams rope{.base = windowed ? shape_.rope_base_swa : shape_.rope_base,
                                 .dims = static_cast<int64_t>(shape_.rope_dims),
                                 .neox = shape_.features.neox_rope,
                                 .freq_scale = 1.0f / (windowed ? shape_.rope_scale_swa : shape_.rope_scale)};
  q = ops::rope(ctx, q.reshape({n, heads, hd}), pos, rope, w_.rope_freqs).reshape({n, heads * hd});
  k = ops::rope(ctx, k.reshape({n, kv_heads, hd}), pos, rope, w_.rope_freqs).reshape({n, kv_heads * hd});
  ops::write_rows(ctx, k, kv_.k(l), pos);
  ops::write_rows(ctx, v, kv_.v(l), pos);

  const Tensor attn = attention(ctx, l, q, pos);
  Tensor attn_out = ops::matmul(ctx, attn, w.wo);
  if (shape_.features.post_norms) attn_out = ops::rms_norm(ctx, attn_out, w.attn_post_norm, shape_.rms_eps);
  const Tensor x1 = ops::add(ctx, x, attn_out);
  const Tensor h2 = ops::rms_norm(ctx, x1, w.ffn_norm, shape_.rms_eps);
  const Tensor gate = ops::matmul(ctx, h2, w.w_gate);
  const Tensor up = ops::matmul(ctx, h2, w.w_up);
  const Tensor act = shape_.features.geglu ? ops::geglu(ctx, gate, up) : ops::swiglu(ctx, gate, up);
  Tensor ffn_out = ops::matmul(ctx, act, w.w_down);
  if (shape_.features.post_norms) ffn_out = ops::rms_norm(ctx, ffn_out, w.ffn_post_norm, shape_.rms_eps);
  return ops::add(ctx, x1, ffn_out);
}

// Attention over cache cells [0, pos + n), causal within the new tokens: the whole cache is passed and
// ops::attention reads only the cells its queries can see (so a recording, where pos is a runtime
// value, gets the same call).
Tensor Transformer::attention(memory::ExecutionContext& ctx, uint32_t l, const Tensor& q, int64_t pos) {
  return ops::attention(ctx, q, kv_.k(l), kv_.v(l),
                        {.heads = shape_.heads,
                         .kv_heads = shape_.kv_heads,
                         .head_dim = shape_.head_dim,
                         .scale = shape_.attention_scale > 0 ? shape_.attention_scale
                                                             : 1.0f / std::sqrt(static_cast<float>(shape_.head_dim)),
                         .offset = pos,
                         .window = shape_.is_swa_layer(l) ? int64_t{shape_.sliding_window} : 0,
                         .softcap = shape_.attn_softcap});
}

}  // namespace skainet::model
