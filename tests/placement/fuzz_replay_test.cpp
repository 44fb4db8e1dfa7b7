// The placement parsers' fuzz target (tests/fuzz/placement_parse_fuzzer.cpp: WeightForm::parse,
// TensorOverride::parse, parse_bytes) replayed in the default suite under any compiler on seeded
// mutations (tests/fuzz/fuzz_replay.hpp), plus the sizes the fuzzing found parsed wrong.
#include <gtest/gtest.h>

#include "fuzz_replay.hpp"
#include "skainet/model/placement.hpp"

namespace skainet::fuzz {
int placement_parse_one_input(const uint8_t* data, size_t size);
std::vector<Bytes> placement_parse_seeds();
}  // namespace skainet::fuzz

namespace skainet::fuzz {
namespace {

TEST(PlacementFuzzReplay, MutatedFormsOverridesAndSizesParseOrAreRefused) {
  const double s = replay(placement_parse_one_input, placement_parse_seeds(), 20000, 20261208);
  RecordProperty("seconds", std::to_string(s));
}

// Found by this target: sizes from 2^63 up to the 1.8e19 limit came back wrapped (llround returns a
// long long), e.g. "1e19" gave 9223372036854775808.
TEST(PlacementFuzzReplay, SizesAboveTwoToTheSixtyThreeAreNotWrapped) {
  EXPECT_EQ(placement::parse_bytes("1e19"), 10000000000000000000ull);
  EXPECT_EQ(placement::parse_bytes("9223372036854775808"), 9223372036854775808ull);
  EXPECT_EQ(placement::parse_bytes("8388608T"), 9223372036854775808ull);
  EXPECT_THROW(placement::parse_bytes("16777216T"), InvalidArgument);  // 2^64: out of range
}

}  // namespace
}  // namespace skainet::fuzz
