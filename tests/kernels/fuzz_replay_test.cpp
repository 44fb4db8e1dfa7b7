// The dequantization fuzz target (tests/fuzz/dequantize_fuzzer.cpp: kernels::ref::dequantize_row and
// dot_row on arbitrary block bytes of every type with a reference kernel) replayed in the default
// suite under any compiler on seeded mutations (tests/fuzz/fuzz_replay.hpp).
#include <gtest/gtest.h>

#include "fuzz_replay.hpp"

namespace skainet::fuzz {
int dequantize_one_input(const uint8_t* data, size_t size);
std::vector<Bytes> dequantize_seeds();
}  // namespace skainet::fuzz

namespace skainet::fuzz {
namespace {

TEST(KernelsFuzzReplay, ArbitraryBlockBytesDequantizeWithoutFault) {
  const double s = replay(dequantize_one_input, dequantize_seeds(), 100000, 20261209);
  RecordProperty("seconds", std::to_string(s));
}

}  // namespace
}  // namespace skainet::fuzz
