// The mixture-of-experts FFN (model::experts_ffn) against a direct computation in double, and its
// routing (ops::choose_experts, ops::weigh_experts) against llama.cpp's rule: softmax over all experts, top-k,
// renormalized.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "skainet/compute/ops.hpp"
#include "skainet/model/model.hpp"

using namespace skainet;

namespace {

struct ExpertChoice {
  uint32_t expert = 0;
  float weight = 0.0f;
};
// One row's routing through the two ops' row kernels, as (expert, weight) pairs.
void route_experts(const std::vector<float>& logits, std::vector<ExpertChoice>& chosen) {
  std::vector<int32_t> ids(chosen.size());
  std::vector<float> weights(chosen.size());
  skainet::ops::choose_experts(logits, ids);
  skainet::ops::weigh_experts(logits, ids, weights);
  for (size_t j = 0; j < chosen.size(); ++j) chosen[j] = {static_cast<uint32_t>(ids[j]), weights[j]};
}

Tensor filled(const Shape& shape, std::mt19937& rng, float sd) {
  const Tensor t = memory::ambient().allocate(shape, GgmlType::F32, "test");
  std::normal_distribution<float> d(0.0f, sd);
  float* p = t.mutable_data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = d(rng);
  return t;
}

// y[o] = sum_i x[i] * w[o][i] over a row-major [out, in] matrix at `w`.
std::vector<double> matvec(const float* w, const std::vector<double>& x, int64_t out) {
  std::vector<double> y(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o)
    for (size_t i = 0; i < x.size(); ++i) y[static_cast<size_t>(o)] += x[i] * w[o * static_cast<int64_t>(x.size()) + i];
  return y;
}

struct Stacks {
  int64_t experts, dim, ffn;
  model::ExpertWeights w;
};

Stacks make_stacks(int64_t experts, int64_t dim, int64_t ffn, std::mt19937& rng) {
  const float router_sd = 2.0f / std::sqrt(static_cast<float>(dim));
  return {experts,
          dim,
          ffn,
          {filled({experts, dim}, rng, router_sd), filled({experts, ffn, dim}, rng, 0.3f),
           filled({experts, ffn, dim}, rng, 0.3f), filled({experts, dim, ffn}, rng, 0.3f)}};
}

// The FFN of one row, in double, straight from the definition.
std::vector<double> direct(const Stacks& s, const float* row, size_t k) {
  const std::vector<double> x(row, row + s.dim);
  const std::vector<double> logits = matvec(s.w.router.data<float>(), x, s.experts);
  std::vector<size_t> order(static_cast<size_t>(s.experts));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  double chosen_sum = 0;
  for (size_t j = 0; j < k; ++j) chosen_sum += std::exp(logits[order[j]] - logits[order[0]]);
  std::vector<double> out(static_cast<size_t>(s.dim));
  for (size_t j = 0; j < k; ++j) {
    const int64_t e = static_cast<int64_t>(order[j]);
    const double weight = std::exp(logits[order[j]] - logits[order[0]]) / chosen_sum;
    const auto g = matvec(s.w.gate.data<float>() + e * s.ffn * s.dim, x, s.ffn);
    const auto u = matvec(s.w.up.data<float>() + e * s.ffn * s.dim, x, s.ffn);
    std::vector<double> act(static_cast<size_t>(s.ffn));
    for (size_t i = 0; i < act.size(); ++i) act[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    const auto d = matvec(s.w.down.data<float>() + e * s.dim * s.ffn, act, s.dim);
    for (size_t i = 0; i < out.size(); ++i) out[i] += weight * d[i];
  }
  return out;
}

}  // namespace

TEST(Experts, RoutingIsSoftmaxThenTopKRenormalized) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.5f, 0.0f};
  std::vector<ExpertChoice> chosen(2);
  route_experts(logits, chosen);
  EXPECT_EQ(chosen[0].expert, 1u);
  EXPECT_EQ(chosen[1].expert, 3u);
  // Renormalized softmax probabilities equal a softmax over the chosen logits alone.
  EXPECT_NEAR(chosen[0].weight, 1.0 / (1.0 + std::exp(-0.5)), 1e-6);
  EXPECT_NEAR(chosen[0].weight + chosen[1].weight, 1.0, 1e-6);
}

