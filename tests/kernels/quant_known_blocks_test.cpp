// Blocks worked out by hand from ggml's layouts: the exact bytes a quantizer must produce, and
// the exact floats a hand-assembled block must decode to.
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "skainet/core/blocks.hpp"
#include "skainet/compute/kernels.hpp"

namespace skainet::kernels::ref {
namespace {

template <size_t N>
std::vector<uint8_t> quantize(GgmlType t, const std::array<float, N>& x) {
  std::vector<uint8_t> q(row_bytes(t, N));
  quantize_row(t, x.data(), q.data(), N);
  return q;
}

std::vector<uint8_t> cat(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
std::vector<uint8_t> rep(uint8_t v, size_t n) { return std::vector<uint8_t>(n, v); }

TEST(KnownBlocks, Q8_0ScaleOneRoundsHalfAwayFromZero) {
  // |max| = 127 gives d = 1 exactly, so each quant is round(x) with ties away from zero (roundf).
  std::array<float, 32> x{};
  const float head[] = {127, -127, 3.4f, -2.6f, 0.5f, -0.5f, 2.5f, -2.5f, 1.49f, -0.0f};
  std::copy(std::begin(head), std::end(head), x.begin());
  const auto q = quantize(GgmlType::Q8_0, x);
  std::vector<uint8_t> expect = {0x00, 0x3c, 127, 0x81, 3, 0xfd, 1, 0xff, 3, 0xfd, 1, 0};
  expect.resize(34, 0);
  EXPECT_EQ(q, expect);
}

TEST(KnownBlocks, Q4_0ScaleOneRoundsHalfUp) {
  // x[0] = -8 is the first value of largest magnitude: d = -8 / -8 = 1, quant = trunc(x + 8.5).
  std::array<float, 32> x{};
  for (int j = 0; j < 16; ++j) x[j] = static_cast<float>(j - 8);
  for (int k = 0; k < 16; ++k) x[16 + k] = -4.0f + 0.5f * static_cast<float>(k);
  const uint8_t hi[16] = {4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12};
  std::vector<uint8_t> expect = {0x00, 0x3c};
  for (int j = 0; j < 16; ++j) expect.push_back(static_cast<uint8_t>(j | hi[j] << 4));
  EXPECT_EQ(quantize(GgmlType::Q4_0, x), expect);

  std::vector<float> y(32);
  dequantize_row(GgmlType::Q4_0, expect.data(), y.data(), 32);
  EXPECT_EQ(y[0], -8.0f);
  EXPECT_EQ(y[15], 7.0f);
  EXPECT_EQ(y[17], -3.0f);  // -3.5 rounded half up
}

TEST(KnownBlocks, Q4_0PositiveMaxGivesNegativeScale) {
  std::array<float, 32> x{};
  x[0] = 8.0f;  // d = 8 / -8 = -1; x = 8 -> trunc(-8 + 8.5) = 0 -> (0 - 8) * -1 = 8
  EXPECT_EQ(quantize(GgmlType::Q4_0, x), cat({{0x00, 0xbc, 0x80}, rep(0x88, 15)}));
}

TEST(KnownBlocks, ZeroBlocksOfTheSymmetricFormatsCarryMinusZero) {
  // ggml computes d = max / -8 with max = +0, which is -0: llama.cpp writes 0x8000, so do we.
  const std::array<float, 32> z{};
  EXPECT_EQ(quantize(GgmlType::Q4_0, z), cat({{0x00, 0x80}, rep(0x88, 16)}));
  EXPECT_EQ(quantize(GgmlType::Q5_0, z), cat({{0x00, 0x80}, rep(0xff, 4), rep(0x00, 16)}));
  EXPECT_EQ(quantize(GgmlType::Q4_1, z), rep(0, 20));
  EXPECT_EQ(quantize(GgmlType::Q5_1, z), rep(0, 24));
  EXPECT_EQ(quantize(GgmlType::Q8_0, z), rep(0, 34));
  const std::array<float, 256> zk{};
  EXPECT_EQ(quantize(GgmlType::Q4_K, zk), rep(0, 144));
  EXPECT_EQ(quantize(GgmlType::Q5_K, zk), rep(0, 176));
  EXPECT_EQ(quantize(GgmlType::Q6_K, zk), rep(0, 210));
}

TEST(KnownBlocks, Q4_1MinAndUnitScale) {
  std::array<float, 32> x{};
  for (int j = 0; j < 16; ++j) {
    x[j] = static_cast<float>(j);
    x[16 + j] = static_cast<float>(15 - j);
  }
  std::vector<uint8_t> expect = {0x00, 0x3c, 0x00, 0x00};  // d = 1, m = 0
  for (int j = 0; j < 16; ++j) expect.push_back(static_cast<uint8_t>(j | (15 - j) << 4));
  EXPECT_EQ(quantize(GgmlType::Q4_1, x), expect);
}

TEST(KnownBlocks, Q5_0FifthBitsGoToQh) {
  std::array<float, 32> x{};
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);      // d = -16 / -16 = 1, q = j
  std::vector<uint8_t> expect = {0x00, 0x3c, 0x00, 0x00, 0xff, 0xff};  // bits 16..31 of qh set
  for (int j = 0; j < 16; ++j) expect.push_back(static_cast<uint8_t>(j | j << 4));
  EXPECT_EQ(quantize(GgmlType::Q5_0, x), expect);
  std::vector<float> y(32);
  dequantize_row(GgmlType::Q5_0, expect.data(), y.data(), 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], x[j]);
}

TEST(KnownBlocks, Q5_1MinMinusOne) {
  std::array<float, 32> x{};
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 1);  // d = 31 / 31, m = -1, q = j
  std::vector<uint8_t> expect = {0x00, 0x3c, 0x00, 0xbc, 0x00, 0x00, 0xff, 0xff};
  for (int j = 0; j < 16; ++j) expect.push_back(static_cast<uint8_t>(j | j << 4));
  EXPECT_EQ(quantize(GgmlType::Q5_1, x), expect);
  std::vector<float> y(32);
  dequantize_row(GgmlType::Q5_1, expect.data(), y.data(), 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], x[j]);
}

