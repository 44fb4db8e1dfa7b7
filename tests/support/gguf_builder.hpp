// A byte-level GGUF writer for hostile-input tests: every field is written explicitly, so a test can
// produce exactly the broken file it describes (a wrong count, a lying length, a missing byte).
//
//   GgufBuilder b;
//   b.header(3, /*tensors=*/1, /*kvs=*/1).kv_u32("general.alignment", 32);
//   b.tensor_info("w", {8}, kF32, 0).pad_to(32).zeros(32);
//   write_file(dir / "case.gguf", b.bytes());
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace skainet::test {

// Raw ids as they appear in the file; kept independent of the reader's enums on purpose.
inline constexpr uint32_t kTypeU8 = 0, kTypeI8 = 1, kTypeU16 = 2, kTypeI16 = 3, kTypeU32 = 4, kTypeI32 = 5,
                          kTypeF32v = 6, kTypeBool = 7, kTypeString = 8, kTypeArray = 9, kTypeU64 = 10, kTypeI64 = 11,
                          kTypeF64 = 12;
inline constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ8_0 = 8, kQ4_K = 12;

class GgufBuilder {
 public:
  // Byte order of every multi-byte field written from here on (a big-endian file is a test case).
  GgufBuilder& big_endian(bool on = true) {
    big_endian_ = on;
    return *this;
  }

  GgufBuilder& raw(std::string_view s) {
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  GgufBuilder& u8(uint8_t v) {
    bytes_.push_back(v);
    return *this;
  }
  GgufBuilder& u16(uint16_t v) { return put(v, 2); }
  GgufBuilder& u32(uint32_t v) { return put(v, 4); }
  GgufBuilder& u64(uint64_t v) { return put(v, 8); }
  GgufBuilder& i32(int32_t v) { return put(static_cast<uint32_t>(v), 4); }
  GgufBuilder& f32(float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return put(u, 4);
  }
  GgufBuilder& f64(double v) {
    uint64_t u;
    std::memcpy(&u, &v, 8);
    return put(u, 8);
  }
  // A GGUF string: u64 length, then the bytes (no terminator).
  GgufBuilder& str(std::string_view s) {
    u64(s.size());
    return raw(s);
  }

  GgufBuilder& magic() { return raw("GGUF"); }
  GgufBuilder& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    return magic().u32(version).u64(n_tensors).u64(n_kv);
  }

  GgufBuilder& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(kTypeU32).u32(v); }
  GgufBuilder& kv_u64(std::string_view key, uint64_t v) { return str(key).u32(kTypeU64).u64(v); }
  GgufBuilder& kv_i32(std::string_view key, int32_t v) { return str(key).u32(kTypeI32).i32(v); }
  GgufBuilder& kv_f32(std::string_view key, float v) { return str(key).u32(kTypeF32v).f32(v); }
  GgufBuilder& kv_bool(std::string_view key, bool v) { return str(key).u32(kTypeBool).u8(v ? 1 : 0); }
  GgufBuilder& kv_string(std::string_view key, std::string_view v) { return str(key).u32(kTypeString).str(v); }
  GgufBuilder& kv_array_u32(std::string_view key, std::initializer_list<uint32_t> items) {
    str(key).u32(kTypeArray).u32(kTypeU32).u64(items.size());
    for (uint32_t v : items) u32(v);
    return *this;
  }
  GgufBuilder& kv_array_string(std::string_view key, std::initializer_list<std::string_view> items) {
    str(key).u32(kTypeArray).u32(kTypeString).u64(items.size());
    for (std::string_view s : items) str(s);
    return *this;
  }

  GgufBuilder& tensor_info(std::string_view name, const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }

  GgufBuilder& pad_to(uint64_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(0);
    return *this;
  }
  GgufBuilder& zeros(size_t n) {
    bytes_.insert(bytes_.end(), n, 0);
    return *this;
  }
  GgufBuilder& fill(size_t n, uint8_t v) {
    bytes_.insert(bytes_.end(), n, v);
    return *this;
  }

  // Overwrites a little-endian u32/u64 already written (to make a count or length lie afterwards).
  GgufBuilder& patch_u32(size_t at, uint32_t v) { return patch(at, v, 4); }
  GgufBuilder& patch_u64(size_t at, uint64_t v) { return patch(at, v, 8); }

  size_t size() const noexcept { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const noexcept { return bytes_; }

 private:
  GgufBuilder& put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) {
      const int shift = big_endian_ ? 8 * (n - 1 - i) : 8 * i;
      bytes_.push_back(static_cast<uint8_t>(v >> shift));
    }
    return *this;
  }
  GgufBuilder& patch(size_t at, uint64_t v, int n) {
    if (at + n > bytes_.size()) throw std::out_of_range("patch past the end of the built bytes");
    for (int i = 0; i < n; ++i) bytes_[at + i] = static_cast<uint8_t>(v >> (8 * i));
    return *this;
  }

  std::vector<uint8_t> bytes_;
  bool big_endian_ = false;
};

// Writes the first n bytes to a new file at `path`. Removes, then creates: truncating and rewriting a
// file in place makes ext4 flush it on close, which tests writing one file thousands of times feel.
inline void write_file(const std::filesystem::path& path, const std::vector<uint8_t>& bytes, size_t n) {
  std::filesystem::remove(path);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(n));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}
inline void write_file(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  write_file(path, bytes, bytes.size());
}

}  // namespace skainet::test