TEST(Experts, TiesGoToTheLowerExpert) {
  std::vector<ExpertChoice> chosen(2);
  route_experts(std::vector<float>{1.0f, 3.0f, 3.0f, 3.0f}, chosen);
  EXPECT_EQ(chosen[0].expert, 1u);
  EXPECT_EQ(chosen[1].expert, 2u);
  EXPECT_FLOAT_EQ(chosen[0].weight, 0.5f);
  route_experts(std::vector<float>{0.0f, 0.0f, 0.0f}, chosen);
  EXPECT_EQ(chosen[0].expert, 0u);
  EXPECT_EQ(chosen[1].expert, 1u);
}

TEST(Experts, AllExpertsUsedWeighsEachByItsSoftmax) {
  const std::vector<float> logits = {0.3f, -2.0f, 1.1f, 0.7f};
  std::vector<ExpertChoice> chosen(4);
  route_experts(logits, chosen);
  double total = 0;
  for (float l : logits) total += std::exp(l);
  const std::vector<uint32_t> order = {2, 3, 0, 1};
  for (size_t j = 0; j < 4; ++j) {
    EXPECT_EQ(chosen[j].expert, order[j]);
    EXPECT_NEAR(chosen[j].weight, std::exp(logits[order[j]]) / total, 1e-6);
  }
  std::vector<ExpertChoice> too_many(5);
  EXPECT_THROW(route_experts(logits, too_many), InvalidArgument);
}

TEST(Experts, FfnEqualsTheDirectComputationAtOddSizes) {
  std::mt19937 rng(29);
  memory::ExecutionContext ctx;
  for (const auto& [experts, k] : {std::pair{5, 2}, {7, 3}, {3, 3}, {4, 1}}) {
    SCOPED_TRACE(::testing::Message() << experts << " experts, " << k << " used");
    const Stacks s = make_stacks(experts, 37, 23, rng);
    const Tensor h = filled({9, s.dim}, rng, 1.0f);  // groups of several rows
    const Tensor y = model::experts_ffn(ctx, h, s.w, k);
    ASSERT_EQ(y.shape(), (Shape{9, s.dim}));
    for (int64_t t = 0; t < 9; ++t) {
      const std::vector<double> want = direct(s, h.data<float>() + t * s.dim, static_cast<size_t>(k));
      for (int64_t i = 0; i < s.dim; ++i)
        ASSERT_NEAR(y.data<float>()[t * s.dim + i], want[static_cast<size_t>(i)], 1e-4);
    }
  }
}

// An expert no row chooses is never read: its matrices full of NaN leave the output finite.
TEST(Experts, AnExpertNeverChosenIsNeverRead) {
  std::mt19937 rng(7);
  memory::ExecutionContext ctx;
  const Stacks s = make_stacks(4, 16, 8, rng);
  // Experts 0 to 2 see logit h[t][e] (at least 5), expert 3 logit 0: never among the top 2.
  float* router = s.w.router.mutable_data<float>();
  std::fill(router, router + s.experts * s.dim, 0.0f);
  for (int64_t e = 0; e < 3; ++e) router[e * s.dim + e] = 1.0f;
  const Tensor h = filled({4, s.dim}, rng, 1.0f);
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t e = 0; e < 3; ++e) h.mutable_data<float>()[t * s.dim + e] = 5.0f + static_cast<float>((t + e) % 3);
  for (const Tensor& stack : {s.w.gate, s.w.up, s.w.down}) {
    float* p = stack.mutable_data<float>() + 3 * s.dim * s.ffn;
    std::fill(p, p + s.dim * s.ffn, std::numeric_limits<float>::quiet_NaN());
  }
  const Tensor y = model::experts_ffn(ctx, h, s.w, 2);
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_TRUE(std::isfinite(y.data<float>()[i])) << i;
}

