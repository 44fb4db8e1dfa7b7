// skainet::base — errors, overflow-checked arithmetic, files (read, map, atomic write), CPU features.
//
//   using namespace skainet;
//   uint64_t bytes = checked_mul(rows, row_bytes, "tensor 'tok_embd' data size");  // throws OverflowError
//   base::AtomicFile out("model.gguf");          // writes go to a temporary file beside the target
//   out.write(header.data(), header.size());
//   out.commit();                                // fsync + rename; without it the temp file is removed
//   try { ... } catch (Error& e) { e.add_context("loading model.gguf"); throw; }
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>

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

class IoError : public Error {
  using Error::Error;
};  // the OS refused (open, read, map, rename)
class OverflowError : public Error {
  using Error::Error;
};  // size/offset arithmetic would overflow
class InvalidArgument : public Error {
  using Error::Error;
};  // a caller or user asked for something impossible

template <class T>
T checked_add(T a, T b, std::string_view what) {
  T r;
  if (__builtin_add_overflow(a, b, &r))
    throw OverflowError(std::string(what) + ": " + std::to_string(a) + " + " + std::to_string(b) + " overflows");
  return r;
}
template <class T>
T checked_mul(T a, T b, std::string_view what) {
  T r;
  if (__builtin_mul_overflow(a, b, &r))
    throw OverflowError(std::string(what) + ": " + std::to_string(a) + " * " + std::to_string(b) + " overflows");
  return r;
}
// Rounds up to a multiple of `align` (a power of two or any positive number), overflow-checked.
uint64_t checked_align_up(uint64_t value, uint64_t align, std::string_view what);

namespace base {

// A map keyed by std::string that is looked up by std::string_view without building a string: the
// noexcept lookups (gguf::Header::find, load::LoadedModel::find, irpa::Archive::find) must not
// allocate, since a failed allocation in a noexcept function terminates the process.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
template <class T>
using StringMap = std::unordered_map<std::string, T, StringHash, std::equal_to<>>;

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
  uint64_t bytes_read() const noexcept { return bytes_read_.load(std::memory_order_relaxed); }
  int fd() const noexcept { return fd_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  mutable std::atomic<uint64_t> bytes_read_ = 0;  // read_at may run on several threads (the repack)
};

// Reads a whole user-named text file (a chat template, a prompt file) into memory. Refuses, with an
// IoError naming the file and `what` ("chat template", "prompt file"), anything that is not a regular
// file (a directory, a device such as /dev/zero, a FIFO, a socket: opened with O_NONBLOCK and checked
// with fstat before any read, so a FIFO never blocks) and a file above max_bytes (checked on its size
// and again while reading, so a file that grows meanwhile is refused too).
std::string read_text_file(const std::filesystem::path& path, std::string_view what, uint64_t max_bytes);
// "1 MiB", "64 MiB", "512 KiB", "100 bytes": a limit as the errors and docs state it.
std::string format_byte_limit(uint64_t bytes);

// A read-only shared mapping of a byte range of a file. 64-bit offsets; any size the OS can map.
// A file truncated or rewritten on disk while mapped is undefined behaviour (its pages may vanish):
// reading a vanished page raises SIGBUS. While a mapping lives, a SIGBUS handler (installed when the
// action is the default) turns that into "skainet: error: <file>: ..." on stderr and exit code 1,
// instead of a bare "Bus error".
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
  void* base_ = nullptr;  // page-aligned start actually mapped
  size_t base_length_ = 0;
  uint64_t base_offset_ = 0;  // file offset of base_
  std::string path_;          // read by the SIGBUS handler
  int slot_ = -1;             // in the SIGBUS handler's table; -1: not registered
  const std::byte* data_ = nullptr;
  uint64_t offset_ = 0;
  uint64_t length_ = 0;
};

// Writes a file atomically. The bytes go to an unnamed O_TMPFILE inode in the target's directory, so
// a writer killed even by SIGKILL leaves nothing behind; commit() flushes, fsyncs, links it under a
// temporary name, renames that over the target and fsyncs the directory. Where the filesystem has no
// O_TMPFILE, the temporary file is named "<target>.skainet-tmp-<pid>-<n>" from the start, and the
// next AtomicFile for the same target removes such files of processes that no longer exist.
// Destroyed without commit(), the temporary is removed. SIGTERM, SIGINT and SIGHUP (when their
// action is the default) remove live temporaries, then terminate the process as the signal would.
// Every step's failure is an IoError naming the target and the step (write, fsync, linkat, close,
// rename, the directory's fsync); up to the rename the target is untouched and nothing is left behind,
// after it the new file is complete in place (only its durability is in doubt).
class AtomicFile {
 public:
  enum class Temp : uint8_t { Unnamed, Named };  // Named: skip O_TMPFILE (tests, odd filesystems)
  explicit AtomicFile(std::filesystem::path target, Temp temp = Temp::Unnamed);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // IoError naming the target, the bytes needed and the bytes available when the filesystem has
  // less than `bytes` free for this user (statvfs f_bavail). Call before writing a known size.
  void require_space(uint64_t bytes) const;
  void write(const void* data, size_t n);
  void write_zeros(uint64_t n);
  uint64_t position() const noexcept { return position_; }
  void commit();
  // The temporary's name: empty while it is an unnamed O_TMPFILE inode.
  const std::filesystem::path& temp_path() const noexcept { return temp_; }
  bool unnamed() const noexcept { return unnamed_; }
  // The name prefix of this target's temporaries: "<target>.skainet-tmp-".
  static std::string temp_prefix(const std::filesystem::path& target);

