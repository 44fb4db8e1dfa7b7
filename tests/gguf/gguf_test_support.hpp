// Helpers for the gguf tests: a temporary directory and a byte builder for hand-made GGUF files.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace skainet::gguf::testing {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("skainet-gguf-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Little-endian GGUF bytes, field by field, so tests can build exactly the malformation they need.
class Bytes {
 public:
  template <class T>
  Bytes& le(T v) {
    const auto* p = reinterpret_cast<const char*>(&v);
    data.insert(data.end(), p, p + sizeof v);
    return *this;
  }
  Bytes& u32(uint32_t v) { return le(v); }
  Bytes& u64(uint64_t v) { return le(v); }
  Bytes& str(std::string_view s) {
    u64(s.size());
    data.insert(data.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& preamble(uint32_t version, uint64_t tensors, uint64_t kvs) {
    return u32(0x46554747).u32(version).u64(tensors).u64(kvs);
  }
  Bytes& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(4).u32(v); }
  Bytes& kv_str(std::string_view key, std::string_view v) { return str(key).u32(8).str(v); }
  Bytes& tensor(std::string_view name, std::vector<uint64_t> shape, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(shape.size()));
    for (uint64_t d : shape) u64(d);
    return u32(type).u64(offset);
  }
  Bytes& pad_to(uint64_t alignment) {
    while (data.size() % alignment) data.push_back(0);
    return *this;
  }
  Bytes& zeros(size_t n) {
    data.insert(data.end(), n, 0);
    return *this;
  }
  size_t size() const { return data.size(); }
  // Removes, then creates: rewriting a truncated file in place makes ext4 flush it on close.
  void save(const std::filesystem::path& path) const {
    std::filesystem::remove(path);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
  }

  std::vector<char> data;
};

}  // namespace skainet::gguf::testing
