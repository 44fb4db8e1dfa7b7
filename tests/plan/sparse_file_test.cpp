// The plan reads no payload: a 19 GiB model whose data region was never written (a sparse file) is
// planned from its header alone, quickly, touching only header bytes; the same file cut short inside
// its data region is reported as truncated at plan time, from sizes alone.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include <gtest/gtest.h>

#include "gguf_builder.hpp"
#include "skainet/model/plan.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using namespace skainet;
using skainet::test::GgufBuilder;

namespace {

constexpr uint64_t kDim = 8192, kFfn = 28672, kVocab = 128256, kLayers = 40;

// A llama-70B-like header (Q4_0 matmuls), its tensors laid out back to back after the header.
GgufBuilder big_model_header(uint64_t* data_bytes) {
  struct T {
    std::string name;
    std::vector<uint64_t> shape;
    uint32_t type;
  };
  std::vector<T> tensors = {{"token_embd.weight", {kDim, kVocab}, test::kQ4_0},
                            {"output_norm.weight", {kDim}, test::kF32},
                            {"output.weight", {kDim, kVocab}, test::kQ4_0}};
  for (uint64_t l = 0; l < kLayers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    tensors.push_back({p + "attn_norm.weight", {kDim}, test::kF32});
    tensors.push_back({p + "attn_q.weight", {kDim, kDim}, test::kQ4_0});
    tensors.push_back({p + "attn_k.weight", {kDim, 1024}, test::kQ4_0});
    tensors.push_back({p + "attn_v.weight", {kDim, 1024}, test::kQ4_0});
    tensors.push_back({p + "attn_output.weight", {kDim, kDim}, test::kQ4_0});
    tensors.push_back({p + "ffn_norm.weight", {kDim}, test::kF32});
    tensors.push_back({p + "ffn_gate.weight", {kDim, kFfn}, test::kQ4_0});
    tensors.push_back({p + "ffn_up.weight", {kDim, kFfn}, test::kQ4_0});
    tensors.push_back({p + "ffn_down.weight", {kFfn, kDim}, test::kQ4_0});
  }
  GgufBuilder b;
  b.header(3, tensors.size(), 9)
      .kv_string("general.architecture", "llama")
      .kv_u32("llama.block_count", kLayers)
      .kv_u32("llama.embedding_length", kDim)
      .kv_u32("llama.feed_forward_length", kFfn)
      .kv_u32("llama.attention.head_count", 64)
      .kv_u32("llama.attention.head_count_kv", 8)
      .kv_u32("llama.context_length", 8192)
      .kv_u32("llama.vocab_size", kVocab)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t elements = 1;
    for (uint64_t d : t.shape) elements *= d;
    const uint64_t bytes = t.type == test::kQ4_0 ? elements / 32 * 18 : elements * 4;
    b.str(t.name).u32(static_cast<uint32_t>(t.shape.size()));
    for (uint64_t d : t.shape) b.u64(d);
    b.u32(t.type).u64(offset);
    offset += (bytes + 31) / 32 * 32;
  }
  b.pad_to(32);
  *data_bytes = offset;
  return b;
}

class SparseModel : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_ / "sparse.gguf";
    const GgufBuilder b = big_model_header(&data_bytes_);
    header_bytes_ = b.size();
    test::write_file(path_, b.bytes());
  }
  void truncate_to(uint64_t size) {
    const int fd = ::open(path_.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);
    ::close(fd);
  }
  test::TempDir dir_{"plan"};
  fs::path path_;
  uint64_t data_bytes_ = 0, header_bytes_ = 0;
};

}  // namespace

TEST_F(SparseModel, PlannedFromTheHeaderAlone) {
  truncate_to(header_bytes_ + data_bytes_);
  ASSERT_GT(data_bytes_, uint64_t{16} << 30) << "tens of GB of never-written data";
  const auto start = std::chrono::steady_clock::now();
  base::FileReader file(path_);
  const gguf::Header h = gguf::read_header(file);
  const plan::MemoryPlan p =
      plan::make_plan(h, placement::MemoryProfile::preset("default"), placement::Platform::detect(), {}, {});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 0.5);
  EXPECT_EQ(file.bytes_read(), p.header_bytes_read);
  // The reader buffers 8 KiB at a time: it may read that far past the header, never further.
  EXPECT_LE(file.bytes_read(), header_bytes_ + 8192);
  EXPECT_EQ(p.tensors.size(), 3 + 9 * kLayers);
  // Mapped, or repacked to a kernel-feed order in the same number of bytes.
  EXPECT_EQ(p.totals.mapped + p.totals.pages + p.totals.heap, p.totals.file);
  ASSERT_TRUE(p.kv);
  EXPECT_EQ(p.kv->bytes, 2 * kLayers * 4096 * 1024 * 2) << "F16, 8 KV heads x 128, ctx 4096";
}

TEST_F(SparseModel, CutInsideItsDataRegionIsTruncatedAtPlanTime) {
  truncate_to(header_bytes_ + data_bytes_ / 2);
  try {
    gguf::read_header(path_);
    FAIL() << "a file cut in half was planned";
  } catch (const gguf::FormatError& e) {
    EXPECT_EQ(e.kind(), gguf::FormatErrorKind::Truncated) << e.message();
    EXPECT_NE(e.message().find(path_.string()), std::string::npos);
  }
}
