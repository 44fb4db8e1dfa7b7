#include <gtest/gtest.h>

#include "skainet/core/format.hpp"

using namespace skainet;

TEST(TypeTable, BlockGeometryMatchesGgml) {
  struct Case {
    GgmlType t;
    uint32_t elements, bytes;
  };
  for (const Case c : {Case{GgmlType::F32, 1, 4}, Case{GgmlType::F16, 1, 2}, Case{GgmlType::BF16, 1, 2},
                       Case{GgmlType::Q4_0, 32, 18}, Case{GgmlType::Q4_1, 32, 20}, Case{GgmlType::Q5_0, 32, 22},
                       Case{GgmlType::Q5_1, 32, 24}, Case{GgmlType::Q8_0, 32, 34}, Case{GgmlType::Q4_K, 256, 144},
                       Case{GgmlType::Q5_K, 256, 176}, Case{GgmlType::Q6_K, 256, 210}}) {
    const TypeTraits& t = type_traits(c.t);
    EXPECT_EQ(t.block_elements, c.elements) << t.name;
    EXPECT_EQ(t.block_bytes, c.bytes) << t.name;
  }
}

TEST(TypeTable, RetiredAndUnknownIdsAreRefused) {
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 1000u}) EXPECT_FALSE(find_type(id)) << id;
  ASSERT_TRUE(find_type(12));
  EXPECT_EQ(find_type(12)->type, GgmlType::Q4_K);
}

TEST(TypeTable, NamesRoundTrip) {
  EXPECT_EQ(parse_type_name("q4_k"), GgmlType::Q4_K);
  EXPECT_EQ(parse_type_name("F16"), GgmlType::F16);
  EXPECT_FALSE(parse_type_name("Q4_K_M")) << "a mix is not a single type";
  EXPECT_EQ(type_name(GgmlType::Q6_K), "Q6_K");
  EXPECT_EQ(format_of(GgmlType::Q8_0), (Format{DType::F32, Encoding::Q8_0}));
  EXPECT_EQ(format_of(GgmlType::F16), (Format{DType::F16, Encoding::Dense}));
}

TEST(TypeTable, RowBytesChecksBlocks) {
  EXPECT_EQ(row_bytes(GgmlType::Q4_0, 4096), 4096u / 32 * 18);
  EXPECT_EQ(row_bytes(GgmlType::F32, 172), 688u);
  EXPECT_THROW(row_bytes(GgmlType::Q4_0, 172), InvalidArgument);
  EXPECT_THROW(row_bytes(GgmlType::F64, uint64_t{1} << 62), OverflowError);
}