// Sub-block scales sc = {1,2,3,4,17,33,49,63} and mins m = {0,1,2,3,18,34,50,62}, packed by hand:
// bytes 0-3 = sc[0..3] | (sc[4..7] >> 4) << 6, bytes 4-7 = m[0..3] | (m[4..7] >> 4) << 6,
// bytes 8-11 = (sc[4..7] & 15) | (m[4..7] & 15) << 4.
constexpr uint8_t kKScales[12] = {65, 130, 195, 196, 64, 129, 194, 195, 0x21, 0x21, 0x21, 0xef};
constexpr int kSc[8] = {1, 2, 3, 4, 17, 33, 49, 63};
constexpr int kMin[8] = {0, 1, 2, 3, 18, 34, 50, 62};

TEST(KnownBlocks, Q4_KDecodesHandPackedScales) {
  BlockQ4_K b{};
  b.d = 0x3c00;     // 1.0
  b.dmin = 0x3800;  // 0.5
  std::memcpy(b.scales, kKScales, 12);
  for (int k = 0; k < 4; ++k)
    for (int l = 0; l < 32; ++l) b.qs[32 * k + l] = static_cast<uint8_t>((l % 16) | (15 - l % 16) << 4);
  std::vector<float> y(256);
  dequantize_row(GgmlType::Q4_K, &b, y.data(), 256);
  for (int k = 0; k < 4; ++k)
    for (int l = 0; l < 32; ++l) {
      ASSERT_EQ(y[64 * k + l], static_cast<float>(kSc[2 * k] * (l % 16)) - 0.5f * kMin[2 * k]) << k << "," << l;
      ASSERT_EQ(y[64 * k + 32 + l], static_cast<float>(kSc[2 * k + 1] * (15 - l % 16)) - 0.5f * kMin[2 * k + 1]);
    }
}

TEST(KnownBlocks, Q5_KHighBitsInterleaveByPairs) {
  BlockQ5_K b{};
  b.d = 0x3c00;
  b.dmin = 0x0000;
  std::memcpy(b.scales, kKScales, 12);
  b.qh[3] = 0b00100001;  // element 3 (+16) and element 2*64 + 32 + 3 = 163 (+16)
  b.qs[3] = 0x21;        // element 3 low nibble 1, element 35 high nibble 2
  std::vector<float> y(256);
  dequantize_row(GgmlType::Q5_K, &b, y.data(), 256);
  for (int e = 0; e < 256; ++e) {
    int q = 0;
    if (e == 3) q = 17;
    if (e == 35) q = 2;
    if (e == 163) q = 16;
    ASSERT_EQ(y[e], static_cast<float>(kSc[e / 32] * q)) << "element " << e;
  }
}

