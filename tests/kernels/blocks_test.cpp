#include <gtest/gtest.h>

#include "skainet/core/blocks.hpp"
#include "skainet/compute/kernels.hpp"

namespace skainet {
namespace {

template <class B>
void expect_matches_table() {
  const TypeTraits& t = type_traits(B::kType);
  EXPECT_EQ(sizeof(B), t.block_bytes) << t.name;
  EXPECT_EQ(static_cast<uint32_t>(B::kElements), t.block_elements) << t.name;
}

TEST(Blocks, SizesMatchTheTypeTable) {
  expect_matches_table<BlockQ4_0>();
  expect_matches_table<BlockQ4_1>();
  expect_matches_table<BlockQ5_0>();
  expect_matches_table<BlockQ5_1>();
  expect_matches_table<BlockQ8_0>();
  expect_matches_table<BlockQ8_1>();
  expect_matches_table<BlockQ4_K>();
  expect_matches_table<BlockQ5_K>();
  expect_matches_table<BlockQ6_K>();
  expect_matches_table<BlockQ8_K>();
  expect_matches_table<BlockQ2_K>();
  expect_matches_table<BlockQ3_K>();
  expect_matches_table<BlockIQ4_NL>();
  expect_matches_table<BlockIQ4_XS>();
  expect_matches_table<BlockMXFP4>();
}

TEST(Blocks, FieldOffsetsAreGgmls) {
  EXPECT_EQ(offsetof(BlockQ5_0, qh), 2u);
  EXPECT_EQ(offsetof(BlockQ5_0, qs), 6u);
  EXPECT_EQ(offsetof(BlockQ5_1, qh), 4u);
  EXPECT_EQ(offsetof(BlockQ5_1, qs), 8u);
  EXPECT_EQ(offsetof(BlockQ4_K, scales), 4u);
  EXPECT_EQ(offsetof(BlockQ4_K, qs), 16u);
  EXPECT_EQ(offsetof(BlockQ5_K, qh), 16u);
  EXPECT_EQ(offsetof(BlockQ5_K, qs), 48u);
  EXPECT_EQ(offsetof(BlockQ6_K, qh), 128u);
  EXPECT_EQ(offsetof(BlockQ6_K, scales), 192u);
  EXPECT_EQ(offsetof(BlockQ6_K, d), 208u);
  EXPECT_EQ(offsetof(BlockQ8_K, qs), 4u);
  EXPECT_EQ(offsetof(BlockQ8_K, bsums), 260u);
  EXPECT_EQ(offsetof(BlockQ2_K, qs), 16u);
  EXPECT_EQ(offsetof(BlockQ2_K, d), 80u);
  EXPECT_EQ(offsetof(BlockQ2_K, dmin), 82u);
  EXPECT_EQ(offsetof(BlockQ3_K, qs), 32u);
  EXPECT_EQ(offsetof(BlockQ3_K, scales), 96u);
  EXPECT_EQ(offsetof(BlockQ3_K, d), 108u);
  EXPECT_EQ(offsetof(BlockIQ4_NL, qs), 2u);
  EXPECT_EQ(offsetof(BlockIQ4_XS, scales_h), 2u);
  EXPECT_EQ(offsetof(BlockIQ4_XS, scales_l), 4u);
  EXPECT_EQ(offsetof(BlockIQ4_XS, qs), 8u);
  EXPECT_EQ(offsetof(BlockMXFP4, qs), 1u);
}

TEST(Blocks, ReferenceFlagMatchesWhatWeImplement) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                     GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                     GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4})
    EXPECT_TRUE(kernels::ref::has_reference(t)) << type_name(t);
  for (GgmlType t : {GgmlType::Q8_1, GgmlType::Q8_K, GgmlType::IQ2_XXS, GgmlType::TQ1_0, GgmlType::I8, GgmlType::F64})
    EXPECT_FALSE(kernels::ref::has_reference(t)) << type_name(t);
}

}  // namespace
}  // namespace skainet
