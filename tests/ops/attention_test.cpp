#include <gtest/gtest.h>

#include "ops_test_util.hpp"

using namespace skainet;
using namespace skainet::test;
using memory::ExecutionContext;

namespace {

// softmax(q kᵀ · scale) v for query head h on KV head h / group, causal from `offset`, in double.
double reference(const Tensor& q, const Tensor& k, const Tensor& v, const ops::AttentionParams& p, int64_t t,
                 int64_t h, int64_t j) {
  const int64_t hd = p.head_dim, g = h / (p.heads / p.kv_heads), visible = std::min(k.dim(0), p.offset + t + 1);
  std::vector<double> s(static_cast<size_t>(visible));
  double mx = -INFINITY, sum = 0, out = 0;
  for (int64_t c = 0; c < visible; ++c) {
    double d = 0;
    for (int64_t i = 0; i < hd; ++i) d += get(q, {t, h * hd + i}) * get(k, {c, g * hd + i});
    s[static_cast<size_t>(c)] = d * p.scale;
    mx = std::max(mx, s[static_cast<size_t>(c)]);
  }
  for (double& e : s) sum += (e = std::exp(e - mx));
  for (int64_t c = 0; c < visible; ++c) out += s[static_cast<size_t>(c)] / sum * get(v, {c, g * hd + j});
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

TEST(Attention, RefusesShapesThatDoNotMatchTheHeads) {
  ExecutionContext ctx;
  const Tensor q = random_view(Shape{2, 16}, Layout::Contiguous, 1);
  const Tensor kv = random_view(Shape{4, 8}, Layout::Contiguous, 2);
  EXPECT_THROW(ops::attention(ctx, q, kv, kv, {.heads = 2, .kv_heads = 1, .head_dim = 4}), InvalidArgument);  // q 16 != 8
  EXPECT_THROW(ops::attention(ctx, q, kv, kv, {.heads = 4, .kv_heads = 3, .head_dim = 4}), InvalidArgument);  // 4 % 3
  EXPECT_NO_THROW(ops::attention(ctx, q, kv, kv, {.heads = 4, .kv_heads = 2, .head_dim = 4}));
}
