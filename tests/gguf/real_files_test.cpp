// The reader against real files (stories260K, llama.cpp's vocab-only files) and a sparse 20 GiB file.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include <gtest/gtest.h>

#include "gguf_builder.hpp"
#include "skainet/io/gguf.hpp"
#include "temp_dir.hpp"

namespace skainet::gguf {
namespace {

const std::filesystem::path kStories = SKAINET_SHARED_MODELS "/stories260K.gguf";

TEST(GgufRealFiles, Stories260KMetadata) {
  const Header h = read_header(kStories);
  EXPECT_EQ(h.version, 3u);
  EXPECT_EQ(h.file_size, 1185376u);
  EXPECT_EQ(h.alignment, 32u);
  EXPECT_EQ(h.data_offset, 14176u);
  EXPECT_EQ(h.metadata.size(), 19u);
  ASSERT_EQ(h.tensors.size(), 48u);
  EXPECT_EQ(h.get_string("general.architecture"), "llama");
  EXPECT_EQ(h.get_u32("llama.embedding_length"), 64u);
  EXPECT_EQ(h.get_u32("llama.block_count"), 5u);
  EXPECT_EQ(h.get_u32("llama.attention.head_count"), 8u);
  EXPECT_EQ(h.get_u32("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(h.get_u32("llama.feed_forward_length"), 172u);
  EXPECT_EQ(h.get_u32("tokenizer.ggml.padding_token_id"), 4294967295u);
  EXPECT_FLOAT_EQ(h.get_f32("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_EQ(h.metadata.front().key, "tokenizer.ggml.tokens");  // file order is kept

  const Value* tokens = h.find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_TRUE(tokens->is_array());
  EXPECT_EQ(tokens->element_type, ValueType::String);
  ASSERT_EQ(tokens->items.size(), 512u);
  EXPECT_EQ(std::get<std::string>(tokens->items[0]), "<unk>");
  EXPECT_EQ(std::get<std::string>(tokens->items[1]), "<s>");
  EXPECT_EQ(std::get<std::string>(tokens->items[4]), "<0x01>");
  const Value* scores = h.find("tokenizer.ggml.scores");
  ASSERT_NE(scores, nullptr);
  EXPECT_EQ(scores->element_type, ValueType::Float32);
  EXPECT_EQ(std::get<float>(scores->items[511]), -252.0f);
  const Value* types = h.find("tokenizer.ggml.token_type");
  ASSERT_NE(types, nullptr);
  EXPECT_EQ(types->element_type, ValueType::Int32);
  EXPECT_EQ(std::get<int32_t>(types->items[0]), 2);
  EXPECT_EQ(std::get<int32_t>(types->items[3]), 6);
}

TEST(GgufRealFiles, Stories260KTensors) {
  const Header h = read_header(kStories);
  const TensorInfo* emb = h.find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->shape, (std::vector<uint64_t>{64, 512}));
  EXPECT_EQ(emb->type, GgmlType::F32);
  EXPECT_EQ(emb->offset, 0u);
  EXPECT_EQ(emb->file_offset, 14176u);
  EXPECT_EQ(emb->bytes, 131072u);
  EXPECT_EQ(emb->elements(), 32768u);

  const TensorInfo* down = h.find_tensor("blk.4.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->shape, (std::vector<uint64_t>{172, 64}));
  EXPECT_EQ(down->offset, 1082880u);
  EXPECT_EQ(down->file_offset, 1097056u);
  EXPECT_EQ(down->bytes, 44032u);

  const TensorInfo& last = h.tensors.back();
  EXPECT_EQ(last.name, "blk.4.ffn_norm.weight");
  EXPECT_EQ(last.file_offset, 1185120u);
  EXPECT_EQ(last.file_offset + last.bytes, h.file_size);
  EXPECT_EQ(h.find_tensor("no.such.tensor"), nullptr);
}

TEST(GgufRealFiles, Stories260KReadsOnlyTheHeader) {
  base::FileReader file(kStories);
  const Header h = read_header(file);
  EXPECT_EQ(h.header_bytes_read, file.bytes_read());
  EXPECT_GE(h.header_bytes_read, h.data_offset - h.alignment);  // it did read the whole header
  EXPECT_LT(h.header_bytes_read, h.data_offset + 8192);         // and at most one chunk past it
  EXPECT_LT(h.header_bytes_read, h.file_size / 10);
}

TEST(GgufRealFiles, Stories260KCutInItsDataIsTruncated) {
  test::TempDir dir("gguf");
  std::vector<uint8_t> bytes(600000);
  base::FileReader(kStories).read_at(0, bytes.data(), bytes.size());
  test::write_file(dir / "cut.gguf", bytes);
  try {
    read_header(dir / "cut.gguf");
    FAIL() << "expected Truncated";
  } catch (const FormatError& e) {
    EXPECT_EQ(e.kind(), FormatErrorKind::Truncated) << e.what();
    EXPECT_NE(std::string(e.what()).find((dir / "cut.gguf").string()), std::string::npos) << e.what();
  }
}

TEST(GgufRealFiles, VocabOnlyFiles) {
  const std::filesystem::path dir = SKAINET_SHARED_MODELS "/vocab";
  ASSERT_TRUE(std::filesystem::is_directory(dir));
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    SCOPED_TRACE(entry.path().string());
    const Header h = read_header(entry.path());
    ++files;
    EXPECT_EQ(h.version, 3u);
    EXPECT_TRUE(h.tensors.empty());
    EXPECT_FALSE(h.get_string("general.architecture").empty());
    const Value* tokens = h.find("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->element_type, ValueType::String);
    EXPECT_GT(tokens->items.size(), 30000u);
    EXPECT_LE(h.header_bytes_read, h.file_size);
  }
  // Every vocabulary file found is checked; the folder grows, so no count is pinned, only that the
  // ones named below (and at least one) are there.
  EXPECT_GE(files, 1);
  const Header gpt2 = read_header(dir / "ggml-vocab-gpt-2.gguf");
  EXPECT_EQ(gpt2.get_string("general.architecture"), "gpt2");
  EXPECT_EQ(gpt2.find("tokenizer.ggml.tokens")->items.size(), 50257u);
  EXPECT_EQ(gpt2.data_offset, 1766816u);
}

// A 20 GiB file whose data section is a hole: parsing must not depend on the file's size.
TEST(GgufRealFiles, SparseTwentyGibFileReadsOnlyHeaderBytes) {
  test::TempDir dir("gguf");
  const auto path = dir / "sparse.gguf";
  constexpr uint64_t kTensorBytes = 5ull << 32;  // 5 Gi F32 elements = 20 GiB
  test::GgufBuilder b;
  b.header(3, 2, 1).kv_string("general.architecture", "llama");
  b.tensor_info("small", {32}, 0, 0);
  b.tensor_info("huge", {1ull << 30, 5}, 0, 128);
  b.pad_to(32);
  const uint64_t data_offset = b.size();
  test::write_file(path, b.bytes());
  {
    const int fd = ::open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(data_offset + 128 + kTensorBytes)), 0);
    ::close(fd);
  }
  const auto start = std::chrono::steady_clock::now();
  base::FileReader file(path);
  const Header h = read_header(file);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, std::chrono::seconds(2));
  EXPECT_EQ(h.data_offset, data_offset);
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[1].bytes, kTensorBytes);
  EXPECT_EQ(h.tensors[1].file_offset, data_offset + 128);
  EXPECT_GT(h.tensors[1].file_offset + h.tensors[1].bytes, 1ull << 32);  // offsets past 4 GiB
  EXPECT_EQ(file.bytes_read(), h.header_bytes_read);
  EXPECT_LE(h.header_bytes_read, data_offset + 8192);

  // Cut off one byte short: the last tensor no longer fits.
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(data_offset + 128 + kTensorBytes - 1)), 0);
  try {
    read_header(path);
    FAIL() << "expected Truncated";
  } catch (const FormatError& e) {
    EXPECT_EQ(e.kind(), FormatErrorKind::Truncated) << e.what();
  }
  ReadOptions lenient;
  lenient.check_data_bounds = false;
  EXPECT_EQ(read_header(path, lenient).tensors.size(), 2u);
}

}  // namespace
}  // namespace skainet::gguf
