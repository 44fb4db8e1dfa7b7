#include <gtest/gtest.h>

#include "ops_test_util.hpp"

using namespace skainet;
using namespace skainet::test;
using memory::ExecutionContext;

namespace {

// softmax(q kᵀ · scale) v for query head h on KV head h / group, causal from `offset` (within the
// window when there is one, capped scores when softcap > 0), in double.
// A finite sink is one more score in the maximum and the sum (gpt-oss).
double reference(const Tensor& q, const Tensor& k, const Tensor& v, const ops::AttentionParams& p, int64_t t, int64_t h,
                 int64_t j, double sink = -INFINITY) {
  const int64_t hd = p.head_dim, g = h / (p.heads / p.kv_heads), visible = std::min(k.dim(0), p.offset + t + 1);
  const int64_t first = p.window > 0 ? std::max<int64_t>(0, p.offset + t - p.window + 1) : 0;
  std::vector<double> s(static_cast<size_t>(visible - first));
  double mx = -INFINITY, sum = 0, out = 0;
  for (int64_t c = first; c < visible; ++c) {
    double d = 0;
    for (int64_t i = 0; i < hd; ++i) d += get(q, {t, h * hd + i}) * get(k, {c, g * hd + i});
    d *= p.scale;
    if (p.softcap > 0) d = p.softcap * std::tanh(d / p.softcap);
    s[static_cast<size_t>(c - first)] = d;
    mx = std::max(mx, d);
  }
  mx = std::max(mx, sink);
  for (double& e : s) sum += (e = std::exp(e - mx));
  sum += std::exp(sink - mx);
  for (int64_t c = first; c < visible; ++c) out += s[static_cast<size_t>(c - first)] / sum * get(v, {c, g * hd + j});
  return out;
}

}  // namespace

TEST(Attention, GroupedCausalHeadsOnEveryTableAndCacheType) {
  const ops::AttentionParams p{.heads = 6, .kv_heads = 2, .head_dim = 8, .scale = 0.35f, .offset = 3};
  for (const kernels::KernelTable* table : {&kernels::reference_table(), &kernels::best_table()})
    for (GgmlType cache : {GgmlType::F32, GgmlType::F16}) {
      ExecutionContext ctx(2, *table);
      const Tensor q = random_view(Shape{3, 48}, Layout::Offset, 1);
      // 7 cells: the 3 + 3 the queries may see plus one beyond (masked for every query).
      const Tensor k = ops::convert(ctx, random_view(Shape{7, 16}, Layout::Offset, 2), cache);
      const Tensor v = ops::convert(ctx, random_view(Shape{7, 16}, Layout::Offset, 3), cache);
      const Tensor out = ops::attention(ctx, q, k, v, p);
      ASSERT_EQ(out.shape(), (Shape{3, 48}));
      for_each_index(out.shape(), [&](const Index& i) {
        EXPECT_NEAR(get(out, i), reference(q, k, v, p, i[0], i[1] / 8, i[1] % 8), 1e-5)
            << table->name << " " << type_name(cache) << " t=" << i[0] << " col=" << i[1];
      });
    }
}

