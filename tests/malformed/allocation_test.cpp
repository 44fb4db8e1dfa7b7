// Memory a hostile header can make the reader take. Claimed counts must not size allocations beyond
// what the file can back; only the items actually parsed may cost memory.
#include "malformed/malformed_support.hpp"

namespace skainet::test {
namespace {

using gguf::FormatErrorKind;

class Allocation : public MalformedTest {};

constexpr size_t kFileBytes = 256 * 1024;

// A metadata count that passes the "each entry needs at least N bytes" bound exactly, over bytes
// that hold no entries at all: the reader must fail on the first entry without having reserved
// memory for all of them.
TEST_F(Allocation, PlausibleMetadataCountOverEmptyBytes) {
  GgufBuilder b;
  b.header(3, 0, 0).zeros(kFileBytes);
  const uint64_t min_entry = 8 + 1 + 4 + 1;  // key length, one key byte, type, one value byte
  b.patch_u64(16, (kFileBytes) / min_entry);
  expect_kind("kv_count_at_bound", b.bytes(), FormatErrorKind::InvalidString);  // the first key is empty
}

TEST_F(Allocation, PlausibleTensorCountOverEmptyBytes) {
  GgufBuilder b;
  b.header(3, 0, 0).zeros(kFileBytes);
  const uint64_t min_info = 8 + 1 + 4 + 8 + 4 + 8;  // name length, one name byte, n_dims, one dim, type, offset
  b.patch_u64(8, kFileBytes / min_info);
  expect_kind("tensor_count_at_bound", b.bytes(), FormatErrorKind::InvalidString);  // the first name is empty
}

TEST_F(Allocation, StringArrayAtTheCountBound) {
  // As many strings as the remaining bytes can hold length fields for.
  GgufBuilder b;
  b.header(3, 0, 1).str("k.arr").u32(kTypeArray).u32(kTypeString).u64(0);
  const size_t count_at = b.size() - 8;
  b.zeros(kFileBytes);
  b.patch_u64(count_at, kFileBytes / 8);
  // Every item is an empty string, so the file is valid (no tensors); what matters is its cost.
  const auto path = write("string_array.gguf", b.bytes());
  AllocWatch watch;
  const gguf::Header h = gguf::read_header(path);
  const AllocStats stats = watch.stop();
  ASSERT_NE(h.find("k.arr"), nullptr);
  EXPECT_EQ(h.find("k.arr")->items.size(), kFileBytes / 8);
  if (!allocation_counter_available()) GTEST_SKIP() << "allocation counting is off under AddressSanitizer";
  // Each 8-byte empty string becomes one Scalar in memory: the reader cannot do better than that
  // ratio with Value's representation, but must not do worse.
  const double per_item = static_cast<double>(sizeof(gguf::Scalar)) / 8;
  RecordProperty("peak_over_file", std::to_string(static_cast<double>(stats.peak_live) / b.size()));
  EXPECT_LE(stats.peak_live, static_cast<uint64_t>(per_item * b.size()) + kAllocationSlack);
}

// Value keeps array items as Scalars (a variant holding std::string), so a byte array costs
// sizeof(Scalar) per file byte. This is a property of the API, measured here so it stays bounded.
TEST_F(Allocation, ByteArrayCostIsBoundedBySizeofScalar) {
  GgufBuilder b;
  b.header(3, 0, 1).str("k.bytes").u32(kTypeArray).u32(kTypeU8).u64(64 * 1024).fill(64 * 1024, 7);
  const auto path = write("byte_array.gguf", b.bytes());
  AllocWatch watch;
  const gguf::Header h = gguf::read_header(path);
  const AllocStats stats = watch.stop();
  ASSERT_NE(h.find("k.bytes"), nullptr);
  EXPECT_EQ(h.find("k.bytes")->items.size(), 64u * 1024);
  if (!allocation_counter_available()) GTEST_SKIP() << "allocation counting is off under AddressSanitizer";
  RecordProperty("peak_over_file", std::to_string(static_cast<double>(stats.peak_live) / b.size()));
  EXPECT_LE(stats.peak_live, sizeof(gguf::Scalar) * b.size() + kAllocationSlack);
}

TEST_F(Allocation, RealModelHeaderCostsLessThanTheFile) {
  const std::filesystem::path model = std::filesystem::path(SKAINET_SHARED_MODELS) / "stories260K.gguf";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << model << " not present";
  AllocWatch watch;
  const gguf::Header h = gguf::read_header(model);
  const AllocStats stats = watch.stop();
  EXPECT_EQ(h.tensors.size(), 48u);
  if (!allocation_counter_available()) GTEST_SKIP() << "allocation counting is off under AddressSanitizer";
  EXPECT_LE(stats.peak_live, h.file_size);
}

}  // namespace
}  // namespace skainet::test
