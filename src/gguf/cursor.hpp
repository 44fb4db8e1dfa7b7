// A forward-only, buffered cursor over a FileReader for header parsing. It reads in small chunks so
// that the bytes it touches stay within one chunk of the header's end, and it reads large fields
// (long strings) straight into their destination.
#pragma once

#include <bit>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "skainet/io/gguf.hpp"

namespace skainet::gguf::detail {

static_assert(std::endian::native == std::endian::little, "GGUF fields are read by memcpy on a little-endian host");

class Cursor {
 public:
  static constexpr size_t kChunk = 8192;

  // `context` names what is being parsed (owned by the caller, read only when an error is thrown).
  Cursor(const base::FileReader& file, const std::string& context);

  uint64_t position() const noexcept { return pos_; }
  uint64_t file_size() const noexcept { return size_; }
  uint64_t remaining() const noexcept { return size_ - pos_; }

  // Exactly n bytes or FormatError(Truncated) naming `what`.
  void read(void* dst, size_t n, std::string_view what);

  template <class T>
  T read_le(std::string_view what) {
    T v;
    read(&v, sizeof v, what);
    return v;
  }

 private:
  [[noreturn]] void truncated(size_t n, std::string_view what) const;

  const base::FileReader& file_;
  const std::string& context_;
  uint64_t size_;
  uint64_t pos_ = 0;
  std::unique_ptr<char[]> buffer_;
  uint64_t buffer_start_ = 0;
  size_t buffer_len_ = 0;
};

// "<file>: offset <n>: <context>: <detail>" — every reader message starts this way.
std::string located(const base::FileReader& file, uint64_t offset, std::string_view context, std::string_view detail);

}  // namespace skainet::gguf::detail
