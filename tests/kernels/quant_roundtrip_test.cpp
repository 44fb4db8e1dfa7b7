// Round trips through every reference format: error bounds derived from each format's geometry,
// and byte-identical results whatever the alignment of source and destination.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "quant_test_util.hpp"
#include "skainet/core/blocks.hpp"

namespace skainet::kernels::ref {
namespace {

using test::encoded_bytes;
using test::kRefTypes;
using test::weights_like;

constexpr float kHalfUlp = 0x1p-11f;  // relative rounding of a scale stored as binary16

std::vector<int64_t> sizes_for(GgmlType t) {
  if (type_traits(t).block_elements == 256) return {256, 768, 2048};
  return {32, 96, 768, 4096};
}

// Largest error any element of one block may have after a round trip. Legacy formats have a
// closed form (half a step, one step at the clamped end, plus the binary16 rounding of the
// scale and minimum); the K formats search their scales, and are held to measured bounds with
// margin (docs/formats.md lists them).
float block_bound(GgmlType t, const float* x, int n) {
  float amax = 0, mn = x[0], mx = x[0];
  for (int i = 0; i < n; ++i) {
    amax = std::max(amax, std::fabs(x[i]));
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
  }
  const float range = mx - mn;
  const float eps = amax * 1e-6f;
  switch (t) {
    case GgmlType::Q8_0: return amax / 127 * 0.5f + amax * kHalfUlp + eps;
    case GgmlType::Q4_0: return amax / 8 + amax * 2 * kHalfUlp + eps;
    case GgmlType::Q5_0: return amax / 16 + amax * 2 * kHalfUlp + eps;
    case GgmlType::Q4_1: return range / 15 * 0.5f + (std::fabs(mn) + range) * kHalfUlp + eps;
    case GgmlType::Q5_1: return range / 31 * 0.5f + (std::fabs(mn) + range) * kHalfUlp + eps;
    // K formats: one step of the sub-block grid at worst; their 6-/8-bit sub-block scales are
    // fitted, so the step is bounded by the super-block's range over the levels.
    case GgmlType::Q4_K: return range / 15 * 1.0f + eps;
    case GgmlType::Q5_K: return range / 31 * 1.0f + eps;
    case GgmlType::Q6_K: return amax / 32 * 1.0f + eps;
    case GgmlType::Q2_K: return range / 3 * 1.0f + eps;
    case GgmlType::Q3_K: return amax / 4 * 1.0f + eps;
    // IQ4: the widest gap between adjacent levels (104 to 127) over the largest level.
    case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS: return amax * 23 / 127 + eps;
    // MXFP4: d = 2^(floor(log2 amax) - 3), levels d * {0, 1, 2, 3, 4, 6, 8, 12}: half the widest gap
    // (8 to 12) inside, or the distance past the top level 12 d (amax < 16 d) — exact powers of two.
    case GgmlType::MXFP4: {
      if (amax == 0) return 0;
      const float d = std::ldexp(1.0f, static_cast<int>(std::floor(std::log2(amax))) - 3);
      return std::max(2 * d, amax - 12 * d) + eps;
    }
    default: return 0;
  }
}

// Normalized RMS error bounds on Gaussian data with 1/64 outliers of 8 sigma (measured worst
// case over the sizes below, plus about a third).
double rms_bound(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return 0;
    case GgmlType::F16: return 0x1p-11;
    case GgmlType::BF16: return 0x1p-8;
    case GgmlType::Q8_0: return 0.014;
    case GgmlType::Q4_0: return 0.22;
    case GgmlType::Q4_1: return 0.14;
    case GgmlType::Q5_0: return 0.11;
    case GgmlType::Q5_1: return 0.07;
    case GgmlType::Q4_K: return 0.125;
    case GgmlType::Q5_K: return 0.07;
    case GgmlType::Q6_K: return 0.042;
    case GgmlType::Q2_K: return 0.52;
    case GgmlType::Q3_K: return 0.29;
    case GgmlType::IQ4_NL: return 0.185;
    case GgmlType::IQ4_XS: return 0.18;
    case GgmlType::MXFP4: return 0.30;
    default: return 0;
  }
}

struct RoundTrip {
  std::vector<std::byte> q;
  std::vector<float> y;
};

RoundTrip round_trip(GgmlType t, const std::vector<float>& x) {
  RoundTrip r{std::vector<std::byte>(encoded_bytes(t, x.size())), std::vector<float>(x.size())};
  quantize_row(t, x.data(), r.q.data(), static_cast<int64_t>(x.size()));
  dequantize_row(t, r.q.data(), r.y.data(), static_cast<int64_t>(x.size()));
  return r;
}

class RefFormat : public ::testing::TestWithParam<GgmlType> {};

TEST_P(RefFormat, RoundTripErrorWithinBounds) {
  const GgmlType t = GetParam();
  const int block = static_cast<int>(type_traits(t).block_elements);
  uint32_t seed = 1;
  for (int64_t n : sizes_for(t)) {
    const auto x = weights_like(static_cast<size_t>(n), seed++);
    const auto r = round_trip(t, x);
    double err2 = 0, sig2 = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double e = static_cast<double>(r.y[i]) - x[i];
      err2 += e * e;
      sig2 += static_cast<double>(x[i]) * x[i];
      if (t == GgmlType::F16) {
        ASSERT_LE(std::fabs(e), std::fabs(x[i]) * 0x1p-11 + 0x1p-25) << i;
      } else if (t == GgmlType::BF16) {
        ASSERT_LE(std::fabs(e), std::fabs(x[i]) * 0x1p-8) << i;
      }
    }
    EXPECT_LE(std::sqrt(err2 / sig2), rms_bound(t)) << type_name(t) << " n=" << n;
    if (t == GgmlType::F32) {
      EXPECT_EQ(r.y, x);
    }
    if (!type_traits(t).quantized) continue;
    for (int64_t b = 0; b < n / block; ++b) {
      const float* xb = x.data() + b * block;
      const float bound = block_bound(t, xb, block);
      for (int j = 0; j < block; ++j)
        ASSERT_LE(std::fabs(r.y[b * block + j] - xb[j]), bound)
            << type_name(t) << " n=" << n << " block " << b << " element " << j;
    }
  }
}