TEST(KnownBlocks, Q6_KQuartersOfEachHalf) {
  BlockQ6_K b{};
  b.d = 0x3800;  // 0.5
  for (int k = 0; k < 16; ++k) b.scales[k] = static_cast<int8_t>(k - 8);
  b.ql[0] = 0x21;            // element 0 low 4 bits = 1, element 64 = 2
  b.qh[0] = 0b11100100;      // upper 2 bits: element 0 -> 0, 32 -> 1, 64 -> 2, 96 -> 3
  b.ql[64 + 32 + 5] = 0xf7;  // second half: element 128 + 32 + 5 = 165 -> 7, 128 + 96 + 5 = 229 -> 15
  std::vector<float> y(256);
  dequantize_row(GgmlType::Q6_K, &b, y.data(), 256);
  for (int e = 0; e < 256; ++e) {
    int q = 0;
    if (e == 0) q = 1;
    if (e == 32) q = 16;
    if (e == 64) q = 2 + 32;
    if (e == 96) q = 48;
    if (e == 165) q = 7;
    if (e == 229) q = 15;
    ASSERT_EQ(y[e], 0.5f * static_cast<float>((e / 16 - 8) * (q - 32))) << "element " << e;
  }
}

TEST(KnownBlocks, Q2_KScaleLowMinHighAndCrumbsByQuarter) {
  BlockQ2_K b{};
  b.d = 0x3C00;                // 1
  b.dmin = 0x3800;             // 0.5
  b.scales[0] = 0x21;          // sub-block 0: scale 1, min 2
  b.scales[2] = 0x03;          // sub-block 2 (elements 32..47): scale 3, min 0
  b.scales[9] = 0x45;          // sub-block 9 (elements 144..159): scale 5, min 4
  b.qs[0] = 0b11100100;        // elements 0 -> 0, 32 -> 1, 64 -> 2, 96 -> 3
  b.qs[32 + 16] = 0b00001000;  // second half, byte 16: element 128 + 32 + 16 = 176 -> 2
  b.qs[32 + 16] |= 0b11;       // and element 128 + 16 = 144 -> 3
  std::vector<float> y(256);
  dequantize_row(GgmlType::Q2_K, &b, y.data(), 256);
  EXPECT_EQ(y[0], -1.0f);  // 1 * 0 - 0.5 * 2
  EXPECT_EQ(y[1], -1.0f);
  EXPECT_EQ(y[32], 3.0f);    // 3 * 1
  EXPECT_EQ(y[64], 0.0f);    // sub-block 4: scale 0, min 0
  EXPECT_EQ(y[144], 13.0f);  // 5 * 3 - 0.5 * 4
  EXPECT_EQ(y[176], 0.0f);   // sub-block 11: all zero
}

TEST(KnownBlocks, Q3_KHighBitSetMeansNoOffset) {
  BlockQ3_K b{};
  b.d = 0x3C00;  // 1
  // Every scale code 33 (scale +1): low nibbles 1 in both halves of bytes 0..7, top bits 10 in 8..11.
  for (int i = 0; i < 8; ++i) b.scales[i] = 0x11;
  for (int i = 8; i < 12; ++i) b.scales[i] = 0xAA;
  b.scales[1] = 0x1F;    // sub-block 1 (elements 16..31): low nibble 15, code 47, scale 15
  b.hmask[0] |= 1;       // element 0: high bit set
  b.qs[0] = 0b11;        // element 0: low bits 3
  b.hmask[5] |= 1 << 3;  // element 3 * 32 + 5 = 101: high bit set, low bits 0
  b.qs[16] = 0b01;       // element 16: low bits 1, no high bit
  std::vector<float> y(256);
  dequantize_row(GgmlType::Q3_K, &b, y.data(), 256);
  EXPECT_EQ(y[0], 3.0f);
  EXPECT_EQ(y[1], -4.0f);
  EXPECT_EQ(y[16], 15.0f * (1 - 4));
  EXPECT_EQ(y[101], 0.0f);
  EXPECT_EQ(y[255], -4.0f);
}

