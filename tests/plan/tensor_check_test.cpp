// Issue 10, defect 4: a header whose hyper-parameters claim more than its tensors hold is refused by
// the plan, from the header alone, before anything sized by block_count is built.
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "skainet/model/plan.hpp"
#include "gguf_builder.hpp"
#include "temp_dir.hpp"

using namespace skainet;
using namespace skainet::plan;
using namespace skainet::arch;

namespace {

const std::string kStories = std::string(SKAINET_SHARED_MODELS) + "/stories260K.gguf";

// stories260K with the uint32 value of `key` replaced.
std::string patched_stories(const std::string& key, uint32_t value) {
  std::ifstream in(kStories, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  std::string bytes = s.str();
  const size_t at = bytes.find(key);
  EXPECT_NE(at, std::string::npos) << key;
  std::memcpy(bytes.data() + at + key.size() + 4, &value, 4);  // key, uint32 type id, value
  return bytes;
}

class TensorCheckTest : public ::testing::Test {
 protected:
  gguf::Header header_with(const std::string& key, uint32_t value) {
    const std::string bytes = patched_stories(key, value);
    test::write_file(path_, std::vector<uint8_t>(bytes.begin(), bytes.end()));
    return gguf::read_header(path_);
  }
  test::TempDir dir_{"tensor-check"};
  std::filesystem::path path_ = dir_ / "patched.gguf";
};

}  // namespace

TEST_F(TensorCheckTest, HugeBlockCountIsRefusedFromTheHeaderWithABoundedMessage) {
  const gguf::Header h = header_with("llama.block_count", 20000);
  const arch::ModelShape shape = arch::ModelShape::from_header(h);
  ASSERT_EQ(shape.layers, 20000u);
  const auto start = std::chrono::steady_clock::now();
  const TensorCheck c = check_tensors(h, shape);
  EXPECT_EQ(c.required, 2u + 20000u * 9u);
  EXPECT_EQ(c.present, 2u + 5u * 9u);
  EXPECT_EQ(c.missing, c.required - c.present);
  EXPECT_EQ(c.wrong_shape, 0u);
  ASSERT_EQ(c.examples.size(), 10u);
  EXPECT_EQ(c.examples[0].kind, TensorProblemKind::Missing);
  EXPECT_EQ(c.examples[0].name, "blk.5.attn_q.weight");
  EXPECT_EQ(c.examples[0].expected, (std::vector<uint64_t>{64, 64}));

  try {
    make_plan(h, placement::MemoryProfile::preset("default"), placement::Platform::detect(), {}, {});
    FAIL() << "planned a model whose tensors are missing";
  } catch (const TensorMismatchError& e) {
    EXPECT_LT(e.message().size(), 2000u) << e.message();
    EXPECT_NE(e.message().find("blk.5.attn_q.weight"), std::string::npos) << e.message();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));

  // Even 4 billion layers cost one pass over the header.
  const gguf::Header huge = header_with("llama.block_count", 4000000000u);
  EXPECT_EQ(check_tensors(huge, arch::ModelShape::from_header(huge)).examples.size(), 10u);
}

TEST_F(TensorCheckTest, WrongShapesAreNamedWithExpectedAndFound) {
  const gguf::Header h = header_with("llama.feed_forward_length", 100);
  const TensorCheck c = check_tensors(h, arch::ModelShape::from_header(h));
  EXPECT_EQ(c.missing, 0u);
  EXPECT_EQ(c.wrong_shape, 15u);  // ffn_gate, ffn_up, ffn_down in 5 layers
  ASSERT_FALSE(c.examples.empty());
  EXPECT_EQ(c.examples[0].kind, TensorProblemKind::WrongShape);
  EXPECT_EQ(c.examples[0].found, (std::vector<uint64_t>{64, 172}));
  EXPECT_EQ(c.examples[0].expected, (std::vector<uint64_t>{64, 100}));
}

TEST_F(TensorCheckTest, TheRealModelPasses) {
  const gguf::Header h = gguf::read_header(kStories);
  EXPECT_TRUE(check_tensors(h, arch::ModelShape::from_header(h)).ok());
}
