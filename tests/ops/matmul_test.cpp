#include <gtest/gtest.h>

#include "ops_test_util.hpp"

using namespace skainet;
using namespace skainet::test;
using memory::ExecutionContext;

namespace {

// out[r, o] against a double-precision sum over the decoded weight row.
void expect_matmul(ExecutionContext& ctx, const Tensor& x, const Tensor& w) {
  const Tensor out = ops::matmul(ctx, x, w);
  ASSERT_EQ(out.shape(), (Shape{x.dim(0), w.dim(0)}));
  for (int64_t o = 0; o < w.dim(0); ++o) {
    const std::vector<float> wr = decode_row(w, o);
    for (int64_t r = 0; r < x.dim(0); ++r) {
      double ref = 0, bound = 0;
      for (int64_t k = 0; k < x.dim(1); ++k) {
        ref += get(x, {r, k}) * wr[static_cast<size_t>(k)];
        bound += std::fabs(get(x, {r, k}) * wr[static_cast<size_t>(k)]);
      }
      ASSERT_NEAR(get(out, {r, o}), ref, 2e-6 * bound + 1e-6) << "r=" << r << " o=" << o << " w=" << w.describe();
    }
  }
}

}  // namespace

TEST(Matmul, DenseWeightsOnStridedViews) {
  for (int threads : {1, 3}) {
    ExecutionContext ctx(threads);
    for (Layout lx : {Layout::Contiguous, Layout::Offset, Layout::Transposed})
      for (Layout lw : {Layout::Contiguous, Layout::Offset, Layout::Transposed}) {
        const Tensor x = random_view(Shape{5, 37}, lx, 1);
        const Tensor w = random_view(Shape{13, 37}, lw, 2);
        expect_matmul(ctx, x, w);
      }
    const Tensor x = random_view(Shape{3, 41}, Layout::Offset, 3);
    expect_matmul(ctx, x, ops::convert(ctx, random_view(Shape{11, 41}, Layout::Offset, 4), GgmlType::F16));
    expect_matmul(ctx, x, ops::convert(ctx, random_view(Shape{11, 41}, Layout::Transposed, 5), GgmlType::BF16));
  }
}

TEST(Matmul, PackedWeightsThroughDotRow) {
  for (int threads : {1, 2}) {
    // The reference table: SIMD tables quantize x to 8 bits (tests/kernels/simd_matmul_test.cpp).
    ExecutionContext ctx(threads, kernels::reference_table());
    for (GgmlType t :
         {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
      const int64_t k = type_traits(t).block_elements * 3;
      const Tensor w = random_packed(ctx, t, 9, k, 7);
      expect_matmul(ctx, random_view(Shape{3, k}, Layout::Offset, 8), w);
      // A row view of the packed weight (non-zero offset) works the same.
      expect_matmul(ctx, random_view(Shape{2, k}, Layout::Contiguous, 9), w.rows(2, 5));
    }
  }
}

TEST(Matmul, PackedWeightNeedsContiguousActivations) {
  ExecutionContext ctx;
  const Tensor w = random_packed(ctx, GgmlType::Q8_0, 4, 64, 1);
  EXPECT_THROW(ops::matmul(ctx, random_view(Shape{3, 64}, Layout::Transposed, 2), w), InvalidArgument);
  EXPECT_THROW(ops::matmul(ctx, random_view(Shape{3, 32}, Layout::Contiguous, 2), w), InvalidArgument);
}

TEST(Matmul, BatchedLikeAttention) {
  ExecutionContext ctx(2);
  // scores[b] = q[b] · k[b]ᵀ, out[b] = p[b] · v[b] with v transposed as a strided view.
  const Tensor q = random_view(Shape{2, 3, 17}, Layout::Offset, 1);
  const Tensor k = random_view(Shape{2, 7, 17}, Layout::Offset, 2);
  const Tensor s = ops::matmul(ctx, q, k);
  ASSERT_EQ(s.shape(), (Shape{2, 3, 7}));
  for_each_index(s.shape(), [&](const Index& i) {
    double ref = 0;
    for (int64_t j = 0; j < 17; ++j) ref += get(q, {i[0], i[1], j}) * get(k, {i[0], i[2], j});
    EXPECT_NEAR(get(s, i), ref, 1e-5);
  });
  const Tensor v = random_view(Shape{2, 7, 17}, Layout::Offset, 3);
  const Tensor o = ops::matmul(ctx, s, v.transpose(1, 2));
  ASSERT_EQ(o.shape(), (Shape{2, 3, 17}));
  for_each_index(o.shape(), [&](const Index& i) {
    double ref = 0;
    for (int64_t t = 0; t < 7; ++t) ref += get(s, {i[0], i[1], t}) * get(v, {i[0], t, i[2]});
    EXPECT_NEAR(get(o, i), ref, 1e-5);
  });
  // A 3-D x against a 2-D weight treats every leading index as a row.
  const Tensor w = random_view(Shape{5, 17}, Layout::Offset, 4);
  const Tensor y = ops::matmul(ctx, q, w);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 5}));
  for_each_index(y.shape(), [&](const Index& i) {
    double ref = 0;
    for (int64_t j = 0; j < 17; ++j) ref += get(q, {i[0], i[1], j}) * get(w, {i[2], j});
    EXPECT_NEAR(get(y, i), ref, 1e-5);
  });
}

TEST(Matmul, IntoAStridedOutputView) {
  ExecutionContext ctx(2);
  const Tensor x = random_view(Shape{4, 19}, Layout::Offset, 1);
  const Tensor w = random_view(Shape{6, 19}, Layout::Offset, 2);
  const Tensor dst = random_view(Shape{6, 4}, Layout::Transposed, 3).transpose(0, 1);  // [4, 6], odd strides
  ops::matmul_into(ctx, x, w, dst);
  const Tensor ref = ops::matmul(ctx, x, w);
  EXPECT_EQ(max_abs_diff(ref, dst), 0.0);
}
