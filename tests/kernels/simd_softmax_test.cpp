// Every table's softmax (the SIMD levels' vector exp) against the reference's: row lengths around
// the vector widths, causal rows with offsets (some rows see nothing, some everything), sliding
// windows and soft-capped scores, in place and not, a strided view (which goes to the reference), and
// rows with very large, very negative and -inf scores. The vector exp is within ~2e-7 relative of
// libm's and the sums are float, so every probability is within 1e-6 relative (plus 1e-30 for what
// underflows) of the reference's. Capped, the vector tanh is a few ulp from libm's, so the score
// cap * tanh(s / cap) is off by up to a few ulp of the cap: 1e-5 relative there.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "quant_test_util.hpp"
#include "skainet/compute/kernel_ops.hpp"

namespace skainet::kernels {
namespace {

void expect_close(const Tensor& got, const Tensor& want, const std::string& where, double rel = 1e-6) {
  for (int64_t q = 0; q < got.dim(0); ++q)
    for (int64_t j = 0; j < got.dim(1); ++j) {
      float g, w;
      std::memcpy(&g, got.raw() + q * got.stride(0) + j * got.stride(1), 4);
      std::memcpy(&w, want.raw() + q * want.stride(0) + j * want.stride(1), 4);
      ASSERT_NEAR(g, w, rel * std::fabs(w) + 1e-30) << where << " q=" << q << " j=" << j;
    }
}

TEST(SimdSoftmax, MatchesReferenceOnEveryLevel) {
  for (IsaLevel level : kIsaLevels) {
    const KernelTable* table = table_for(level);
    if (!table) continue;
    for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 33, 100, 1000})
      for (int64_t queries : {1, 3, 5})
        for (const auto& [causal, offset] : {std::pair{false, int64_t{0}}, std::pair{true, int64_t{0}},
                                             std::pair{true, int64_t{2}}, std::pair{true, int64_t{-2}}})
          for (float spread : {1.0f, 40.0f}) {
            const std::string where = std::string(isa_level_name(level)) + " n=" + std::to_string(n) +
                                      " queries=" + std::to_string(queries) + (causal ? " causal" : "") +
                                      " offset=" + std::to_string(offset) + " spread=" + std::to_string(spread);
            const SoftmaxParams p{.scale = 0.7f, .causal = causal, .offset = offset};
            const auto seed = static_cast<uint32_t>(n * 31 + queries);
            test::F32Rows x = test::f32_rows(queries, n, seed, spread), want = test::f32_rows(queries, n, seed, 0.0f),
                          out = test::f32_rows(queries, n, seed, 0.0f),
                          in_place = test::f32_rows(queries, n, seed, spread);
            ref::softmax(x.t, p, want.t);
            table->softmax(x.t, p, out.t);
            expect_close(out.t, want.t, where);
            table->softmax(in_place.t, p, in_place.t);
            expect_close(in_place.t, want.t, where + " in place");
            if (HasFatalFailure()) return;
          }
  }
}

TEST(SimdSoftmax, WindowsAndSoftcapMatchReferenceOnEveryLevel) {
  for (IsaLevel level : kIsaLevels) {
    const KernelTable* table = table_for(level);
    if (!table) continue;
    for (int64_t n : {1, 7, 9, 17, 33, 100})
      for (int64_t queries : {1, 5})
        for (int64_t offset : {int64_t{-2}, int64_t{0}, int64_t{3}, n - 1})
          for (int64_t window : {0, 1, 3, 20})
            for (float softcap : {0.0f, 0.75f, 5.0f})
              for (bool causal : {true, false}) {
                const std::string where = std::string(isa_level_name(level)) + " n=" + std::to_string(n) +
                                          " queries=" + std::to_string(queries) + " offset=" + std::to_string(offset) +
                                          " window=" + std::to_string(window) + " softcap=" + std::to_string(softcap) +
                                          (causal ? " causal" : "");
                const SoftmaxParams p{
                    .scale = 0.7f, .causal = causal, .offset = offset, .window = window, .softcap = softcap};
                const auto seed = static_cast<uint32_t>(n * 7 + queries + window);
                test::F32Rows x = test::f32_rows(queries, n, seed, 40.0f),
                              want = test::f32_rows(queries, n, seed, 0.0f),
                              out = test::f32_rows(queries, n, seed, 0.0f),
                              in_place = test::f32_rows(queries, n, seed, 40.0f);
                ref::softmax(x.t, p, want.t);
                table->softmax(x.t, p, out.t);
                const double rel = softcap > 0 ? 1e-5 : 1e-6;
                expect_close(out.t, want.t, where, rel);
                table->softmax(in_place.t, p, in_place.t);
                expect_close(in_place.t, want.t, where + " in place", rel);
                if (HasFatalFailure()) return;
              }
  }
}

