#include <gtest/gtest.h>

#include "ops_test_util.hpp"

using namespace skainet;
using namespace skainet::test;
using memory::ExecutionContext;

TEST(Elementwise, AddMulBroadcastOnStridedViews) {
  ExecutionContext ctx;
  for (Layout la : {Layout::Contiguous, Layout::Offset, Layout::Transposed})
    for (const Shape& bs : {Shape{3, 5, 19}, Shape{5, 19}, Shape{19}, Shape{3, 1, 19}, Shape{5, 1}}) {
      const Tensor a = random_view(Shape{3, 5, 19}, la, 1);
      const Tensor b = random_view(bs, Layout::Transposed, 2);
      const Tensor s = ops::add(ctx, a, b), p = ops::mul(ctx, a, b);
      for_each_index(a.shape(), [&](const Index& i) {
        Index j{};
        for (int d = 0; d < b.rank(); ++d) {
          const size_t ai = static_cast<size_t>(d + a.rank() - b.rank());
          j[static_cast<size_t>(d)] = b.dim(d) == 1 ? 0 : i[ai];
        }
        ASSERT_EQ(get(s, i), static_cast<float>(get(a, i) + get(b, j)));
        ASSERT_EQ(get(p, i), static_cast<float>(get(a, i) * get(b, j)));
      });
    }
  EXPECT_THROW(ops::add(ctx, random_view(Shape{3, 4}, Layout::Contiguous, 1), random_view(Shape{3}, Layout::Contiguous, 1)),
               InvalidArgument);
}

TEST(Elementwise, ScaleSiluSwiglu) {
  ExecutionContext ctx;
  for (Layout l : {Layout::Offset, Layout::Transposed}) {
    const Tensor x = random_view(Shape{7, 23}, l, 3, -6.0f, 6.0f);
    const Tensor u = random_view(Shape{7, 23}, Layout::Offset, 4);
    const Tensor sc = ops::scale(ctx, x, 0.37f), si = ops::silu(ctx, x), sw = ops::swiglu(ctx, x, u);
    for_each_index(x.shape(), [&](const Index& i) {
      const double v = get(x, i);
      const double silu = v / (1.0 + std::exp(-v));
      ASSERT_NEAR(get(sc, i), v * 0.37, 1e-6);
      ASSERT_NEAR(get(si, i), silu, 1e-6);
      ASSERT_NEAR(get(sw, i), silu * get(u, i), 1e-6);
    });
  }
}

TEST(Norm, RmsNormWithAndWithoutWeight) {
  ExecutionContext ctx;
  for (Layout l : {Layout::Offset, Layout::Transposed}) {
    const Tensor x = random_view(Shape{2, 3, 29}, l, 5);
    const Tensor w = random_view(Shape{29}, Layout::Offset, 6);
    for (bool weighted : {true, false}) {
      const Tensor y = ops::rms_norm(ctx, x, weighted ? w : Tensor(), 1e-5f);
      for_each_index(x.shape(), [&](const Index& i) {
        double ss = 0;
        for (int64_t j = 0; j < 29; ++j) ss += get(x, {i[0], i[1], j}) * get(x, {i[0], i[1], j});
        const double ref = get(x, i) / std::sqrt(ss / 29 + 1e-5) * (weighted ? get(w, {i[2]}) : 1.0);
        ASSERT_NEAR(get(y, i), ref, 1e-5);
      });
    }
  }
  EXPECT_THROW(ops::rms_norm(ctx, random_view(Shape{2, 8}, Layout::Contiguous, 1), random_view(Shape{7}, Layout::Contiguous, 1), 1e-5f),
               InvalidArgument);
}

TEST(Norm, RopeRotatesAdjacentPairs) {
  ExecutionContext ctx;
  for (Layout l : {Layout::Offset, Layout::Transposed})
    for (int64_t dims : {0, 10}) {
      const Tensor x = random_view(Shape{3, 2, 18}, l, 7);
      const Tensor y = ops::rope(ctx, x, 5, {.base = 10000.0f, .dims = dims});
      const int64_t nd = dims ? dims : 18;
      for_each_index(x.shape(), [&](const Index& i) {
        const int64_t d = i[2];
        if (d >= nd) {
          ASSERT_EQ(get(y, i), get(x, i));
          return;
        }
        const int64_t pair = d / 2;
        const double theta = static_cast<double>(5 + i[0]) * std::pow(10000.0, -2.0 * static_cast<double>(pair) / static_cast<double>(nd));
        const double x0 = get(x, {i[0], i[1], 2 * pair}), x1 = get(x, {i[0], i[1], 2 * pair + 1});
        const double ref = d % 2 == 0 ? x0 * std::cos(theta) - x1 * std::sin(theta) : x0 * std::sin(theta) + x1 * std::cos(theta);
        ASSERT_NEAR(get(y, i), ref, 1e-5) << i[0] << "," << i[1] << "," << i[2];
      });
    }
  EXPECT_THROW(ops::rope(ctx, random_view(Shape{2, 9}, Layout::Contiguous, 1), 0, {}), InvalidArgument);
}

TEST(Norm, SoftmaxWithCausalOffset) {
  ExecutionContext ctx;
  for (Layout l : {Layout::Offset, Layout::Transposed})
    for (bool causal : {false, true})
      for (int64_t offset : {0, 4}) {
        const Tensor x = random_view(Shape{2, 3, 11}, l, 9, -4.0f, 4.0f);
        const Tensor y = ops::softmax(ctx, x, {.scale = 0.7f, .causal = causal, .offset = offset});
        for_each_index(x.shape(), [&](const Index& i) {
          const int64_t visible = causal ? std::min<int64_t>(11, i[1] + offset + 1) : 11;
          if (i[2] >= visible) {
            ASSERT_EQ(get(y, i), 0.0);
            return;
          }
          double mx = -1e30, sum = 0;
          for (int64_t j = 0; j < visible; ++j) mx = std::max(mx, 0.7 * get(x, {i[0], i[1], j}));
          for (int64_t j = 0; j < visible; ++j) sum += std::exp(0.7 * get(x, {i[0], i[1], j}) - mx);
          ASSERT_NEAR(get(y, i), std::exp(0.7 * get(x, i) - mx) / sum, 1e-6);
        });
      }
}

TEST(Norm, RopeNeoxRotatesHalvesAndScalesPositions) {
  ExecutionContext ctx;
  for (Layout l : {Layout::Offset, Layout::Transposed})
    for (int64_t dims : {0, 12}) {
      const Tensor x = random_view(Shape{3, 2, 18}, l, 11);
      const Tensor y = ops::rope(ctx, x, 4, {.base = 500.0f, .dims = dims, .neox = true, .freq_scale = 0.25f});
      const int64_t nd = dims ? dims : 18, half = nd / 2;
      for_each_index(x.shape(), [&](const Index& i) {
        const int64_t d = i[2];
        if (d >= nd) {
          ASSERT_EQ(get(y, i), get(x, i));
          return;
        }
        const int64_t pair = d % half;
        const double pos = static_cast<double>(4 + i[0]) * 0.25;
        const double theta = pos * std::pow(500.0, -2.0 * static_cast<double>(pair) / static_cast<double>(nd));
        const double x0 = get(x, {i[0], i[1], pair}), x1 = get(x, {i[0], i[1], pair + half});
        const double ref = d < half ? x0 * std::cos(theta) - x1 * std::sin(theta) : x0 * std::sin(theta) + x1 * std::cos(theta);
        ASSERT_NEAR(get(y, i), ref, 1e-5) << i[0] << "," << i[1] << "," << i[2];
      });
    }
}
