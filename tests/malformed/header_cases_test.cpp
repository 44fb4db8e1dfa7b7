// Hostile headers up to the end of the metadata: magic, version, byte order, counts, lengths, value
// types, keys. Each case names the FormatErrorKind it must produce.
#include <functional>
#include <limits>

#include "malformed/malformed_support.hpp"

namespace skainet::test {
namespace {

using gguf::FormatErrorKind;
constexpr uint64_t kHuge = uint64_t{1} << 62;
constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

// A file with no tensors whose single metadata pair is written by `kv`, then some slack bytes so a
// lying length is not merely a truncation at the last byte.
std::vector<uint8_t> one_kv(const std::function<void(GgufBuilder&)>& kv, uint64_t n_kv = 1) {
  GgufBuilder b;
  b.header(3, 0, n_kv);
  kv(b);
  b.zeros(64);
  return b.bytes();
}

class HeaderCases : public MalformedTest {};

TEST_F(HeaderCases, ValidReferenceFileReadsBackExactly) {
  const ValidFile f = make_valid_file();
  const auto path = write("valid.gguf", f.bytes);
  AllocWatch watch;
  const gguf::Header h = gguf::read_header(path);
  const AllocStats stats = watch.stop();
  EXPECT_EQ(h.version, 3u);
  EXPECT_EQ(h.file_size, f.bytes.size());
  EXPECT_EQ(h.alignment, 32u);
  EXPECT_EQ(h.data_offset, f.data_offset);
  // The reader stages reads in chunks (docs/gguf.md: at most the header plus 8 KiB), never past the end.
  EXPECT_LE(h.header_bytes_read, h.file_size);
  ASSERT_EQ(h.metadata.size(), 5u);
  EXPECT_EQ(h.get_string("general.architecture"), "llama");
  EXPECT_EQ(h.get_u32("llama.block_count"), 2u);
  const gguf::Value* ids = h.find("test.ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->items, (std::vector<gguf::Scalar>{uint32_t{1}, uint32_t{2}, uint32_t{3}}));
  const gguf::Value* tokens = h.find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->items, (std::vector<gguf::Scalar>{std::string("a"), std::string("bc")}));
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[0].name, "a.weight");
  EXPECT_EQ(h.tensors[0].shape, (std::vector<uint64_t>{8, 2}));
  EXPECT_EQ(h.tensors[0].bytes, 64u);
  EXPECT_EQ(h.tensors[0].file_offset, f.data_offset);
  EXPECT_EQ(h.tensors[1].type, GgmlType::Q8_0);
  EXPECT_EQ(h.tensors[1].bytes, 34u);
  EXPECT_EQ(h.tensors[1].file_offset, f.data_offset + 64);
  if (allocation_counter_available()) {
    EXPECT_LE(stats.peak_live, f.bytes.size() + kAllocationSlack);
  }
}

TEST_F(HeaderCases, BadMagic) {
  expect_kind("ggux", GgufBuilder().raw("GGUX").u32(3).u64(0).u64(0).bytes(), FormatErrorKind::BadMagic);
  expect_kind("lowercase", GgufBuilder().raw("gguf").u32(3).u64(0).u64(0).bytes(), FormatErrorKind::BadMagic);
  expect_kind("zeros", GgufBuilder().zeros(24).bytes(), FormatErrorKind::BadMagic);
  expect_kind("ggml", GgufBuilder().raw("lmgg").zeros(60).bytes(), FormatErrorKind::BadMagic);
}

TEST_F(HeaderCases, BigEndianFile) {
  // gguf-py writes the magic as the same four bytes in both byte orders; the version betrays it.
  expect_kind("be_v3", GgufBuilder().magic().big_endian().u32(3).u64(0).u64(0).bytes(), FormatErrorKind::BigEndian);
  expect_kind("be_v2", GgufBuilder().magic().big_endian().u32(2).u64(0).u64(1).str("a").u32(kTypeU32).u32(1).bytes(),
              FormatErrorKind::BigEndian);
}

TEST_F(HeaderCases, UnsupportedVersions) {
  for (uint32_t v : {0u, 1u, 4u, 0xffffu}) {
    expect_kind("version_" + std::to_string(v), GgufBuilder().header(v, 0, 0).zeros(32).bytes(),
                FormatErrorKind::UnsupportedVersion);
  }
}

TEST_F(HeaderCases, HugeCounts) {
  expect_kind("tensors_2e62", GgufBuilder().header(3, kHuge, 0).zeros(64).bytes(), FormatErrorKind::CountTooLarge);
  expect_kind("tensors_max", GgufBuilder().header(3, kMax, 0).zeros(64).bytes(), FormatErrorKind::CountTooLarge);
  expect_kind("kvs_2e62", GgufBuilder().header(3, 0, kHuge).zeros(64).bytes(), FormatErrorKind::CountTooLarge);
  expect_kind("kvs_max", GgufBuilder().header(3, 0, kMax).zeros(64).bytes(), FormatErrorKind::CountTooLarge);
  // Two million: more than the file could hold and more than any real model has.
  expect_kind("kvs_2e6", GgufBuilder().header(3, 0, 2'000'000).kv_u32("a", 1).bytes(), FormatErrorKind::CountTooLarge);
  expect_kind("tensors_2e6", GgufBuilder().header(3, 2'000'000, 0).tensor_info("t", {1}, kF32, 0).bytes(),
              FormatErrorKind::CountTooLarge);
}

TEST_F(HeaderCases, HugeStringLengths) {
  expect_kind("key_2e62", one_kv([](GgufBuilder& b) { b.u64(kHuge).raw("abc"); }), FormatErrorKind::LengthTooLarge);
  expect_kind("key_max", one_kv([](GgufBuilder& b) { b.u64(kMax).raw("abc"); }), FormatErrorKind::LengthTooLarge);
  expect_kind("value_2e62", one_kv([](GgufBuilder& b) { b.str("k.str").u32(kTypeString).u64(kHuge).raw("x"); }),
              FormatErrorKind::LengthTooLarge, {"k.str"});
  expect_kind("tensor_name_2e62",
              GgufBuilder().header(3, 1, 0).u64(kHuge).raw("t").u32(1).u64(1).u32(kF32).u64(0).zeros(64).bytes(),
              FormatErrorKind::LengthTooLarge);
}

TEST_F(HeaderCases, HugeArrayLengths) {
  auto array = [](uint32_t element_type, uint64_t count) {
    return one_kv([=](GgufBuilder& b) { b.str("k.arr").u32(kTypeArray).u32(element_type).u64(count).u32(0); });
  };
  expect_kind("u8_2e62", array(kTypeU8, kHuge), FormatErrorKind::LengthTooLarge, {"k.arr"});
  expect_kind("u32_2e62", array(kTypeU32, kHuge), FormatErrorKind::LengthTooLarge, {"k.arr"});  // 2^64 bytes
  expect_kind("u64_max", array(kTypeU64, kMax), FormatErrorKind::LengthTooLarge, {"k.arr"});
  expect_kind("string_2e62", array(kTypeString, kHuge), FormatErrorKind::LengthTooLarge, {"k.arr"});
  expect_kind("bool_2e25", array(kTypeBool, uint64_t{1} << 25), FormatErrorKind::LengthTooLarge, {"k.arr"});
  expect_kind("string_item_2e62", one_kv([](GgufBuilder& b) {
                b.str("k.arr").u32(kTypeArray).u32(kTypeString).u64(2).str("ok").u64(kHuge).raw("x");
              }),
              FormatErrorKind::LengthTooLarge, {"k.arr"});
}

// Lengths and counts a real file could have, in a file too short for them: a cut-off file, and no
// memory may be taken for what is not there.
TEST_F(HeaderCases, PlausibleClaimsPastTheEndAreTruncation) {
  expect_kind("string_1mib", one_kv([](GgufBuilder& b) { b.str("k.str").u32(kTypeString).u64(1u << 20).raw("x"); }),
              FormatErrorKind::Truncated, {"k.str"});
  expect_kind("u32_array_1m",
              one_kv([](GgufBuilder& b) { b.str("k.arr").u32(kTypeArray).u32(kTypeU32).u64(1u << 20); }),
              FormatErrorKind::Truncated, {"k.arr"});
  expect_kind("kvs_1000", GgufBuilder().header(3, 0, 1000).kv_u32("a", 1).bytes(), FormatErrorKind::Truncated);
  expect_kind("tensors_1000", GgufBuilder().header(3, 1000, 0).tensor_info("t", {1}, kF32, 0).bytes(),
              FormatErrorKind::Truncated);
}

TEST_F(HeaderCases, DuplicateKey) {
  expect_kind("dup_key", one_kv([](GgufBuilder& b) { b.kv_u32("general.dup", 1).kv_string("general.dup", "x"); }, 2),
              FormatErrorKind::DuplicateKey, {"general.dup"});
}

TEST_F(HeaderCases, UnknownValueTypes) {
  for (uint32_t t : {13u, 99u, 0xffffffffu}) {
    expect_kind("value_type_" + std::to_string(t), one_kv([=](GgufBuilder& b) { b.str("k.bad").u32(t).u32(0); }),
                FormatErrorKind::UnknownValueType, {"k.bad"});
    expect_kind("element_type_" + std::to_string(t),
                one_kv([=](GgufBuilder& b) { b.str("k.bad").u32(kTypeArray).u32(t).u64(1).u32(0); }),
                FormatErrorKind::UnknownValueType, {"k.bad"});
  }
}

TEST_F(HeaderCases, NestedArray) {
  expect_kind("nested", one_kv([](GgufBuilder& b) {
                b.str("k.nest").u32(kTypeArray).u32(kTypeArray).u64(1).u32(kTypeU32).u64(1).u32(7);
              }),
              FormatErrorKind::NestedArray, {"k.nest"});
  expect_kind("nested_empty", one_kv([](GgufBuilder& b) { b.str("k.nest").u32(kTypeArray).u32(kTypeArray).u64(0); }),
              FormatErrorKind::NestedArray, {"k.nest"});
}

TEST_F(HeaderCases, InvalidUtf8Keys) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"lone_continuation", "key\x80"},        {"truncated_sequence", "key\xe2\x82"}, {"overlong_slash", "k\xc0\xaf"},
      {"surrogate", "k\xed\xa0\x80"},          {"above_max", "k\xf4\x90\x80\x80"},    {"invalid_byte", "k\xff"},
      {"nul_inside", std::string("ke\0y", 4)},
  };
  for (const auto& [name, key] : bad) {
    const std::string& k = key;  // clang 14 cannot capture a structured binding
    expect_kind("key_" + name, one_kv([&](GgufBuilder& b) { b.kv_u32(k, 1); }), FormatErrorKind::InvalidString);
  }
  for (const auto& [name, tensor] : bad) {
    if (name == "nul_inside") continue;  // gguf.hpp promises the NUL rule for keys only
    expect_kind("tensor_" + name,
                GgufBuilder().header(3, 1, 0).tensor_info(tensor, {8}, kF32, 0).pad_to(32).zeros(32).bytes(),
                FormatErrorKind::InvalidString);
  }
}