// Attention sinks (SoftmaxParams::sink): one more score in the max and the sum, no column of its own;
// below, within and far above the scores, windowed and capped rows, on every level.
TEST(SimdSoftmax, SinksMatchReferenceOnEveryLevel) {
  for (IsaLevel level : kIsaLevels) {
    const KernelTable* table = table_for(level);
    if (!table) continue;
    for (int64_t n : {1, 9, 33})
      for (float sink : {-50.0f, -0.5f, 2.0f, 80.0f})
        for (float softcap : {0.0f, 5.0f}) {
          const std::string where = std::string(isa_level_name(level)) + " n=" + std::to_string(n) +
                                    " sink=" + std::to_string(sink) + " softcap=" + std::to_string(softcap);
          const SoftmaxParams p{
              .scale = 0.7f, .causal = true, .offset = n - 3, .window = 4, .softcap = softcap, .sink = sink};
          const auto seed = static_cast<uint32_t>(n * 5 + 1);
          test::F32Rows x = test::f32_rows(3, n, seed, 4.0f), want = test::f32_rows(3, n, seed, 0.0f),
                        out = test::f32_rows(3, n, seed, 0.0f);
          ref::softmax(x.t, p, want.t);
          table->softmax(x.t, p, out.t);
          expect_close(out.t, want.t, where, softcap > 0 ? 1e-5 : 1e-6);
          if (HasFatalFailure()) return;
        }
  }
}

// By hand: scores {0, ln 3} and a sink of ln 4 give probabilities 1/8 and 3/8 (the sink takes 4/8).
TEST(SimdSoftmax, SinkByHand) {
  for (IsaLevel level : kIsaLevels) {
    const KernelTable* table = table_for(level);
    if (!table) continue;
    std::vector<float> v = {0.0f, std::log(3.0f)}, o(2, -1.0f);
    const Tensor x(Storage::borrow(v.data(), 8, true, "x"), Shape{1, 2}, GgmlType::F32);
    const Tensor out(Storage::borrow(o.data(), 8, true, "out"), Shape{1, 2}, GgmlType::F32);
    table->softmax(x, {.sink = std::log(4.0f)}, out);
    EXPECT_NEAR(o[0], 0.125f, 1e-6f) << isa_level_name(level);
    EXPECT_NEAR(o[1], 0.375f, 1e-6f) << isa_level_name(level);
  }
}

// The visibility rule by hand: query q (position q + offset) sees columns c <= q + offset with
// q + offset - c < window; capped scores are cap * tanh(scale x / cap).
TEST(SimdSoftmax, WindowAndSoftcapByHand) {
  for (IsaLevel level : kIsaLevels) {
    const KernelTable* table = table_for(level);
    if (!table) continue;
    // Two queries at positions 3 and 4 over 6 columns, window 2: columns {2, 3} and {3, 4}.
    std::vector<float> v = {0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5};
    std::vector<float> o(v.size(), -1.0f);
    const Tensor x(Storage::borrow(v.data(), v.size() * 4, true, "x"), Shape{2, 6}, GgmlType::F32);
    const Tensor out(Storage::borrow(o.data(), o.size() * 4, true, "out"), Shape{2, 6}, GgmlType::F32);
    table->softmax(x, {.scale = 1.0f, .causal = true, .offset = 3, .window = 2}, out);
    const double e = std::exp(1.0), lo = 1 / (1 + e), hi = e / (1 + e);
    const std::vector<double> want = {0, 0, lo, hi, 0, 0, 0, 0, 0, lo, hi, 0};
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(o[i], want[i], 1e-6) << isa_level_name(level) << " " << i;
    // Capped at 2 with scale 0.5: scores 2 tanh(0.5 x / 2) over one row of 6, not causal.
    table->softmax(x, {.scale = 0.5f, .softcap = 2.0f}, out);
    double sum = 0;
    for (int c = 0; c < 6; ++c) sum += std::exp(2 * std::tanh(0.25 * c));
    for (int c = 0; c < 6; ++c)
      EXPECT_NEAR(o[static_cast<size_t>(c)], std::exp(2 * std::tanh(0.25 * c)) / sum, 1e-6)
          << isa_level_name(level) << " " << c;
  }
}

TEST(SimdSoftmax, ExtremeScoresAndStridedRows) {
  const float inf = std::numeric_limits<float>::infinity();
  for (IsaLevel level : kIsaLevels) {
    const KernelTable* table = table_for(level);
    if (!table) continue;
    test::F32Rows x = test::f32_rows(2, 40, 3, 1.0f), want = test::f32_rows(2, 40, 3, 0.0f),
                  out = test::f32_rows(2, 40, 3, 0.0f);
    x.v[1 + 3] = 80.0f;   // dominates row 0
    x.v[1 + 5] = -inf;    // exactly 0 in the reference
    x.v[1 + 7] = -1e30f;  // underflows
    x.v[1 + 40 + 9] = -200.0f;
    const SoftmaxParams p{.scale = 1.0f};
    ref::softmax(x.t, p, want.t);
    table->softmax(x.t, p, out.t);
    expect_close(out.t, want.t, std::string(isa_level_name(level)) + " extremes");
    // A transposed view: each row's elements 40 floats apart, not contiguous (the reference path).
    test::F32Rows wide = test::f32_rows(2, 40, 9, 1.0f), wide_want = test::f32_rows(2, 40, 9, 0.0f),
                  wide_out = test::f32_rows(2, 40, 9, 0.0f);
    ref::softmax(wide.t.transpose(0, 1), p, wide_want.t.transpose(0, 1));
    table->softmax(wide.t.transpose(0, 1), p, wide_out.t.transpose(0, 1));
    expect_close(wide_out.t, wide_want.t, std::string(isa_level_name(level)) + " strided");
  }
}

}  // namespace
}  // namespace skainet::kernels
