#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "skainet/compute/kernels.hpp"

namespace skainet::kernels::ref {
namespace {

float f(uint32_t bits) { return std::bit_cast<float>(bits); }
bool is_f16_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

TEST(Fp16, ExactValues) {
  EXPECT_EQ(fp32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_fp16(0.5f), 0x3800);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);  // largest finite half
  EXPECT_EQ(fp32_to_fp16(0x1p-14f), 0x0400);  // smallest normal half
}

TEST(Fp16, OverflowAndSpecials) {
  EXPECT_EQ(fp32_to_fp16(65519.99f), 0x7bff);  // below the midpoint to 65536
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);   // the midpoint ties to even: infinity
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-1e10f), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  // NaNs stay NaN (even with a payload only in bits a plain truncation would drop), sign kept.
  EXPECT_TRUE(is_f16_nan(fp32_to_fp16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(fp32_to_fp16(f(0x7f800001u)), 0x7e00);
  EXPECT_EQ(fp32_to_fp16(f(0xff800001u)), 0xfe00);
  EXPECT_EQ(fp32_to_fp16(f(0x7fc02000u)), 0x7e01);
}

TEST(Fp16, SubnormalsAndTies) {
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);  // half of it: tie to even (0)
  EXPECT_EQ(fp32_to_fp16(-0x1p-25f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(0x1.8p-25f), 0x0001);          // 0.75 ulp rounds up
  EXPECT_EQ(fp32_to_fp16(0x1.8p-24f), 0x0002);          // 1.5 ulp: tie to even (2)
  EXPECT_EQ(fp32_to_fp16(0x1.4p-23f), 0x0002);          // 2.5 ulp: tie to even (2)
  EXPECT_EQ(fp32_to_fp16(1023.0f * 0x1p-24f), 0x03ff);  // largest subnormal
  EXPECT_EQ(fp32_to_fp16(1023.5f * 0x1p-24f), 0x0400);  // rounds up into the normals
  EXPECT_EQ(fp32_to_fp16(0x1p-30f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(f(0x00000001u)), 0x0000);     // float subnormal
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);    // tie between 0x3c00 and 0x3c01: even
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1.8p-10f), 0x3c02);  // tie between 0x3c01 and 0x3c02: even
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  EXPECT_EQ(fp32_to_fp16(2047.0f * 0x1p-11f * 2.0f), 0x3fff);  // 1.99902...: exact
}

TEST(Fp16, ToFp32IsExactForEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto hh = static_cast<uint16_t>(h);
    const float v = fp16_to_fp32(hh);
    const uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 31) {
      if (m == 0) {
        EXPECT_EQ(v, sign * std::numeric_limits<float>::infinity());
      } else {
        EXPECT_TRUE(std::isnan(v)) << h;
      }
      continue;
    }
    const double expect = e == 0 ? sign * std::ldexp(m, -24) : sign * std::ldexp(1024 + m, static_cast<int>(e) - 25);
    ASSERT_EQ(static_cast<double>(v), expect) << "half " << h;
    ASSERT_EQ(std::signbit(v), (h & 0x8000) != 0);
    ASSERT_EQ(fp32_to_fp16(v), hh) << "round trip of half " << h;  // every half survives
  }
}

// Against an implementation nobody here wrote: the compiler's own float -> _Float16 conversion
// (libgcc's soft-fp, round to nearest even), over random float bit patterns and a dense sweep of
// the subnormal and overflow ranges.
#if defined(__FLT16_MAX__)
TEST(Fp16, MatchesCompilerConversion) {
  auto check = [](uint32_t bits) {
    const float v = f(bits);
    if (std::isnan(v)) return;
    const _Float16 h = static_cast<_Float16>(v);
    ASSERT_EQ(fp32_to_fp16(v), std::bit_cast<uint16_t>(h)) << std::hex << "float bits 0x" << bits;
  };
  std::mt19937 rng(7);
  for (int i = 0; i < 2'000'000; ++i) check(rng());
  for (uint32_t b = 0x32800000u; b < 0x38900000u; b += 0x1f3u) check(b);  // tiny values and subnormals
  for (uint32_t b = 0x477f0000u; b < 0x47810000u; b += 0x11u) check(b);   // around 65504 / 65520
}
#endif

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(-1.0f), 0xbf80);
  EXPECT_EQ(fp32_to_bf16(f(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(fp32_to_bf16(f(0x3f818000u)), 0x3f82);  // tie, even above
  EXPECT_EQ(fp32_to_bf16(f(0x3f808001u)), 0x3f81);  // just above the tie
  EXPECT_EQ(fp32_to_bf16(f(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(f(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to infinity
  EXPECT_EQ(fp32_to_bf16(f(0x00000001u)), 0x0000);  // smallest subnormal rounds to zero
  EXPECT_EQ(fp32_to_bf16(f(0x00018000u)), 0x0002);  // subnormal tie to even
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(fp32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
}

TEST(Bf16, KeepsNaN) {
  // A NaN whose payload sits only in the low 16 bits would truncate to infinity: it must not.
  EXPECT_EQ(fp32_to_bf16(f(0x7f800001u)), 0x7fc0);
  EXPECT_EQ(fp32_to_bf16(f(0xff800001u)), 0xffc0);
  EXPECT_EQ(fp32_to_bf16(f(0x7fffffffu)), 0x7fff);  // all-ones stays; rounding must not carry
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Bf16, ToFp32IsTheHighHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float v = bf16_to_fp32(static_cast<uint16_t>(h));
    ASSERT_EQ(std::bit_cast<uint32_t>(v), h << 16);
    if (!std::isnan(v)) {
      ASSERT_EQ(fp32_to_bf16(v), h);
    }
  }
}

}  // namespace
}  // namespace skainet::kernels::ref