TEST_P(RefFormat, ZeroAndConstantBlocks) {
  const GgmlType t = GetParam();
  const size_t n = type_traits(t).block_elements == 256 ? 512 : 64;
  const std::vector<float> zeros(n, 0.0f);
  const auto rz = round_trip(t, zeros);
  for (float v : rz.y) ASSERT_EQ(v, 0.0f) << type_name(t);  // (-0.0 from Q4_0/Q5_0 compares equal)
  // (Small constants are not used: Q6_K's super-scale d = max/4096 goes subnormal in binary16
  // below |x| ~ 0.25, costing whole percents; that is the format, not the kernel.)
  for (float c : {1.0f, -0.375f, 0.125f}) {
    const std::vector<float> x(n, c);
    const auto r = round_trip(t, x);
    for (float v : r.y) ASSERT_NEAR(v, c, std::fabs(c) * 0.01f) << type_name(t) << " constant " << c;
  }
}

TEST_P(RefFormat, AlignmentDoesNotChangeResults) {
  const GgmlType t = GetParam();
  const int64_t n = type_traits(t).block_elements == 256 ? 768 : 96;
  const auto x = weights_like(static_cast<size_t>(n), 99);
  const auto ref = round_trip(t, x);
  const size_t bytes = ref.q.size();
  for (int foff = 1; foff <= 3; ++foff) {
    for (int boff = 1; boff <= 3; ++boff) {
      std::vector<float> xs(static_cast<size_t>(n) + 4);
      std::copy(x.begin(), x.end(), xs.begin() + foff);
      std::vector<std::byte> qs(bytes + 4);
      quantize_row(t, xs.data() + foff, qs.data() + boff, n);
      ASSERT_EQ(0, std::memcmp(qs.data() + boff, ref.q.data(), bytes))
          << type_name(t) << " offsets " << foff << "," << boff;
      std::vector<float> ys(static_cast<size_t>(n) + 4, -1.0f);
      dequantize_row(t, qs.data() + boff, ys.data() + foff, n);
      ASSERT_EQ(0, std::memcmp(ys.data() + foff, ref.y.data(), static_cast<size_t>(n) * sizeof(float)));
      EXPECT_EQ(ys[static_cast<size_t>(foff) - 1], -1.0f) << "wrote before the row";
      EXPECT_EQ(ys[static_cast<size_t>(n + foff)], -1.0f) << "wrote past the row";
    }
  }
}

TEST_P(RefFormat, QuantizingIsDeterministicAndRowLocal) {
  // Quantizing a long row must give the same bytes as quantizing its blocks one at a time:
  // nothing may leak between blocks (the K quantizers keep per-block scratch state).
  const GgmlType t = GetParam();
  const int64_t block = type_traits(t).block_elements;
  const int64_t n = block == 256 ? 1024 : 128;
  const auto x = weights_like(static_cast<size_t>(n), 5);
  const auto whole = round_trip(t, x);
  const size_t bb = type_traits(t).block_bytes;
  for (int64_t b = 0; b < n / block; ++b) {
    std::vector<std::byte> one(bb);
    quantize_row(t, x.data() + b * block, one.data(), block);
    ASSERT_EQ(0, std::memcmp(one.data(), whole.q.data() + b * bb, bb)) << type_name(t) << " block " << b;
  }
}

TEST_P(RefFormat, NonFiniteInputDoesNotCrash) {
  // Garbage in, some bytes out: the contract is only that the kernel stays defined (UBSan runs this).
  const GgmlType t = GetParam();
  const size_t n = type_traits(t).block_elements == 256 ? 256 : 32;
  auto x = weights_like(n, 3);
  x[3] = std::numeric_limits<float>::infinity();
  x[7] = std::numeric_limits<float>::quiet_NaN();
  x[9] = -std::numeric_limits<float>::infinity();
  const auto r = round_trip(t, x);
  EXPECT_EQ(r.y.size(), n);
}

INSTANTIATE_TEST_SUITE_P(All, RefFormat, ::testing::ValuesIn(kRefTypes),
                         [](const auto& info) { return std::string(type_name(info.param)); });

TEST(RefFormat, UnsupportedTypesWriteZerosInsteadOfGarbage) {
  constexpr GgmlType kNone = GgmlType::IQ2_XXS;
  std::vector<float> x(256, 1.0f), y(256, 7.0f);
  std::vector<std::byte> q(row_bytes(kNone, 256), std::byte{0x5a});
  quantize_row(kNone, x.data(), q.data(), 256);
  for (std::byte b : q) ASSERT_EQ(b, std::byte{0});
  dequantize_row(kNone, q.data(), y.data(), 256);
  for (float v : y) ASSERT_EQ(v, 0.0f);
  EXPECT_TRUE(std::isnan(dot_row(kNone, q.data(), x.data(), 256)));
}

}  // namespace
}  // namespace skainet::kernels::ref