// Attention sinks (gpt-oss): a per-head score joining each softmax's max and sum, in a prefill chunk
// (the head-by-head path) and a decode step (the SIMD tables' fused one-query kernels), with a window;
// sinks far above and far below the scores (the output then all but vanishes, or is unchanged).
TEST(Attention, SinksOnEveryTable) {
  for (const kernels::KernelTable* table : {&kernels::reference_table(), &kernels::best_table()})
    for (GgmlType cache : {GgmlType::F32, GgmlType::F16})
      for (int64_t n : {1, 3})
        for (int64_t window : {0, 3}) {
          const int64_t offset = 4;
          const ops::AttentionParams p{
              .heads = 4, .kv_heads = 2, .head_dim = 32, .scale = 0.3f, .offset = offset, .window = window};
          ExecutionContext ctx(2, *table);
          const Tensor q = random_view(Shape{n, 128}, Layout::Offset, 11);
          const Tensor k = ops::convert(ctx, random_view(Shape{offset + n, 64}, Layout::Contiguous, 12), cache);
          const Tensor v = ops::convert(ctx, random_view(Shape{offset + n, 64}, Layout::Contiguous, 13), cache);
          std::vector<float> sink_values = {0.5f, -1.0f, 30.0f, -30.0f};
          const Tensor sinks(Storage::borrow(sink_values.data(), 16, false, "sinks"), Shape{4}, GgmlType::F32);
          const Tensor k32 = ops::convert(ctx, k, GgmlType::F32), v32 = ops::convert(ctx, v, GgmlType::F32);
          const Tensor out = ops::attention(ctx, q, k, v, p, sinks);
          for_each_index(out.shape(), [&](const Index& i) {
            const int64_t h = i[1] / 32;
            EXPECT_NEAR(get(out, i), reference(q, k32, v32, p, i[0], h, i[1] % 32, sink_values[static_cast<size_t>(h)]),
                        2e-5)
                << table->name << " " << type_name(cache) << " n=" << n << " window=" << window << " t=" << i[0]
                << " col=" << i[1];
          });
          // Without sinks the same call is plain attention, which the sinks change.
          const Tensor plain = ops::attention(ctx, q, k, v, p);
          EXPECT_GT(std::fabs(get(plain, {0, 0}) - get(out, {0, 0})), 1e-4) << table->name;
        }
  ExecutionContext ctx(1, kernels::reference_table());
  const ops::AttentionParams p{.heads = 4, .kv_heads = 2, .head_dim = 32, .scale = 0.3f};
  const Tensor q = random_view(Shape{1, 128}, Layout::Contiguous, 1),
               kv = random_view(Shape{1, 64}, Layout::Contiguous, 2);
  EXPECT_THROW(ops::attention(ctx, q, kv, kv, p, random_view(Shape{3}, Layout::Contiguous, 3)), InvalidArgument);
  EXPECT_THROW(ops::attention(ctx, q, kv, kv, p, random_view(Shape{4, 1}, Layout::Contiguous, 3)), InvalidArgument);
}

// Sliding windows (Gemma 2/3's local layers) and soft-capped scores (Gemma 2), with offsets where the
// first query's window starts past cell 0 (the op then reads only from there).
TEST(Attention, SlidingWindowAndSoftcapOnEveryTable) {
  for (const kernels::KernelTable* table : {&kernels::reference_table(), &kernels::best_table()})
    for (GgmlType cache : {GgmlType::F32, GgmlType::F16})
      for (int64_t offset : {0, 2, 6})
        for (int64_t window : {0, 1, 3, 20})
          for (float softcap : {0.0f, 0.9f}) {
            const ops::AttentionParams p{.heads = 4,
                                         .kv_heads = 2,
                                         .head_dim = 8,
                                         .scale = 0.7f,
                                         .offset = offset,
                                         .window = window,
                                         .softcap = softcap};
            ExecutionContext ctx(2, *table);
            const Tensor q = random_view(Shape{3, 32}, Layout::Offset, 4, -2.0f, 2.0f);
            const Tensor k = ops::convert(ctx, random_view(Shape{10, 16}, Layout::Offset, 5, -2.0f, 2.0f), cache);
            const Tensor v = ops::convert(ctx, random_view(Shape{10, 16}, Layout::Offset, 6), cache);
            const Tensor out = ops::attention(ctx, q, k, v, p);
            for_each_index(out.shape(), [&](const Index& i) {
              ASSERT_NEAR(get(out, i), reference(q, k, v, p, i[0], i[1] / 8, i[1] % 8), 1e-5)
                  << table->name << " " << type_name(cache) << " offset=" << offset << " window=" << window
                  << " softcap=" << softcap << " t=" << i[0] << " col=" << i[1];
            });
            // A window no query reaches past is no window, bit for bit.
            if (window == 20 && softcap == 0.0f) {
              ops::AttentionParams none = p;
              none.window = 0;
              EXPECT_EQ(to_vector(out), to_vector(ops::attention(ctx, q, k, v, none)));
            }
          }
}

