#include "gguf/cursor.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace skainet::gguf::detail {

std::string located(const base::FileReader& file, uint64_t offset, std::string_view context, std::string_view detail) {
  return fmt::format("{}: offset {}: {}: {}", file.path().string(), offset, context, detail);
}

Cursor::Cursor(const base::FileReader& file, const std::string& context)
    : file_(file), context_(context), size_(file.size()), buffer_(std::make_unique<char[]>(kChunk)) {}

void Cursor::truncated(size_t n, std::string_view what) const {
  throw FormatError(FormatErrorKind::Truncated,
                    located(file_, pos_, context_,
                            fmt::format("truncated: {} needs {} bytes, but the file ends at byte {} ({} remain)", what,
                                        n, size_, size_ - pos_)));
}

void Cursor::read(void* dst, size_t n, std::string_view what) {
  if (n > remaining()) truncated(n, what);
  auto* out = static_cast<char*>(dst);
  while (n > 0) {
    const uint64_t buffer_end = buffer_start_ + buffer_len_;
    if (pos_ >= buffer_start_ && pos_ < buffer_end) {
      const size_t take = static_cast<size_t>(std::min<uint64_t>(n, buffer_end - pos_));
      std::memcpy(out, buffer_.get() + (pos_ - buffer_start_), take);
      out += take;
      pos_ += take;
      n -= take;
      continue;
    }
    if (n >= kChunk) {  // a long field: no point staging it, and no read-ahead past it
      file_.read_at(pos_, out, n);
      pos_ += n;
      return;
    }
    buffer_start_ = pos_;
    buffer_len_ = static_cast<size_t>(std::min<uint64_t>(kChunk, remaining()));
    file_.read_at(pos_, buffer_.get(), buffer_len_);
  }
}

}  // namespace skainet::gguf::detail
