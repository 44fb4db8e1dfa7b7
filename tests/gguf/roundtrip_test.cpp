// Writer -> reader round trips: every value type, several tensor types and shapes, two alignments.
#include <filesystem>
#include <limits>
#include <numeric>

#include <gtest/gtest.h>

#include "skainet/io/gguf.hpp"
#include "temp_dir.hpp"

namespace skainet::gguf {
namespace {

std::vector<KeyValue> every_value_type() {
  std::vector<KeyValue> kv = {
      {"t.u8", Value::of(ValueType::UInt8, uint8_t{200})},
      {"t.i8", Value::of(ValueType::Int8, int8_t{-100})},
      {"t.u16", Value::of(ValueType::UInt16, uint16_t{65000})},
      {"t.i16", Value::of(ValueType::Int16, int16_t{-32000})},
      {"t.u32", Value::u32(4000000000u)},
      {"t.i32", Value::of(ValueType::Int32, int32_t{-2000000000})},
      {"t.f32", Value::f32(3.25f)},
      {"t.bool", Value::of(ValueType::Bool, true)},
      {"t.string", Value::string("héllo, wörld")},
      {"t.empty_string", Value::string("")},
      {"t.u64", Value::of(ValueType::UInt64, uint64_t{1} << 40)},
      {"t.i64", Value::of(ValueType::Int64, int64_t{-1} << 50)},
      {"t.f64", Value::of(ValueType::Float64, 2.718281828459045)},
      {"a.u8", Value::array(ValueType::UInt8, {uint8_t{1}, uint8_t{255}})},
      {"a.i8", Value::array(ValueType::Int8, {int8_t{-1}, int8_t{127}})},
      {"a.u16", Value::array(ValueType::UInt16, {uint16_t{7}})},
      {"a.i16", Value::array(ValueType::Int16, {int16_t{-7}, int16_t{8}, int16_t{9}})},
      {"a.u32", Value::array(ValueType::UInt32, {1u, 2u, 3u})},
      {"a.i32", Value::array(ValueType::Int32, {int32_t{-3}})},
      {"a.f32", Value::array(ValueType::Float32, {0.5f, -1.5f})},
      {"a.bool", Value::array(ValueType::Bool, {true, false, true})},
      {"a.string", Value::array(ValueType::String, {std::string("a"), std::string(""), std::string("▁the")})},
      {"a.u64", Value::array(ValueType::UInt64, {std::numeric_limits<uint64_t>::max()})},
      {"a.i64", Value::array(ValueType::Int64, {std::numeric_limits<int64_t>::min()})},
      {"a.f64", Value::array(ValueType::Float64, {1e300, -0.0})},
      {"a.empty_u32", Value::array(ValueType::UInt32, {})},
      {"a.empty_string", Value::array(ValueType::String, {})},
  };
  return kv;
}

struct TensorSpec {
  std::string name;
  std::vector<uint64_t> shape;
  GgmlType type;
};

const std::vector<TensorSpec> kTensors = {
    {"f32.1d", {7}, GgmlType::F32},          {"f16.2d", {3, 5}, GgmlType::F16},
    {"q4_0.3d", {64, 3, 2}, GgmlType::Q4_0}, {"q8_0.2d", {32, 5}, GgmlType::Q8_0},
    {"q4_k.2d", {256, 2}, GgmlType::Q4_K},   {"q6_k.4d", {512, 1, 2, 3}, GgmlType::Q6_K},
    {"bf16.1d", {1}, GgmlType::BF16},
};

// Deterministic, different bytes for every tensor.
std::byte pattern(size_t tensor, uint64_t i) {
  return static_cast<std::byte>((tensor * 131 + i * 7 + (i >> 8)) & 0xFF);
}

class RoundTrip : public ::testing::TestWithParam<uint32_t> {};

TEST_P(RoundTrip, MetadataAndTensorBytesSurvive) {
  const uint32_t alignment = GetParam();
  test::TempDir dir("gguf");
  const auto path = dir / "rt.gguf";
  Writer w(path, alignment);
  for (const KeyValue& kv : every_value_type()) w.set(kv.key, kv.value);
  w.set("t.u32", Value::u32(5));  // replacing keeps the position
  for (const TensorSpec& t : kTensors) w.add_tensor(t.name, t.shape, t.type);

  uint64_t produced = 0;
  std::vector<size_t> calls;
  const uint64_t written = w.write([&](size_t i, std::span<std::byte> out) {
    calls.push_back(i);
    EXPECT_EQ(out.size(), w.tensors()[i].bytes);
    for (size_t k = 0; k < out.size(); ++k) out[k] = pattern(i, k);
    produced += out.size();
  });
  EXPECT_EQ(calls, (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(written, std::filesystem::file_size(path));

  base::FileReader file(path);
  const Header h = read_header(file);
  EXPECT_EQ(h.version, 3u);
  EXPECT_EQ(h.alignment, alignment);
  EXPECT_EQ(h.data_offset % alignment, 0u);
  std::vector<KeyValue> expected = every_value_type();
  expected[4].value = Value::u32(5);
  if (alignment != kDefaultAlignment) expected.push_back({"general.alignment", Value::u32(alignment)});
  ASSERT_EQ(h.metadata.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(h.metadata[i].key, expected[i].key);
    EXPECT_EQ(h.metadata[i].value, expected[i].value) << expected[i].key;
  }

  ASSERT_EQ(h.tensors.size(), kTensors.size());
  uint64_t expected_offset = 0;
  uint64_t total = 0;
  for (size_t i = 0; i < kTensors.size(); ++i) {
    const TensorInfo& t = h.tensors[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, kTensors[i].name);
    EXPECT_EQ(t.shape, kTensors[i].shape);
    EXPECT_EQ(t.type, kTensors[i].type);
    EXPECT_EQ(t.offset, expected_offset);  // running sum of sizes, each padded to the alignment
    EXPECT_EQ(t.file_offset, h.data_offset + t.offset);
    EXPECT_EQ(t.file_offset, w.tensors()[i].file_offset);
    EXPECT_EQ(t.bytes, w.tensors()[i].bytes);
    expected_offset += (t.bytes + alignment - 1) / alignment * alignment;
    total += t.bytes;
    std::vector<std::byte> bytes(t.bytes);
    file.read_at(t.file_offset, bytes.data(), bytes.size());
    for (size_t k = 0; k < bytes.size(); ++k) ASSERT_EQ(bytes[k], pattern(i, k)) << "byte " << k;
  }
  EXPECT_EQ(produced, total);
  EXPECT_EQ(h.file_size, h.data_offset + expected_offset);  // the last tensor is padded too
  EXPECT_EQ(h.tensors[2].bytes, 2u * 18 * 3 * 2);           // Q4_0: 64 elements = 2 blocks of 18 bytes
  EXPECT_EQ(h.tensors[5].bytes, 2u * 1 * 2 * 3 * 210);      // Q6_K: 512 elements = 2 blocks of 210 bytes
}

INSTANTIATE_TEST_SUITE_P(Alignments, RoundTrip, ::testing::Values(32u, 64u, 1u));

TEST(GgufWriter, ProducerThatThrowsLeavesNoFile) {
  test::TempDir dir("gguf");
  const auto path = dir / "out.gguf";
  Writer w(path);
  w.set("general.architecture", Value::string("llama"));
  w.add_tensor("a", {32}, GgmlType::F32);
  w.add_tensor("b", {32}, GgmlType::F32);
  EXPECT_THROW(w.write([](size_t i, std::span<std::byte>) {
    if (i == 1) throw std::runtime_error("producer failed");
  }),
               std::runtime_error);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));  // nor a temporary file beside it
}

TEST(GgufWriter, FailedRewriteKeepsTheOldFile) {
  test::TempDir dir("gguf");
  const auto path = dir / "out.gguf";
  Writer first(path);
  first.set("version", Value::u32(1));
  first.write([](size_t, std::span<std::byte>) {});
  Writer second(path);
  second.set("version", Value::u32(2));
  second.add_tensor("a", {4}, GgmlType::F32);
  EXPECT_THROW(second.write([](size_t, std::span<std::byte>) { throw std::runtime_error("x"); }), std::runtime_error);
  EXPECT_EQ(read_header(path).get_u32("version"), 1u);
}

TEST(GgufWriter, NoTensorsStillAValidFile) {
  test::TempDir dir("gguf");
  Writer w(dir / "empty.gguf");
  EXPECT_EQ(w.write([](size_t, std::span<std::byte>) { FAIL(); }), 32u);  // header padded to the alignment
  const Header h = read_header(dir / "empty.gguf");
  EXPECT_TRUE(h.metadata.empty());
  EXPECT_TRUE(h.tensors.empty());
  EXPECT_EQ(h.data_offset, 32u);
}

TEST(GgufWriter, ProgressAdvancesByTensorBytes) {
  test::TempDir dir("gguf");
  Writer w(dir / "p.gguf");
  w.add_tensor("a", {32}, GgmlType::Q8_0);
  w.add_tensor("b", {10}, GgmlType::F16);
  base::Progress progress("writing", 54);
  w.write([](size_t, std::span<std::byte>) {}, &progress);
  const Header h = read_header(dir / "p.gguf");
  EXPECT_EQ(h.tensors[0].bytes + h.tensors[1].bytes, 54u);
}

TEST(GgufWriter, RefusesInvalidInput) {
  EXPECT_THROW(Writer("x.gguf", 48), InvalidArgument);
  EXPECT_THROW(Writer("x.gguf", 0), InvalidArgument);
  Writer w("never-written.gguf", 64);
  EXPECT_THROW(w.add_tensor("q", {100}, GgmlType::Q4_0), InvalidArgument);  // not whole blocks
  EXPECT_THROW(w.add_tensor("z", {0}, GgmlType::F32), InvalidArgument);
  EXPECT_THROW(w.add_tensor("five", {1, 1, 1, 1, 1}, GgmlType::F32), InvalidArgument);
  EXPECT_THROW(w.add_tensor("", {1}, GgmlType::F32), InvalidArgument);
  EXPECT_THROW(w.add_tensor("big", {1ull << 62, 1ull << 62}, GgmlType::F32), OverflowError);
  EXPECT_EQ(w.add_tensor("ok", {1}, GgmlType::F32), 0u);
  EXPECT_THROW(w.add_tensor("ok", {1}, GgmlType::F32), InvalidArgument);
  EXPECT_THROW(w.set("bad\xff", Value::u32(1)), InvalidArgument);
  EXPECT_THROW(w.set("general.alignment", Value::u32(32)), InvalidArgument);
  w.set("general.alignment", Value::u32(64));  // agrees with the writer: accepted, still managed
  Value inconsistent = Value::u32(1);
  inconsistent.type = ValueType::String;
  EXPECT_THROW(w.set("k", inconsistent), InvalidArgument);
  EXPECT_THROW(Value::of(ValueType::UInt32, int32_t{1}), InvalidArgument);
  EXPECT_THROW(Value::array(ValueType::Array, {}), InvalidArgument);
  EXPECT_THROW(Value::array(ValueType::String, {1u}), InvalidArgument);
  EXPECT_FALSE(std::filesystem::exists("never-written.gguf"));
}

}  // namespace
}  // namespace skainet::gguf
