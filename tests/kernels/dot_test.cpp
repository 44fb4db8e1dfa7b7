#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "quant_test_util.hpp"

namespace skainet::kernels::ref {
namespace {

class DotRow : public ::testing::TestWithParam<GgmlType> {};

TEST_P(DotRow, EqualsDotOfDequantizedRow) {
  const GgmlType t = GetParam();
  const bool k = type_traits(t).block_elements == 256;
  uint32_t seed = 40;
  for (int64_t n : k ? std::vector<int64_t>{256, 768, 4096} : std::vector<int64_t>{32, 96, 288, 4096}) {
    const auto w = test::weights_like(static_cast<size_t>(n), seed++);
    const auto x = test::weights_like(static_cast<size_t>(n), seed++, 0.5f);
    std::vector<std::byte> q(test::encoded_bytes(t, static_cast<size_t>(n)) + 3);
    std::byte* row = q.data() + 3;  // an odd address: rows in files are not aligned
    quantize_row(t, w.data(), row, n);
    std::vector<float> deq(static_cast<size_t>(n));
    dequantize_row(t, row, deq.data(), n);
    double exact = 0, magnitude = 0;
    for (int64_t i = 0; i < n; ++i) {
      exact += static_cast<double>(deq[i]) * x[i];
      magnitude += std::fabs(static_cast<double>(deq[i]) * x[i]);
    }
    const float got = dot_row(t, row, x.data(), n);
    // Float accumulation of n products: error well under n * 2^-24 of the sum of magnitudes.
    EXPECT_NEAR(got, exact, magnitude * 1e-6 + 1e-30) << type_name(t) << " n=" << n;
  }
}

TEST_P(DotRow, PicksOutSingleElements) {
  // x = e_j: the dot product is exactly element j of the dequantized row.
  const GgmlType t = GetParam();
  const int64_t n = type_traits(t).block_elements == 256 ? 512 : 64;
  const auto w = test::weights_like(static_cast<size_t>(n), 77);
  std::vector<std::byte> q(test::encoded_bytes(t, static_cast<size_t>(n)));
  quantize_row(t, w.data(), q.data(), n);
  std::vector<float> deq(static_cast<size_t>(n));
  dequantize_row(t, q.data(), deq.data(), n);
  for (int64_t j : {int64_t{0}, int64_t{1}, n / 2 + 3, n - 1}) {
    std::vector<float> x(static_cast<size_t>(n), 0.0f);
    x[j] = 1.0f;
    EXPECT_EQ(dot_row(t, q.data(), x.data(), n), deq[j]) << type_name(t) << " j=" << j;
  }
}

INSTANTIATE_TEST_SUITE_P(All, DotRow, ::testing::ValuesIn(test::kRefTypes),
                         [](const auto& info) { return std::string(type_name(info.param)); });

}  // namespace
}  // namespace skainet::kernels::ref