TEST_F(HeaderCases, EmptyKeyAndEmptyTensorName) {
  expect_kind("empty_key", one_kv([](GgufBuilder& b) { b.kv_u32("", 1); }), FormatErrorKind::InvalidString);
  expect_kind("empty_tensor_name",
              GgufBuilder().header(3, 1, 0).tensor_info("", {8}, kF32, 0).pad_to(32).zeros(32).bytes(),
              FormatErrorKind::InvalidString);
}

// A bool is one byte, 0 or 1; anything else would not survive a round trip (docs/gguf.md).
TEST_F(HeaderCases, BoolOtherThanZeroOrOne) {
  expect_kind("bool_2", one_kv([](GgufBuilder& b) { b.str("k.flag").u32(kTypeBool).u8(2); }),
              FormatErrorKind::WrongValueType, {"k.flag"});
  expect_kind("bool_array_ff",
              one_kv([](GgufBuilder& b) { b.str("k.flags").u32(kTypeArray).u32(kTypeBool).u64(2).u8(1).u8(0xff); }),
              FormatErrorKind::WrongValueType, {"k.flags"});
}

// Tokenizer vocabularies hold byte tokens that are not UTF-8; string values must pass untouched.
TEST_F(HeaderCases, NonUtf8StringValuesAreData) {
  const auto path =
      write("byte_tokens.gguf", one_kv([](GgufBuilder& b) {
              b.str("tokenizer.ggml.tokens").u32(kTypeArray).u32(kTypeString).u64(2).str("\xff").str("\x80\x80");
            }));
  const gguf::Header h = gguf::read_header(path);
  const gguf::Value* v = h.find("tokenizer.ggml.tokens");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->items, (std::vector<gguf::Scalar>{std::string("\xff"), std::string("\x80\x80")}));
}

TEST_F(HeaderCases, GettersReportMissingAndMistypedKeys) {
  const auto path =
      write("getters.gguf", one_kv([](GgufBuilder& b) { b.kv_string("k.name", "x").kv_f32("k.float", 1.5f); }, 2));
  const gguf::Header h = gguf::read_header(path);
  try {
    h.get_u32("k.absent");
    ADD_FAILURE() << "get_u32 of an absent key returned";
  } catch (const gguf::FormatError& e) {
    EXPECT_EQ(e.kind(), FormatErrorKind::MissingKey);
    EXPECT_NE(std::string(e.what()).find("k.absent"), std::string::npos) << e.what();
  }
  try {
    h.get_u32("k.name");
    ADD_FAILURE() << "get_u32 of a string returned";
  } catch (const gguf::FormatError& e) {
    EXPECT_EQ(e.kind(), FormatErrorKind::WrongValueType);
    EXPECT_NE(std::string(e.what()).find("k.name"), std::string::npos) << e.what();
  }
  EXPECT_FLOAT_EQ(h.get_f32("k.float"), 1.5f);
}

}  // namespace
}  // namespace skainet::test
