#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "skainet/core/base.hpp"

namespace skainet::base {
namespace {

std::string os_error(int err) { return std::strerror(err); }

std::string_view file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "of an unknown kind";
}

// Opens a regular file for reading. O_NONBLOCK because open() of a FIFO without it waits for a writer
// forever; the type is checked on the open descriptor (no stat/open race), then
// the flag is cleared, having no effect on regular files anyway.
int open_regular(const std::filesystem::path& path, std::string_view what, struct stat* st) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) throw IoError(fmt::format("{}: cannot open{}: {}", path.string(), what, os_error(errno)));
  if (::fstat(fd, st) != 0) {
    const int err = errno;
    ::close(fd);
    throw IoError(fmt::format("{}: cannot stat: {}", path.string(), os_error(err)));
  }
  if (!S_ISREG(st->st_mode)) {
    ::close(fd);
    throw IoError(
        fmt::format("{}: cannot read it: it is {}, not a regular file", path.string(), file_kind(st->st_mode)));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace

FileReader::FileReader(const std::filesystem::path& path) : path_(path) {
  struct stat st {};
  fd_ = open_regular(path, "", &st);
  size_ = static_cast<uint64_t>(st.st_size);
}

FileReader::~FileReader() {
  if (fd_ >= 0) ::close(fd_);
}

void FileReader::read_at(uint64_t offset, void* dst, size_t n) const {
  auto* out = static_cast<char*>(dst);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd_, out + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw IoError(
          fmt::format("{}: read of {} bytes at offset {} failed: {}", path_.string(), n, offset, os_error(errno)));
    }
    if (r == 0)
      throw IoError(fmt::format("{}: unexpected end of file reading {} bytes at offset {} (file size {})",
                                path_.string(), n, offset, size_));
    done += static_cast<size_t>(r);
  }
  bytes_read_.fetch_add(n, std::memory_order_relaxed);
}

std::string format_byte_limit(uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} bytes", bytes);
}

std::string read_text_file(const std::filesystem::path& path, std::string_view what, uint64_t max_bytes) {
  // As open_regular, with errors that say which input the file was.
  struct stat st {};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) throw IoError(fmt::format("{}: cannot open the {}: {}", path.string(), what, os_error(errno)));
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw IoError(fmt::format("{}: cannot stat the {}: {}", path.string(), what, os_error(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw IoError(fmt::format("{}: cannot read it as the {}: it is {}, not a regular file", path.string(), what,
                              file_kind(st.st_mode)));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  const auto too_big = [&](uint64_t size) {
    return IoError(fmt::format("{}: the {} is {} bytes, above the limit of {} for a {}", path.string(), what, size,
                               format_byte_limit(max_bytes), what));
  };
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    throw too_big(static_cast<uint64_t>(st.st_size));
  }
  std::string text;
  text.resize(static_cast<size_t>(st.st_size) + 1);  // one more byte: sees a file that grew
  size_t done = 0;
  for (;;) {
    if (done == text.size()) {
      if (text.size() > max_bytes) {
        ::close(fd);
        throw too_big(text.size());
      }
      text.resize(std::min<uint64_t>(max_bytes + 1, text.size() * 2 + 4096));
    }
    const ssize_t r = ::read(fd, text.data() + done, text.size() - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw IoError(fmt::format("{}: cannot read the {}: {}", path.string(), what, os_error(err)));
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  ::close(fd);
  if (done > max_bytes) throw too_big(done);
  text.resize(done);
  return text;
}

namespace {

// Live mappings for the SIGBUS handler: fixed slots it can read without locks or allocation.
constexpr size_t kMappingSlots = 256;
struct MappingSlot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 live
  uintptr_t begin = 0, end = 0;
  uint64_t file_offset = 0;
  const char* path = nullptr;
};
MappingSlot g_mappings[kMappingSlots];

void write_all(const char* s, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}
void write_str(const char* s) { write_all(s, std::strlen(s)); }
void write_u64(uint64_t v) {
  char buf[24];
  char* p = buf + sizeof buf;
  do {
    *--p = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  write_all(p, static_cast<size_t>(buf + sizeof buf - p));
}

// Async-signal-safe: atomics, write(2), _exit, sigaction and raise only.
extern "C" void on_sigbus(int sig, siginfo_t* info, void*) {
  const auto addr = reinterpret_cast<uintptr_t>(info ? info->si_addr : nullptr);
  for (const MappingSlot& s : g_mappings) {
    if (s.state.load(std::memory_order_acquire) != 2 || addr < s.begin || addr >= s.end) continue;
    write_str("skainet: error: ");
    write_str(s.path);
    write_str(": the mapped file was truncated or rewritten on disk while in use (bus error reading file offset ");
    write_u64(s.file_offset + (addr - s.begin));
    write_str("); do not modify a model file while it runs\n");
    ::_exit(1);
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);  // not ours: the default action, delivered when the handler returns
}

void install_sigbus_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction old {};
    if (::sigaction(SIGBUS, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) return;
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, nullptr);
  });
}

int register_mapping(const void* base, size_t length, uint64_t file_offset, const std::string& path) {
  install_sigbus_handler();
  for (size_t i = 0; i < kMappingSlots; ++i) {
    int expected = 0;
    if (!g_mappings[i].state.compare_exchange_strong(expected, 1)) continue;
    g_mappings[i].begin = reinterpret_cast<uintptr_t>(base);
    g_mappings[i].end = g_mappings[i].begin + length;
    g_mappings[i].file_offset = file_offset;
    g_mappings[i].path = path.c_str();
    g_mappings[i].state.store(2, std::memory_order_release);
    return static_cast<int>(i);
  }
  return -1;  // more mappings at once than slots: that one keeps the plain default SIGBUS
}

}  // namespace

FileMapping::FileMapping(const std::filesystem::path& path, uint64_t offset, uint64_t length)
    : offset_(offset), length_(length) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t base_offset = offset - offset % page;
  const uint64_t span = checked_add<uint64_t>(length, offset - base_offset, "mapping length");
  if (span > std::numeric_limits<size_t>::max())
    throw IoError(fmt::format("{}: {} bytes cannot be mapped", path.string(), span));
  struct stat st {};
  const int fd = open_regular(path, " for mapping", &st);
  base_length_ = span == 0 ? 1 : static_cast<size_t>(span);
  void* p = ::mmap(nullptr, base_length_, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(base_offset));
  const int err = errno;
  ::close(fd);  // the mapping keeps its own reference to the file
  if (p == MAP_FAILED)
    throw IoError(
        fmt::format("{}: cannot map {} bytes at offset {}: {}", path.string(), length, offset, os_error(err)));
  base_ = p;
  base_offset_ = base_offset;
  data_ = static_cast<const std::byte*>(p) + (offset - base_offset);
  path_ = path.string();
  slot_ = register_mapping(base_, base_length_, base_offset_, path_);
}

FileMapping::~FileMapping() {
  if (slot_ >= 0) g_mappings[static_cast<size_t>(slot_)].state.store(0, std::memory_order_release);
  if (base_) ::munmap(base_, base_length_);
}

void FileMapping::release_pages(uint64_t offset, uint64_t length) noexcept {
  if (!base_ || length == 0) return;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<uintptr_t>(data_) + offset;
  const uintptr_t first = (start + page - 1) / page * page;  // only whole pages inside the range
  const uintptr_t end = (start + length) / page * page;
  if (end > first) ::madvise(reinterpret_cast<void*>(first), end - first, MADV_DONTNEED);
}

}  // namespace skainet::base