 private:
  std::filesystem::path target_;
  std::filesystem::path temp_;
  int fd_ = -1;
  int slot_ = -1;  // index in the signal handler's table of named temporaries, -1: none
  bool unnamed_ = false;
  uint64_t position_ = 0;
  bool committed_ = false;
  std::unique_ptr<char[]> buffer_;
  size_t buffered_ = 0;
  void flush_buffer();
  void forget_temp() noexcept;
};

// The number of threads to use when none is asked for: the physical cores among the CPUs this process
// may run on (its affinity mask, so a container's CPU limit is respected), at least 1.
unsigned default_threads() noexcept;
// The CPU's nominal clock in Hz: cpufreq's maximum where the kernel exposes it, else the highest
// "cpu MHz" of /proc/cpuinfo (a virtual machine's usual only source); 0 when neither can be read.
double nominal_clock_hz() noexcept;

// ISA features of this CPU, detected once. Tests may override to exercise lower levels.
struct CpuFeatures {
  bool sse42 = false, avx = false, avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512vnni = false, avx512bf16 = false, avx_vnni = false;
  // AMX tiles with int8 dot products, and the OS saving their state (XCR0). Using them also needs the
  // process's permission (Linux arch_prctl), which the kernels ask for: see kernels/x86/dispatch.cpp.
  bool amx_int8 = false;
  bool amx_bf16 = false;  // AMX tiles with BF16 dot products (same OS state as amx_int8)
  static const CpuFeatures& detected();
};

// Where a long job (load, synth, quantize, export) stands, in bytes, as Progress prints it. Pure, so
// the wording is tested without a clock.
struct ProgressLine {
  std::string_view label, item;  // "quantize", the tensor at hand
  uint64_t done = 0, total = 0;
  double seconds = 0;  // since the job started
};
// A terminal's line: "quantize [####      ]  42% 312.0 MiB of 1.1 GiB  85.3 MiB/s  0:09 left  blk.3.ffn_up.weight"
std::string progress_bar_text(const ProgressLine& p);
// A log's line: "quantize: 42%, 312.0 MiB of 1.1 GiB, 85.3 MiB/s, 0:09 left, at blk.3.ffn_up.weight"
std::string progress_log_text(const ProgressLine& p);
// The end: "quantize: 1.1 GiB in 13.2 s (85.3 MiB/s)"
std::string progress_done_text(const ProgressLine& p);

// A long job's progress on stderr. On a terminal one line redrawn in place (at most 10 times a
// second), the summary in its place at the end. Piped, a plain line every few seconds, so a log shows
// the job alive and how far it is, and the summary when a line was printed (a short job stays
// silent). Callers make none under --quiet.
class Progress {
 public:
  enum class Output { Auto, Terminal, Log };  // Auto: Terminal when the stream is a terminal
  struct Options {
    std::FILE* stream = nullptr;  // stderr
    Output output = Output::Auto;
    double log_every_seconds = 5.0;
  };
  Progress(std::string label, uint64_t total);
  Progress(std::string label, uint64_t total, Options options);
  ~Progress();                       // a job that did not finish: the terminal's line ended, no summary
  void item(std::string_view name);  // what the job works on now
  void advance(uint64_t n);
  void finish();  // the job is done: its summary

 private:
  ProgressLine line() const;
  void print(bool force);
  std::string label_, item_;
  uint64_t total_, done_ = 0;
  std::FILE* stream_;
  bool terminal_, printed_ = false, finished_ = false;
  double log_every_;
  std::chrono::steady_clock::time_point start_, last_print_;
};

std::string format_bytes(uint64_t bytes);  // "6.2 MiB"

// The memory the kernel says can be given to a new workload without swapping: MemAvailable of
// /proc/meminfo (or the text of `meminfo`, for tests). nullopt where it cannot be read.
std::optional<uint64_t> available_memory(std::string_view meminfo = {});

}  // namespace base
}  // namespace skainet
