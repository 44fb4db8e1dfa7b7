// skainet::base — errors, overflow-checked arithmetic, files (read, map, atomic write), CPU features.
//
//   using namespace skainet;
//   uint64_t bytes = checked_mul(rows, row_bytes, "tensor 'tok_embd' data size");  // throws OverflowError
//   base::AtomicFile out("model.gguf");          // writes go to a temporary file beside the target
//   out.write(header.data(), header.size());
//   out.commit();                                // fsync + rename; without it the temp file is removed
//   try { ... } catch (Error& e) { e.add_context("loading model.gguf"); throw; }
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace skainet {

// Root of every error the library throws. Messages carry the numbers (file, key, tensor, offset,
// expected, found); add_context() prefixes where the error was crossing a layer.
class Error : public std::exception {
 public:
  explicit Error(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }
  const std::string& message() const noexcept { return message_; }
  // "loading model.gguf: tensor 'x' ..." — the outer layer names what it was doing.
  void add_context(std::string_view context);

 private:
  std::string message_;
};

class IoError : public Error { using Error::Error; };          // the OS refused (open, read, map, rename)
class OverflowError : public Error { using Error::Error; };    // size/offset arithmetic would overflow
class InvalidArgument : public Error { using Error::Error; };  // a caller or user asked for something impossible

template <class T>
T checked_add(T a, T b, std::string_view what) {
  T r;
  if (__builtin_add_overflow(a, b, &r)) throw OverflowError(std::string(what) + ": " + std::to_string(a) + " + " + std::to_string(b) + " overflows");
  return r;
}
template <class T>
T checked_mul(T a, T b, std::string_view what) {
  T r;
  if (__builtin_mul_overflow(a, b, &r)) throw OverflowError(std::string(what) + ": " + std::to_string(a) + " * " + std::to_string(b) + " overflows");
  return r;
}
// Rounds up to a multiple of `align` (a power of two or any positive number), overflow-checked.
uint64_t checked_align_up(uint64_t value, uint64_t align, std::string_view what);

namespace base {

// A read-only file opened for positioned reads. Counts every byte it reads so tests can prove that
// header-only work (plan, inspect) never touches tensor payload.
class FileReader {
 public:
  explicit FileReader(const std::filesystem::path& path);
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  const std::filesystem::path& path() const noexcept { return path_; }
  uint64_t size() const noexcept { return size_; }
  // Reads exactly n bytes at offset or throws IoError naming the file, offset and count.
  void read_at(uint64_t offset, void* dst, size_t n) const;
  uint64_t bytes_read() const noexcept { return bytes_read_; }
  int fd() const noexcept { return fd_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  mutable uint64_t bytes_read_ = 0;
};

// A read-only shared mapping of a byte range of a file. 64-bit offsets; any size the OS can map.
class FileMapping {
 public:
  FileMapping(const std::filesystem::path& path, uint64_t offset, uint64_t length);
  ~FileMapping();
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;

  const std::byte* data() const noexcept { return data_; }
  uint64_t size() const noexcept { return length_; }
  uint64_t file_offset() const noexcept { return offset_; }
  // Tells the OS the pages of [offset, offset+length) (relative to data()) are no longer needed.
  void release_pages(uint64_t offset, uint64_t length) noexcept;

 private:
  void* base_ = nullptr;        // page-aligned start actually mapped
  size_t base_length_ = 0;
  const std::byte* data_ = nullptr;
  uint64_t offset_ = 0;
  uint64_t length_ = 0;
};

// Writes a file atomically: bytes go to "<target>.tmp-<pid>-<n>" in the same directory; commit()
// flushes, fsyncs and renames over the target. Destroyed without commit(), the temp file is removed,
// so an interrupted writer never leaves a half file under the final name.
class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path target);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n);
  void write_zeros(uint64_t n);
  uint64_t position() const noexcept { return position_; }
  void commit();
  const std::filesystem::path& temp_path() const noexcept { return temp_; }

 private:
  std::filesystem::path target_;
  std::filesystem::path temp_;
  int fd_ = -1;
  uint64_t position_ = 0;
  bool committed_ = false;
  std::unique_ptr<char[]> buffer_;
  size_t buffered_ = 0;
  void flush_buffer();
};

// The number of threads to use when none is asked for: the physical cores among the CPUs this process
// may run on (its affinity mask, so a container's CPU limit is respected), at least 1.
unsigned default_threads() noexcept;

// ISA features of this CPU, detected once. Tests may override to exercise lower levels.
struct CpuFeatures {
  bool sse42 = false, avx = false, avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512vnni = false, avx512bf16 = false, avx_vnni = false;
  static const CpuFeatures& detected();
};

// A terminal progress bar on stderr; silent when stderr is not a terminal.
class Progress {
 public:
  Progress(std::string label, uint64_t total);
  ~Progress();
  void advance(uint64_t n);
  void finish();

 private:
  std::string label_;
  uint64_t total_, done_ = 0;
  int last_percent_ = -1;
  bool enabled_;
};

std::string format_bytes(uint64_t bytes);  // "6.2 MiB"

}  // namespace base
}  // namespace skainet
