// A handful of direct malformed-header checks (the full corpus lives in tests/malformed).
#include <gtest/gtest.h>

#include "gguf_builder.hpp"
#include "skainet/io/gguf.hpp"
#include "temp_dir.hpp"

namespace skainet::gguf {
namespace {

using test::GgufBuilder;
using test::write_file;

class GgufErrors : public ::testing::Test {
 protected:
  // Saves the bytes, reads them back and returns the error kind (fails the test if none).
  FormatErrorKind kind_of(const GgufBuilder& b, const ReadOptions& options = {}) {
    write_file(path_, b.bytes());
    try {
      read_header(path_, options);
    } catch (const FormatError& e) {
      last_message_ = e.what();
      return e.kind();
    }
    ADD_FAILURE() << "no FormatError";
    return FormatErrorKind::MissingKey;
  }

  // A valid file with one F32 tensor of `elements` at offset 0, data included.
  static GgufBuilder one_tensor(std::vector<uint64_t> shape, uint32_t type, uint64_t offset, size_t data) {
    GgufBuilder b;
    b.header(3, 1, 1)
        .kv_string("general.architecture", "llama")
        .tensor_info("w", shape, type, offset)
        .pad_to(32)
        .zeros(data);
    return b;
  }

  test::TempDir dir_{"gguf"};
  std::filesystem::path path_ = dir_ / "bad.gguf";
  std::string last_message_;
};

TEST_F(GgufErrors, ValidBaselineParses) {
  write_file(path_, one_tensor({8}, 0, 0, 32).bytes());
  const Header h = read_header(path_);
  EXPECT_EQ(h.tensors.at(0).bytes, 32u);
  write_file(path_, one_tensor({8}, 0, 0, 32).patch_u32(4, 2).bytes());
  EXPECT_EQ(read_header(path_).version, 2u);
}

TEST_F(GgufErrors, MagicAndVersion) {
  EXPECT_EQ(kind_of(GgufBuilder().u32(0x12345678).u32(3).u64(0).u64(0)), FormatErrorKind::BadMagic);
  EXPECT_EQ(kind_of(GgufBuilder().header(1, 0, 0)), FormatErrorKind::UnsupportedVersion);
  EXPECT_NE(last_message_.find("version 1"), std::string::npos) << last_message_;
  EXPECT_EQ(kind_of(GgufBuilder().header(4, 0, 0)), FormatErrorKind::UnsupportedVersion);
  EXPECT_EQ(kind_of(GgufBuilder().header(0x03000000, 0, 0)), FormatErrorKind::BigEndian);
  EXPECT_NE(last_message_.find("big-endian"), std::string::npos) << last_message_;
  EXPECT_EQ(kind_of(GgufBuilder().u32(0x47475546).u32(0x03000000)), FormatErrorKind::BigEndian);
  EXPECT_EQ(kind_of(GgufBuilder().u32(0x46554747).u32(3).u32(0)), FormatErrorKind::Truncated);
  EXPECT_EQ(kind_of(GgufBuilder()), FormatErrorKind::Truncated);
  EXPECT_NE(last_message_.find(path_.string()), std::string::npos) << last_message_;
}

TEST_F(GgufErrors, Counts) {
  EXPECT_EQ(kind_of(GgufBuilder().header(3, 0, 2'000'000).kv_u32("a", 1)), FormatErrorKind::CountTooLarge);
  EXPECT_EQ(kind_of(GgufBuilder().header(3, ~0ull, 0)), FormatErrorKind::CountTooLarge);
  // A plausible count over too few bytes is a cut-off file: Truncated, where the bytes run out.
  EXPECT_EQ(kind_of(GgufBuilder().header(3, 0, 1000).kv_u32("a", 1)), FormatErrorKind::Truncated);
  EXPECT_NE(last_message_.find("ends at byte 41"), std::string::npos) << last_message_;
  EXPECT_EQ(kind_of(GgufBuilder().header(3, 2, 0)), FormatErrorKind::Truncated);
}

// Issue 10, defect 1: names up to 64 KiB were accepted; tensor names are now capped near ggml's
// GGML_MAX_NAME and the error names the tensor index, the offset, the length and the limit.
TEST_F(GgufErrors, TensorNameLongerThanTheFormatNeedsIsRefused) {
  const std::string ok(ReadOptions{}.max_tensor_name_bytes, 'n');
  GgufBuilder fits;
  fits.header(3, 1, 0).tensor_info(ok, {32}, 0, 0).pad_to(32).zeros(128);
  write_file(path_, fits.bytes());
  EXPECT_EQ(read_header(path_).tensors.at(0).name, ok);

  GgufBuilder b;
  b.header(3, 2, 0)
      .tensor_info("w", {32}, 0, 0)
      .tensor_info(std::string(25000, 'n'), {32}, 0, 128)
      .pad_to(32)
      .zeros(256);
  EXPECT_EQ(kind_of(b), FormatErrorKind::LengthTooLarge);
  EXPECT_NE(last_message_.find("tensor info 1"), std::string::npos) << last_message_;
  EXPECT_NE(last_message_.find("length 25000"), std::string::npos) << last_message_;
  EXPECT_NE(last_message_.find("limit of 256"), std::string::npos) << last_message_;
  EXPECT_NE(last_message_.find("offset "), std::string::npos) << last_message_;
  // Metadata keys keep their own, larger limit.
  EXPECT_EQ(read_header(path_, ReadOptions{.max_tensor_name_bytes = 1u << 16}).tensors.size(), 2u);
}

TEST_F(GgufErrors, Metadata) {
  EXPECT_EQ(kind_of(GgufBuilder().header(3, 0, 2).kv_u32("a", 1).kv_u32("a", 2)), FormatErrorKind::DuplicateKey);
  EXPECT_NE(last_message_.find("'a'"), std::string::npos) << last_message_;
  EXPECT_EQ(kind_of(GgufBuilder().header(3, 0, 1).str("k").u32(13).u32(0)), FormatErrorKind::UnknownValueType);
  EXPECT_EQ(kind_of(GgufBuilder().header(3, 0, 1).str("k").u32(9).u32(9).u64(0)), FormatErrorKind::NestedArray);
  EXPECT_EQ(kind_of(GgufBuilder().header(3, 0, 1).str("k").u32(9).u32(4).u64(1ull << 40)),
            FormatErrorKind::LengthTooLarge);
  EXPECT_EQ(kind_of(GgufBuilder().header(3, 0, 1).str("k").u32(8).u64(~0ull)), FormatErrorKind::LengthTooLarge);
  EXPECT_EQ(kind_of(GgufBuilder().header(3, 0, 1).u64(1ull << 50).u32(4).u32(0)), FormatErrorKind::LengthTooLarge);
  // Plausible lengths that run past the end: the file was cut short.
  EXPECT_EQ(kind_of(GgufBuilder().header(3, 0, 1).str("k").u32(9).u32(4).u64(3).u32(1)), FormatErrorKind::Truncated);
  EXPECT_EQ(kind_of(GgufBuilder().header(3, 0, 1).str("k").u32(8).u64(5).u16(0)), FormatErrorKind::Truncated);
  ReadOptions tight;
  tight.max_string_bytes = 4;
  EXPECT_EQ(kind_of(GgufBuilder().header(3, 0, 1).str("k").u32(8).str("hello"), tight),
            FormatErrorKind::LengthTooLarge);
  EXPECT_EQ(kind_of(GgufBuilder().header(3, 0, 1).str("k\xc0\x80").u32(4).u32(0)), FormatErrorKind::InvalidString);
  EXPECT_EQ(kind_of(GgufBuilder().header(3, 0, 1).str(std::string_view("k\0", 2)).u32(4).u32(0)),
            FormatErrorKind::InvalidString);
  EXPECT_EQ(kind_of(GgufBuilder().header(3, 0, 1).str("k").u32(7).u8(2)), FormatErrorKind::WrongValueType);
  EXPECT_EQ(kind_of(GgufBuilder().header(3, 0, 1).str("k").u32(10).u32(0)),
            FormatErrorKind::Truncated);  // half a uint64
}

TEST_F(GgufErrors, Alignment) {
  EXPECT_EQ(kind_of(GgufBuilder().header(3, 0, 1).kv_u32("general.alignment", 48)), FormatErrorKind::BadAlignment);
  EXPECT_EQ(kind_of(GgufBuilder().header(3, 0, 1).kv_u32("general.alignment", 0)), FormatErrorKind::BadAlignment);
  EXPECT_EQ(kind_of(GgufBuilder().header(3, 0, 1).str("general.alignment").u32(10).u64(64)),
            FormatErrorKind::BadAlignment);
  write_file(path_, GgufBuilder().header(3, 0, 1).kv_u32("general.alignment", 64).bytes());
  const Header h = read_header(path_);
  EXPECT_EQ(h.alignment, 64u);
  EXPECT_EQ(h.data_offset, 64u);
}

TEST_F(GgufErrors, TensorInfos) {
  EXPECT_EQ(kind_of(one_tensor({}, 0, 0, 32)), FormatErrorKind::BadDimensions);
  EXPECT_EQ(kind_of(one_tensor({1, 1, 1, 1, 1}, 0, 0, 32)), FormatErrorKind::BadDimensions);
  EXPECT_EQ(kind_of(one_tensor({8, 0}, 0, 0, 32)), FormatErrorKind::BadDimensions);
  EXPECT_EQ(kind_of(one_tensor({1ull << 32, 1ull << 32}, 0, 0, 32)), FormatErrorKind::DimensionOverflow);
  EXPECT_EQ(kind_of(one_tensor({1ull << 62}, 0, 0, 32)), FormatErrorKind::DimensionOverflow);  // bytes overflow
  EXPECT_EQ(kind_of(one_tensor({8}, 4, 0, 32)), FormatErrorKind::UnknownTensorType);
  EXPECT_EQ(kind_of(one_tensor({8}, 1000, 0, 32)), FormatErrorKind::UnknownTensorType);
  EXPECT_EQ(kind_of(one_tensor({100}, 2, 0, 64)), FormatErrorKind::BlockMismatch);  // Q4_0 blocks of 32
  EXPECT_EQ(kind_of(one_tensor({8}, 0, 16, 64)), FormatErrorKind::MisalignedOffset);
  EXPECT_EQ(kind_of(one_tensor({8}, 0, 0, 31)), FormatErrorKind::Truncated);
  EXPECT_NE(last_message_.find("'w'"), std::string::npos) << last_message_;
  EXPECT_EQ(kind_of(one_tensor({8}, 0, 1ull << 40, 32)), FormatErrorKind::DataOutOfBounds);
  EXPECT_EQ(kind_of(one_tensor({8}, 0, ~0ull - 31, 32)), FormatErrorKind::DataOutOfBounds);
  ReadOptions lenient;
  lenient.check_data_bounds = false;
  write_file(path_, one_tensor({8}, 0, 1ull << 40, 32).bytes());
  const Header h = read_header(path_, lenient);
  EXPECT_EQ(h.data_offset, 128u);
  EXPECT_EQ(h.tensors[0].file_offset, 128u + (1ull << 40));

  GgufBuilder dup;
  dup.header(3, 2, 0).tensor_info("w", {8}, 0, 0).tensor_info("w", {8}, 0, 32).pad_to(32).zeros(64);
  EXPECT_EQ(kind_of(dup), FormatErrorKind::DuplicateTensor);
  GgufBuilder overlap;
  overlap.header(3, 2, 0).tensor_info("a", {16}, 0, 0).tensor_info("b", {8}, 0, 32).pad_to(32).zeros(64);
  EXPECT_EQ(kind_of(overlap), FormatErrorKind::OverlappingTensors);
  GgufBuilder name;
  name.header(3, 1, 0).tensor_info("bad\xed\xa0\x80", {8}, 0, 0).pad_to(32).zeros(32);  // a surrogate
  EXPECT_EQ(kind_of(name), FormatErrorKind::InvalidString);
}

TEST_F(GgufErrors, TruncatedInsideDataSection) {
  // Three packed tensors; cut the file inside the second: the third starts past the end, yet the
  // file was merely cut short.
  GgufBuilder b;
  b.header(3, 3, 0).tensor_info("a", {8}, 0, 0).tensor_info("b", {8}, 0, 32).tensor_info("c", {8}, 0, 64).pad_to(32);
  b.zeros(40);
  EXPECT_EQ(kind_of(b), FormatErrorKind::Truncated);
  EXPECT_NE(last_message_.find("'b'"), std::string::npos) << last_message_;
}

}  // namespace
}  // namespace skainet::gguf

