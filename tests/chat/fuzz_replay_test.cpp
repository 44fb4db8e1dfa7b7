// The chat-template fuzz target (tests/fuzz/chat_template_fuzzer.cpp) replayed in the default suite
// under any compiler: the 70 real templates, then seeded mutations of them (tests/fuzz/fuzz_replay.hpp).
#include <gtest/gtest.h>

#include "fuzz_replay.hpp"

namespace skainet::fuzz {
int chat_template_one_input(const uint8_t* data, size_t size);
std::vector<Bytes> chat_template_seeds();
}  // namespace skainet::fuzz

namespace skainet::fuzz {
namespace {

TEST(ChatFuzzReplay, MutatedTemplatesRenderOrAreRefused) {
  const std::vector<Bytes> seeds = chat_template_seeds();
  ASSERT_GE(seeds.size(), 1u);
  const double s = replay(chat_template_one_input, seeds, 20000, 20261203);
  RecordProperty("seconds", std::to_string(s));
}

}  // namespace
}  // namespace skainet::fuzz