// matmul_experts equals, slot by slot, the plain matmul of that slot's row by its expert's matrix,
// for x [n, in] (every choice reads its row) and [n, k, in] (each choice its own row). Within float
// rounding, not bit for bit: an expert's rows go through the several-row kernels (on the SIMD levels
// the short-k products sum in another order than the one-row dot).
TEST(Experts, MatmulByExpertIdEqualsThePlainMatmulOfEachSlot) {
  std::mt19937 rng(3);
  memory::ExecutionContext ctx;
  const int64_t n = 5, k = 3, experts = 6, in = 19, out = 11;
  const Tensor stack = filled({experts, out, in}, rng, 0.5f);
  const Tensor ids = memory::ambient().allocate({n, k}, GgmlType::I32, "ids");
  const int32_t chosen[n * k] = {5, 0, 2, 2, 5, 0, 0, 2, 5, 3, 2, 0, 5, 2, 0};  // expert 1 and 4 never
  std::copy(chosen, chosen + n * k, ids.mutable_data<int32_t>());
  for (const Shape& xs : {Shape{n, in}, Shape{n, k, in}}) {
    const Tensor x = filled(xs, rng, 1.0f);
    const Tensor y = ops::matmul_experts(ctx, x, stack, ids);
    ASSERT_EQ(y.shape(), (Shape{n, k, out}));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < k; ++j) {
        const Tensor row = xs.rank() == 2 ? x.rows(t, 1) : x.row(t).rows(j, 1);
        const Tensor want = ops::matmul(ctx, row, stack.select(0, chosen[t * k + j]));
        for (int64_t o = 0; o < out; ++o)
          ASSERT_NEAR(y.row(t).row(j).data<float>()[o], want.data<float>()[o],
                      1e-5f * (1.0f + std::fabs(want.data<float>()[o])))
              << t << " " << j << " " << o;
      }
  }
  const Tensor bad = memory::ambient().allocate({n, k}, GgmlType::I32, "ids");
  std::fill(bad.mutable_data<int32_t>(), bad.mutable_data<int32_t>() + n * k, static_cast<int32_t>(experts));
  EXPECT_THROW(ops::matmul_experts(ctx, filled({n, in}, rng, 1.0f), stack, bad), InvalidArgument);
}

// A decode step's few rows: every chosen expert's product in one pass over all of them (where the
// scratch already holds their prepared rows) gives what one matmul per expert gives (a context with no
// scratch takes that path), for dense and packed stacks and with gpt-oss's bias rows; and each
// slot is its row times its expert's matrix plus the expert's bias row.
TEST(Experts, FewRowsInOnePassEqualOneMatmulPerExpert) {
  std::mt19937 rng(5);
  memory::ExecutionContext one_pass, per_expert;
  one_pass.reserve_scratch(size_t{1} << 20);
  const int64_t k = 3, experts = 7, in = 512, out = 37;
  for (const GgmlType type : {GgmlType::F32, GgmlType::Q8_0, GgmlType::Q4_K}) {
    const Tensor stack = ops::convert(one_pass, filled({experts, out, in}, rng, 0.5f), type);
    const Tensor bias = filled({experts, out}, rng, 1.0f);
    for (const int64_t n : {1, 2, 5}) {
      const Tensor ids = memory::ambient().allocate({n, k}, GgmlType::I32, "ids");
      std::vector<int32_t> order(experts);
      for (int64_t t = 0; t < n; ++t) {
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        std::copy(order.begin(), order.begin() + k, ids.row(t).mutable_data<int32_t>());
      }
      const Tensor x = filled({n, in}, rng, 1.0f);
      const Tensor fast = ops::matmul_experts(one_pass, x, stack, ids, bias);
      const Tensor slow = ops::matmul_experts(per_expert, x, stack, ids, bias);
      // The same kernels on the same rows; only where a chunk of weight rows starts differs, which a
      // tile kernel's remainder may round differently.
      for (int64_t i = 0; i < fast.numel(); ++i)
        ASSERT_NEAR(fast.data<float>()[i], slow.data<float>()[i],
                    1e-5 * std::max(1.0f, std::abs(slow.data<float>()[i])))
            << type_name(type) << " n " << n << " at " << i;
      for (int64_t t = 0; t < n; ++t)
        for (int64_t j = 0; j < k; ++j) {
          const int32_t e = ids.row(t).data<int32_t>()[j];
          const Tensor want = ops::matmul(per_expert, x.rows(t, 1), stack.select(0, e));
          for (int64_t o = 0; o < out; ++o)
            ASSERT_NEAR(fast.row(t).row(j).data<float>()[o], want.data<float>()[o] + bias.row(e).data<float>()[o], 1e-3)
                << type_name(type) << " n " << n << " slot " << t << "," << j;
        }
    }
  }
  EXPECT_EQ(one_pass.scratch_stats().growths, 0u);
}
