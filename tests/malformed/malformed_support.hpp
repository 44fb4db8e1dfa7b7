// Shared pieces of the malformed-input tests: a per-test scratch directory, a small valid GGUF file
// with the offsets of its sections, and the check that a file fails with one specific FormatErrorKind.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "alloc_counter.hpp"
#include "gguf_builder.hpp"
#include "skainet/io/gguf.hpp"
#include "temp_dir.hpp"

namespace skainet::gguf {
// Lets GoogleTest print kinds by name in failed comparisons.
inline void PrintTo(FormatErrorKind k, std::ostream* os) { *os << error_kind_name(k); }
}  // namespace skainet::gguf

namespace skainet::test {

// Where each section of the reference file starts; a cut at any of them (or inside) must read as
// Truncated.
struct ValidFile {
  std::vector<uint8_t> bytes;
  struct Mark {
    const char* what;
    size_t at;
  };
  std::vector<Mark> marks;
  uint64_t data_offset = 0;
};

// Two tensors (F32 [8,2] and Q8_0 [32]) and five metadata pairs of scalar, string and array types.
// The file ends exactly at the last tensor byte, so every proper prefix lacks something.
inline ValidFile make_valid_file() {
  ValidFile f;
  GgufBuilder b;
  auto mark = [&](const char* what, long delta = 0) {
    f.marks.push_back({what, static_cast<size_t>(static_cast<long>(b.size()) + delta)});
  };
  mark("magic");
  b.magic();
  mark("version");
  b.u32(3);
  mark("tensor count");
  b.u64(2);
  mark("metadata count");
  b.u64(5);
  mark("first key length");
  mark("first key length, 3 of 8 bytes", 3);
  mark("first key bytes", 8);
  mark("first key bytes, inside", 12);
  b.str("general.architecture");
  mark("first value type");
  b.u32(kTypeString);
  mark("string value length");
  b.u64(5);
  mark("string value bytes");
  mark("string value bytes, inside", 2);
  b.raw("llama");
  mark("u32 key");
  b.str("llama.block_count");
  b.u32(kTypeU32);
  mark("u32 value");
  mark("u32 value, 1 of 4 bytes", 1);
  b.u32(2);
  mark("array key");
  b.str("test.ids").u32(kTypeArray);
  mark("array element type");
  b.u32(kTypeU32);
  mark("array count");
  b.u64(3);
  mark("array items");
  mark("array items, inside", 5);
  b.u32(1).u32(2).u32(3);
  mark("string array key");
  b.str("tokenizer.ggml.tokens").u32(kTypeArray).u32(kTypeString).u64(2);
  mark("string array item");
  mark("string array item bytes", 8);
  b.str("a").str("bc");
  mark("alignment key");
  b.kv_u32("general.alignment", 32);
  mark("first tensor name");
  mark("first tensor name bytes", 8);
  b.str("a.weight");
  mark("first tensor dim count");
  b.u32(2);
  mark("first tensor dims");
  mark("first tensor second dim", 8);
  b.u64(8).u64(2);
  mark("first tensor type");
  b.u32(kF32);
  mark("first tensor offset");
  b.u64(0);
  mark("second tensor name");
  b.tensor_info("b.weight", {32}, kQ8_0, 64);
  mark("second tensor offset", -8);
  mark("padding");
  b.pad_to(32);
  f.data_offset = b.size();
  mark("first tensor data");
  mark("first tensor data, inside", 17);
  b.fill(64, 0x3f);
  mark("second tensor data");
  mark("second tensor data, last byte", 33);
  b.fill(34, 0x01);
  f.bytes = b.bytes();
  return f;
}

// A fresh directory per test (gtest makes a fixture object per test), removed afterwards.
class MalformedTest : public ::testing::Test {
 protected:
  std::filesystem::path file(const std::string& name) const { return dir_ / name; }
  std::filesystem::path write(const std::string& name, const std::vector<uint8_t>& bytes, size_t n);
  std::filesystem::path write(const std::string& name, const std::vector<uint8_t>& bytes) {
    return write(name, bytes, bytes.size());
  }

  struct Failure {
    gguf::FormatErrorKind kind;
    std::string message;
    AllocStats allocations;
  };
  // Reads `path`; returns the FormatError, or nullopt after recording a test failure if the read
  // succeeded or threw anything else (any other exception is a reader bug: hostile input must map to
  // a FormatError kind).
  std::optional<Failure> read_failure(const std::filesystem::path& path, const gguf::ReadOptions& options = {});

  // The whole check of one hostile case: the kind, the path in the message, each of `mentions` in the
  // message, and no allocation larger than the file plus a small constant.
  void expect_kind(const std::string& name, const std::vector<uint8_t>& bytes, gguf::FormatErrorKind kind,
                   std::vector<std::string> mentions = {});

  TempDir dir_{"malformed"};
};

inline constexpr uint64_t kAllocationSlack = 64 * 1024;

}  // namespace skainet::test