namespace skainet::gguf {
namespace {

// Every prefix of a valid file and a few thousand single-byte corruptions: each either parses or
// throws FormatError, never anything else (the sanitizer build checks there is no UB on the way).
TEST(GgufCorruption, PrefixesAndByteFlipsOnlyThrowFormatError) {
  test::TempDir dir("gguf");
  const auto good = dir / "good.gguf";
  Writer w(good, 64);
  w.set("general.architecture", Value::string("llama"));
  w.set("toks", Value::array(ValueType::String, {std::string("a"), std::string("bc")}));
  w.set("n", Value::u32(3));
  w.add_tensor("x", {32, 2}, GgmlType::Q8_0);
  w.add_tensor("y", {5}, GgmlType::F32);
  w.write([](size_t, std::span<std::byte> out) { std::fill(out.begin(), out.end(), std::byte{1}); });
  std::vector<uint8_t> bytes(std::filesystem::file_size(good));
  {
    base::FileReader f(good);
    f.read_at(0, bytes.data(), bytes.size());
  }
  const auto bad = dir / "bad.gguf";

  for (size_t n = 0; n < bytes.size(); ++n) {
    write_file(bad, bytes, n);
    try {
      read_header(bad);
      // Only a cut inside the final padding still holds every tensor.
      EXPECT_GE(n, read_header(good).tensors.back().file_offset + 20) << "prefix " << n;
    } catch (const FormatError& e) {
      const auto k = e.kind();
      EXPECT_EQ(k, FormatErrorKind::Truncated) << "prefix " << n << ": " << e.what();
    }
  }

  uint32_t seed = 12345;
  const auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  const uint64_t header_end = read_header(good).data_offset;
  int refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<uint8_t> b = bytes;
    const size_t at = next() % header_end;
    b[at] = static_cast<uint8_t>(next() >> 24);
    if (i % 3 == 0) b[next() % header_end] = static_cast<uint8_t>(next() >> 24);
    write_file(bad, b);
    try {
      read_header(bad);
    } catch (const FormatError&) {
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "byte " << at << ": not a FormatError: " << e.what();
    }
  }
  EXPECT_GT(refused, 1000);
}

}  // namespace
}  // namespace skainet::gguf
