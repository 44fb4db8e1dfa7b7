// Every table's softmax (the SIMD levels' vector exp) against the reference's: row lengths around
// the vector widths, causal rows with offsets (some rows see nothing, some everything), in place and
// not, a strided view (which goes to the reference), and rows with very large, very negative and
// -inf scores. The vector exp is within ~2e-7 relative of libm's and the sums are float, so every
// probability is within 1e-6 relative (plus 1e-30 for what underflows) of the reference's.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "quant_test_util.hpp"
#include "skainet/kernel_ops.hpp"

namespace skainet::kernels {
namespace {

struct Rows {
  std::vector<float> v;
  Tensor t;
};

// [queries, n] floats at a 4-byte offset (not vector aligned).
Rows make_rows(int64_t queries, int64_t n, uint32_t seed, float spread) {
  Rows r;
  r.v = test::weights_like(static_cast<size_t>(queries * n + 1), seed);
  for (float& f : r.v) f *= spread;
  r.t = Tensor(Storage::borrow(r.v.data(), r.v.size() * 4, true, "x"), Shape{queries, n}, GgmlType::F32, 4);
  return r;
}

void expect_close(const Tensor& got, const Tensor& want, const std::string& where) {
  for (int64_t q = 0; q < got.dim(0); ++q)
    for (int64_t j = 0; j < got.dim(1); ++j) {
      float g, w;
      std::memcpy(&g, got.raw() + q * got.stride(0) + j * got.stride(1), 4);
      std::memcpy(&w, want.raw() + q * want.stride(0) + j * want.stride(1), 4);
      ASSERT_NEAR(g, w, 1e-6 * std::fabs(w) + 1e-30) << where << " q=" << q << " j=" << j;
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
            Rows x = make_rows(queries, n, seed, spread), want = make_rows(queries, n, seed, 0.0f),
                 out = make_rows(queries, n, seed, 0.0f), in_place = make_rows(queries, n, seed, spread);
            ref::softmax(x.t, p, want.t);
            table->softmax(x.t, p, out.t);
            expect_close(out.t, want.t, where);
            table->softmax(in_place.t, p, in_place.t);
            expect_close(in_place.t, want.t, where + " in place");
            if (HasFatalFailure()) return;
          }
  }
}

TEST(SimdSoftmax, ExtremeScoresAndStridedRows) {
  const float inf = std::numeric_limits<float>::infinity();
  for (IsaLevel level : kIsaLevels) {
    const KernelTable* table = table_for(level);
    if (!table) continue;
    Rows x = make_rows(2, 40, 3, 1.0f), want = make_rows(2, 40, 3, 0.0f), out = make_rows(2, 40, 3, 0.0f);
    x.v[1 + 3] = 80.0f;    // dominates row 0
    x.v[1 + 5] = -inf;     // exactly 0 in the reference
    x.v[1 + 7] = -1e30f;   // underflows
    x.v[1 + 40 + 9] = -200.0f;
    const SoftmaxParams p{.scale = 1.0f};
    ref::softmax(x.t, p, want.t);
    table->softmax(x.t, p, out.t);
    expect_close(out.t, want.t, std::string(isa_level_name(level)) + " extremes");
    // A transposed view: each row's elements 40 floats apart, not contiguous (the reference path).
    Rows wide = make_rows(2, 40, 9, 1.0f), wide_want = make_rows(2, 40, 9, 0.0f), wide_out = make_rows(2, 40, 9, 0.0f);
    ref::softmax(wide.t.transpose(0, 1), p, wide_want.t.transpose(0, 1));
    table->softmax(wide.t.transpose(0, 1), p, wide_out.t.transpose(0, 1));
    expect_close(wide_out.t, wide_want.t, std::string(isa_level_name(level)) + " strided");
  }
}

}  // namespace
}  // namespace skainet::kernels
