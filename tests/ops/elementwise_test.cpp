#include <algorithm>

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
  EXPECT_THROW(
      ops::add(ctx, random_view(Shape{3, 4}, Layout::Contiguous, 1), random_view(Shape{3}, Layout::Contiguous, 1)),
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
  EXPECT_THROW(ops::rms_norm(ctx, random_view(Shape{2, 8}, Layout::Contiguous, 1),
                             random_view(Shape{7}, Layout::Contiguous, 1), 1e-5f),
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
        const double theta = static_cast<double>(5 + i[0]) *
                             std::pow(10000.0, -2.0 * static_cast<double>(pair) / static_cast<double>(nd));
        const double x0 = get(x, {i[0], i[1], 2 * pair}), x1 = get(x, {i[0], i[1], 2 * pair + 1});
        const double ref =
            d % 2 == 0 ? x0 * std::cos(theta) - x1 * std::sin(theta) : x0 * std::sin(theta) + x1 * std::cos(theta);
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
        const double ref =
            d < half ? x0 * std::cos(theta) - x1 * std::sin(theta) : x0 * std::sin(theta) + x1 * std::cos(theta);
        ASSERT_NEAR(get(y, i), ref, 1e-5) << i[0] << "," << i[1] << "," << i[2];
      });
    }
}

TEST(Elementwise, GegluAndSoftcap) {
  ExecutionContext ctx;
  for (Layout l : {Layout::Offset, Layout::Transposed}) {
    const Tensor x = random_view(Shape{7, 23}, l, 13, -12.0f, 12.0f);
    const Tensor u = random_view(Shape{7, 23}, Layout::Offset, 14);
    const Tensor gg = ops::geglu(ctx, x, u), sc = ops::softcap(ctx, x, 3.5f);
    for_each_index(x.shape(), [&](const Index& i) {
      const double v = get(x, i);
      const double gelu = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
      ASSERT_NEAR(get(gg, i), gelu * get(u, i), 1e-5);
      ASSERT_NEAR(get(sc, i), 3.5 * std::tanh(v / 3.5), 1e-6);
    });
  }
  const Tensor x = random_view(Shape{2, 8}, Layout::Contiguous, 1);
  EXPECT_THROW(ops::geglu(ctx, x, random_view(Shape{2, 7}, Layout::Contiguous, 2)), InvalidArgument);
  for (float cap : {0.0f, -1.0f, INFINITY, NAN}) EXPECT_THROW(ops::softcap(ctx, x, cap), InvalidArgument) << cap;
}

// gpt-oss's clamped SwiGLU over both clamps (gate above 7, up outside [-7, 7]) and negative gates.
TEST(Elementwise, SwigluOaiClampsLikeGgml) {
  ExecutionContext ctx;
  for (Layout l : {Layout::Offset, Layout::Transposed}) {
    const Tensor g = random_view(Shape{7, 23}, l, 15, -12.0f, 12.0f);
    const Tensor u = random_view(Shape{7, 23}, Layout::Offset, 16, -12.0f, 12.0f);
    const Tensor y = ops::swiglu_oai(ctx, g, u);
    for_each_index(g.shape(), [&](const Index& i) {
      const double x = std::min<double>(get(g, i), 7.0), v = std::clamp<double>(get(u, i), -7.0, 7.0);
      ASSERT_NEAR(get(y, i), x / (1.0 + std::exp(-1.702 * x)) * (v + 1.0), 1e-5 * (1 + std::fabs(x * v)));
    });
  }
  const Tensor x = random_view(Shape{2, 8}, Layout::Contiguous, 1);
  EXPECT_THROW(ops::swiglu_oai(ctx, x, random_view(Shape{2, 7}, Layout::Contiguous, 2)), InvalidArgument);
}