// A decode step (one query) with TinyLlama's head size over more cells than a vector holds: the fused
// kernel on the SIMD tables, tasks of a group's heads split by the thread count (1 thread: whole
// groups; 5: single heads), the same numbers on every thread count, near the double reference.
TEST(Attention, DecodeStepSameOnEveryThreadCount) {
  const ops::AttentionParams p{.heads = 8, .kv_heads = 2, .head_dim = 64, .scale = 0.125f, .offset = 36};
  for (const kernels::KernelTable* table : {&kernels::reference_table(), &kernels::best_table()})
    for (GgmlType cache : {GgmlType::F32, GgmlType::F16}) {
      std::vector<float> first;
      for (int threads : {1, 2, 3, 5}) {
        ExecutionContext ctx(threads, *table);
        const Tensor q = random_view(Shape{1, 512}, Layout::Offset, 7);
        const Tensor k = ops::convert(ctx, random_view(Shape{40, 128}, Layout::Offset, 8), cache);
        const Tensor v = ops::convert(ctx, random_view(Shape{40, 128}, Layout::Offset, 9), cache);
        const std::vector<float> out = to_vector(ops::attention(ctx, q, k, v, p));
        if (first.empty()) {
          first = out;
          for (int64_t col = 0; col < 512; ++col)
            ASSERT_NEAR(out[static_cast<size_t>(col)], reference(q, k, v, p, 0, col / 64, col % 64), 1e-5)
                << table->name << " " << type_name(cache) << " col=" << col;
        }
        EXPECT_EQ(out, first) << table->name << " " << type_name(cache) << " threads=" << threads;
      }
    }
}

// By hand: one head of size 1, keys 0..4, values 10..14, query 1 at position 4 with window 2 sees
// cells 3 and 4 (scores 3 and 4): out = (13 e^3 + 14 e^4) / (e^3 + e^4).
TEST(Attention, WindowByHand) {
  ExecutionContext ctx;
  std::vector<float> qv = {1.0f}, kv = {0, 1, 2, 3, 4}, vv = {10, 11, 12, 13, 14};
  const Tensor q(Storage::borrow(qv.data(), 4, false, "q"), Shape{1, 1}, GgmlType::F32);
  const Tensor k(Storage::borrow(kv.data(), 20, false, "k"), Shape{5, 1}, GgmlType::F32);
  const Tensor v(Storage::borrow(vv.data(), 20, false, "v"), Shape{5, 1}, GgmlType::F32);
  const Tensor out = ops::attention(ctx, q, k, v, {.heads = 1, .kv_heads = 1, .head_dim = 1, .offset = 4, .window = 2});
  const double e3 = std::exp(3.0), e4 = std::exp(4.0);
  EXPECT_NEAR(get(out, {0, 0}), (13 * e3 + 14 * e4) / (e3 + e4), 1e-5);
}

TEST(Attention, RefusesShapesThatDoNotMatchTheHeads) {
  ExecutionContext ctx;
  const Tensor q = random_view(Shape{2, 16}, Layout::Contiguous, 1);
  const Tensor kv = random_view(Shape{4, 8}, Layout::Contiguous, 2);
  EXPECT_THROW(ops::attention(ctx, q, kv, kv, {.heads = 2, .kv_heads = 1, .head_dim = 4}),
               InvalidArgument);  // q 16 != 8
  EXPECT_THROW(ops::attention(ctx, q, kv, kv, {.heads = 4, .kv_heads = 3, .head_dim = 4}), InvalidArgument);  // 4 % 3
  EXPECT_NO_THROW(ops::attention(ctx, q, kv, kv, {.heads = 4, .kv_heads = 2, .head_dim = 4}));
  EXPECT_THROW(ops::attention(ctx, q, kv, kv, {.heads = 4, .kv_heads = 2, .head_dim = 4, .window = -1}),
               InvalidArgument);
  EXPECT_THROW(ops::attention(ctx, q, kv, kv, {.heads = 4, .kv_heads = 2, .head_dim = 4, .softcap = -1.0f}),
               InvalidArgument);
}