TEST(KnownBlocks, IQ4LevelsAndXsScales) {
  BlockIQ4_NL nl{};
  nl.d = 0x3800;    // 0.5
  nl.qs[0] = 0xF0;  // element 0 -> level 0 (-127), element 16 -> level 15 (113)
  std::vector<float> y(256);
  dequantize_row(GgmlType::IQ4_NL, &nl, y.data(), 32);
  EXPECT_EQ(y[0], -63.5f);
  EXPECT_EQ(y[16], 56.5f);
  EXPECT_EQ(y[1], 0.5f * -127);

  BlockIQ4_XS xs{};
  xs.d = 0x3C00;          // 1
  xs.scales_l[0] = 0x21;  // sub-block 0 low nibble 1, sub-block 1 low nibble 2
  xs.scales_h = 0b10;     // sub-block 0 top bits 2: code 33, scale 1; sub-block 1 code 2, scale -30
  xs.qs[0] = 0x08;        // element 0 -> level 8 (1)
  xs.qs[16] = 0x09;       // element 32 -> level 9 (13)
  dequantize_row(GgmlType::IQ4_XS, &xs, y.data(), 256);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[32], -390.0f);
  EXPECT_EQ(y[64], 32.0f * 127);  // sub-block 2: code 0, scale -32, level 0 (-127)
}

// MXFP4: the E8M0 exponent halved (the levels are E2M1 doubled), its subnormal ends, and the levels'
// order (the sign in the index's top bit; 8 is minus zero), as ggml's kvalues_mxfp4.
TEST(KnownBlocks, Mxfp4ExponentAndLevels) {
  BlockMXFP4 b{};
  b.e = 127;       // 2^0, halved: 0.5
  b.qs[0] = 0xF7;  // element 0 -> level 7 (12), element 16 -> level 15 (-12)
  b.qs[1] = 0x81;  // element 1 -> level 1 (1), element 17 -> level 8 (minus zero)
  b.qs[2] = 0x5D;  // element 2 -> level 13 (-6), element 18 -> level 5 (6)
  std::vector<float> y(32);
  dequantize_row(GgmlType::MXFP4, &b, y.data(), 32);
  EXPECT_EQ(y[0], 6.0f);
  EXPECT_EQ(y[16], -6.0f);
  EXPECT_EQ(y[1], 0.5f);
  EXPECT_EQ(y[17], 0.0f);
  EXPECT_EQ(y[2], -3.0f);
  EXPECT_EQ(y[18], 3.0f);
  EXPECT_EQ(y[3], 0.0f);
  b.e = 0;  // 2^-128: a subnormal float
  dequantize_row(GgmlType::MXFP4, &b, y.data(), 32);
  EXPECT_EQ(y[1], std::ldexp(1.0f, -128));
  b.e = 1;
  dequantize_row(GgmlType::MXFP4, &b, y.data(), 32);
  EXPECT_EQ(y[1], std::ldexp(1.0f, -127));
  b.e = 200;
  dequantize_row(GgmlType::MXFP4, &b, y.data(), 32);
  EXPECT_EQ(y[0], 12.0f * std::ldexp(1.0f, 72));
  // Quantizing: amax 6 -> exponent floor(log2 6) - 2 + 127 = 127, and 6 is level 7 exactly.
  std::vector<float> x(32, 0.0f);
  x[0] = 6.0f;
  x[1] = -0.7f;  // index 9: -1 * 0.5 is 0.2 away, -2 * 0.5 is 0.3
  x[20] = 2.9f;  // index 5: 6 * 0.5
  BlockMXFP4 q{};
  quantize_row(GgmlType::MXFP4, x.data(), &q, 32);
  EXPECT_EQ(q.e, 127);
  EXPECT_EQ(q.qs[0] & 0xf, 7);
  EXPECT_EQ(q.qs[1] & 0xf, 9);
  EXPECT_EQ(q.qs[4] >> 4, 5);
  EXPECT_EQ(q.qs[2], 0);
}

}  // namespace
}  // namespace skainet::kernels::ref
