// The request-parsing fuzz target (tests/fuzz/serve_request_fuzzer.cpp) replayed in the default suite
// under any compiler: its seed bodies, then seeded mutations of them (tests/fuzz/fuzz_replay.hpp).
#include <gtest/gtest.h>

#include "fuzz_replay.hpp"

namespace skainet::fuzz {
int serve_request_one_input(const uint8_t* data, size_t size);
std::vector<Bytes> serve_request_seeds();
}  // namespace skainet::fuzz

namespace skainet::fuzz {
namespace {

TEST(ServeFuzzReplay, MutatedRequestsParseOrAreRefused) {
  const std::vector<Bytes> seeds = serve_request_seeds();
  ASSERT_GE(seeds.size(), 1u);
  const double s = replay(serve_request_one_input, seeds, 50000, 20261203);
  RecordProperty("seconds", std::to_string(s));
}

}  // namespace
}  // namespace skainet::fuzz