// pos · freq_scale · base^(-2i/dims) / factor[i], for pair i in both pair layouts (ggml_rope_ext with
// freq factors); factors of 1 give the plain rotation bit for bit.
TEST(Norm, RopeFreqFactorsDivideEachPairsAngle) {
  ExecutionContext ctx;
  for (bool neox : {false, true})
    for (int64_t dims : {0, 12}) {
      const Tensor x = random_view(Shape{3, 2, 18}, Layout::Transposed, 15);
      const int64_t nd = dims ? dims : 18, half = nd / 2;
      const Tensor ff = random_view(Shape{half}, Layout::Offset, 16, 1.0f, 8.0f);
      const ops::RopeParams p{.base = 500.0f, .dims = dims, .neox = neox, .freq_scale = 0.5f};
      const Tensor y = ops::rope(ctx, x, 4, p, ff);
      for_each_index(x.shape(), [&](const Index& i) {
        const int64_t d = i[2];
        if (d >= nd) {
          ASSERT_EQ(get(y, i), get(x, i));
          return;
        }
        const int64_t pair = neox ? d % half : d / 2;
        const int64_t a = neox ? pair : 2 * pair, b = neox ? pair + half : 2 * pair + 1;
        const double theta = static_cast<double>(4 + i[0]) * 0.5 *
                             std::pow(500.0, -2.0 * static_cast<double>(pair) / static_cast<double>(nd)) /
                             get(ff, {pair});
        const double x0 = get(x, {i[0], i[1], a}), x1 = get(x, {i[0], i[1], b});
        const bool first = neox ? d < half : d % 2 == 0;
        const double ref =
            first ? x0 * std::cos(theta) - x1 * std::sin(theta) : x0 * std::sin(theta) + x1 * std::cos(theta);
        ASSERT_NEAR(get(y, i), ref, 1e-5) << neox << " " << i[0] << "," << i[1] << "," << i[2];
      });
      std::vector<float> one(static_cast<size_t>(half), 1.0f);
      const Tensor ones(Storage::borrow(one.data(), one.size() * 4, false, "ones"), Shape{half}, GgmlType::F32);
      EXPECT_EQ(to_vector(ops::rope(ctx, x, 4, p)), to_vector(ops::rope(ctx, x, 4, p, ones)));
    }
  // By hand: one pair (1, 0) at position 1, base 10000, factor 2: angle 1/2.
  std::vector<float> v = {1.0f, 0.0f}, f = {2.0f};
  const Tensor x1(Storage::borrow(v.data(), 8, false, "x"), Shape{1, 2}, GgmlType::F32);
  const Tensor f1(Storage::borrow(f.data(), 4, false, "ff"), Shape{1}, GgmlType::F32);
  const Tensor y1 = ops::rope(ctx, x1, 1, {}, f1);
  EXPECT_NEAR(get(y1, {0, 0}), std::cos(0.5), 1e-7);
  EXPECT_NEAR(get(y1, {0, 1}), std::sin(0.5), 1e-7);
  const Tensor x = random_view(Shape{2, 8}, Layout::Contiguous, 1);
  EXPECT_THROW(ops::rope(ctx, x, 0, {}, random_view(Shape{3}, Layout::Contiguous, 2)), InvalidArgument);  // 8/2 = 4
  EXPECT_THROW(ops::rope(ctx, x, 0, {.dims = 4}, random_view(Shape{4}, Layout::Contiguous, 2)), InvalidArgument);
  EXPECT_NO_THROW(ops::rope(ctx, x, 0, {.dims = 4}, random_view(Shape{2}, Layout::Contiguous, 2)));
}

TEST(Norm, SoftmaxWithWindowAndSoftcap) {
  ExecutionContext ctx;
  for (Layout l : {Layout::Offset, Layout::Transposed})
    for (bool causal : {false, true})
      for (int64_t window : {0, 1, 3})
        for (float cap : {0.0f, 1.5f}) {
          const int64_t offset = 4;
          const Tensor x = random_view(Shape{2, 3, 11}, l, 17, -4.0f, 4.0f);
          const Tensor y = ops::softmax(
              ctx, x, {.scale = 0.7f, .causal = causal, .offset = offset, .window = window, .softcap = cap});
          const auto score = [&](const Index& i) {
            const double s = 0.7 * get(x, i);
            return cap > 0 ? cap * std::tanh(s / cap) : s;
          };
          for_each_index(x.shape(), [&](const Index& i) {
            const int64_t pos = i[1] + offset;
            const auto sees = [&](int64_t c) { return (!causal || c <= pos) && (window == 0 || pos - c < window); };
            if (!sees(i[2])) {
              ASSERT_EQ(get(y, i), 0.0);
              return;
            }
            double mx = -1e30, sum = 0;
            for (int64_t j = 0; j < 11; ++j)
              if (sees(j)) mx = std::max(mx, score({i[0], i[1], j}));
            for (int64_t j = 0; j < 11; ++j)
              if (sees(j)) sum += std::exp(score({i[0], i[1], j}) - mx);
            ASSERT_NEAR(get(y, i), std::exp(score(i) - mx) / sum, 1e-6) << causal << " " << window << " " << cap;
          });
        }
  const Tensor x = random_view(Shape{2, 8}, Layout::Contiguous, 1);
  EXPECT_THROW(ops::softmax(ctx, x, {.window = -1}), InvalidArgument);
  EXPECT_THROW(ops::softmax(ctx, x, {.softcap = -2.0f}), InvalidArgument);
  EXPECT_THROW(ops::softmax(ctx, x, {.softcap = NAN}), InvalidArgument);
}
