// A small llama-style transformer block built from the eager ops, for the scope tests: rms_norm,
// matmuls over Q8_0/Q4_0/F32/F16 weights, rope, causal attention softmax, swiglu, residual adds.
#pragma once

#include <cmath>

#include "ops_test_util.hpp"

namespace skainet::test {

struct Block {
  int64_t d = 64, heads = 4, hd = 16, ff = 96;
  Tensor attn_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3;
};

// Weights drawn from `scope` (model or ambient), quantized from fixed random values.
inline Block make_block(memory::ExecutionContext& ctx, memory::Scope& scope) {
  auto guard = ctx.use(scope);
  Block b;
  b.attn_norm = memory::retain(random_view(Shape{b.d}, Layout::Contiguous, 11, 0.5f, 1.5f), scope);
  b.ffn_norm = memory::retain(random_view(Shape{b.d}, Layout::Contiguous, 12, 0.5f, 1.5f), scope);
  b.wq = random_packed(ctx, GgmlType::Q8_0, b.d, b.d, 13);
  b.wk = random_packed(ctx, GgmlType::Q4_0, b.d, b.d, 14);
  b.wv = memory::retain(random_view(Shape{b.d, b.d}, Layout::Contiguous, 15), scope);
  b.wo = ops::convert(ctx, random_view(Shape{b.d, b.d}, Layout::Contiguous, 16), GgmlType::F16);
  b.w1 = random_packed(ctx, GgmlType::Q8_0, b.ff, b.d, 17);
  b.w3 = random_packed(ctx, GgmlType::Q4_0, b.ff, b.d, 18);
  b.w2 = random_packed(ctx, GgmlType::Q8_0, b.d, b.ff, 19);
  return b;
}

inline Tensor run_block(memory::ExecutionContext& ctx, const Block& b, const Tensor& x, int64_t pos) {
  const int64_t n = x.dim(0);
  const Shape heads{n, b.heads, b.hd};
  const Tensor h = ops::rms_norm(ctx, x, b.attn_norm, 1e-5f);
  const Tensor q = ops::rope(ctx, ops::matmul(ctx, h, b.wq).reshape(heads), pos, {.base = 10000.0f});
  const Tensor k = ops::rope(ctx, ops::matmul(ctx, h, b.wk).reshape(heads), pos, {.base = 10000.0f});
  const Tensor v = ops::matmul(ctx, h, b.wv).reshape(heads);
  const Tensor attn = ctx.empty(heads, GgmlType::F32, "attn");
  const float scale = 1.0f / std::sqrt(static_cast<float>(b.hd));
  for (int64_t i = 0; i < b.heads; ++i) {
    const Tensor s = ops::matmul(ctx, q.select(1, i), k.select(1, i));  // [n, n]
    const Tensor p = ops::softmax(ctx, s, {.scale = scale, .causal = true, .offset = 0});
    ops::matmul_into(ctx, p, v.select(1, i).transpose(0, 1), attn.select(1, i));
  }
  const Tensor x2 = ops::add(ctx, x, ops::matmul(ctx, attn.reshape(Shape{n, b.d}), b.wo));
  const Tensor h2 = ops::rms_norm(ctx, x2, b.ffn_norm, 1e-5f);
  const Tensor g = ops::swiglu(ctx, ops::matmul(ctx, h2, b.w1), ops::matmul(ctx, h2, b.w3));
  return ops::add(ctx, x2, ops::matmul(ctx, g, b.w2));
}

}  // namespace skainet::test
