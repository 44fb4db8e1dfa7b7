// AtomicFile, and the process-wide cleanup of its temporaries on SIGTERM, SIGINT and SIGHUP.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "skainet/core/base.hpp"

namespace skainet::base {
namespace {

constexpr size_t kWriteBuffer = 4u << 20;
std::atomic<unsigned> temp_counter{0};

std::string os_error(int err) { return std::strerror(err); }

// Named temporaries the signal handler must remove. Fixed slots of fixed size: the handler only reads
// them (async-signal-safe: atomics and unlink), and registering never allocates.
constexpr size_t kSlots = 64;
constexpr size_t kMaxPath = 4096;
struct Slot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 live
  char path[kMaxPath];
};
std::array<Slot, kSlots> g_slots;

constexpr std::array<int, 3> kSignals = {SIGTERM, SIGINT, SIGHUP};

extern "C" void remove_temporaries_and_reraise(int sig) {
  for (Slot& s : g_slots)
    if (s.state.load(std::memory_order_acquire) == 2) ::unlink(s.path);
  // The default action (terminate) with the signal's own status, as if we had never caught it. The
  // signal stays blocked inside the handler, so it is delivered when the handler returns.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

// Only where the action is still the default: a process started under nohup (SIGHUP ignored) or one
// with its own handler keeps it.
void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : kSignals) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) continue;
      struct sigaction sa {};
      sa.sa_handler = remove_temporaries_and_reraise;
      sigemptyset(&sa.sa_mask);
      for (int other : kSignals) sigaddset(&sa.sa_mask, other);  // one cleanup at a time
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

int register_temp(const std::filesystem::path& p) {
  const std::string& s = p.native();
  if (s.size() + 1 > kMaxPath) return -1;
  for (size_t i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (!g_slots[i].state.compare_exchange_strong(expected, 1)) continue;
    std::memcpy(g_slots[i].path, s.c_str(), s.size() + 1);
    g_slots[i].state.store(2, std::memory_order_release);
    return static_cast<int>(i);
  }
  return -1;  // more than kSlots files at once: still removed by the destructor, not on a signal
}

void unregister_temp(int slot) noexcept {
  if (slot >= 0) g_slots[static_cast<size_t>(slot)].state.store(0, std::memory_order_release);
}

// Removes "<target>.skainet-tmp-<pid>-<n>" files left by processes that are gone (killed by SIGKILL
// on a filesystem without O_TMPFILE). A pid that exists (even reused) keeps its file: never guess.
void remove_stale_temporaries(const std::filesystem::path& target) {
  const std::filesystem::path dir = target.parent_path().empty() ? "." : target.parent_path();
  const std::string prefix = AtomicFile::temp_prefix(target.filename());
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (!name.starts_with(prefix)) continue;
    const std::string_view rest = name.substr(prefix.size());
    long pid = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
    if (ec != std::errc{} || pid <= 0 || end == rest.data() + rest.size() || *end != '-') continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    ::unlinkat(::dirfd(d), e->d_name, 0);
  }
  ::closedir(d);
}

// The rename is only durable once the directory holding the new entry is on disk: a crash before
// that can bring back the old file (or none). A failure here is an error like any failed fsync — the
// caller's "written" would otherwise be a promise the disk did not make — though the new file is
// already complete under its name. Closing a read-only directory descriptor loses nothing, so its
// result is not an error.
void fsync_directory(const std::filesystem::path& target) {
  const std::filesystem::path dir = target.parent_path().empty() ? "." : target.parent_path();
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    throw IoError(
        fmt::format("{}: written and renamed into place, but its directory {} cannot be opened to fsync it: {}",
                    target.string(), dir.string(), os_error(errno)));
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    throw IoError(
        fmt::format("{}: written and renamed into place, but fsync of its directory {} failed: {} "
                    "(the new name may not survive a crash)",
                    target.string(), dir.string(), os_error(err)));
  }
  ::close(fd);
}

}  // namespace

std::string AtomicFile::temp_prefix(const std::filesystem::path& target) { return target.string() + ".skainet-tmp-"; }

AtomicFile::AtomicFile(std::filesystem::path target, Temp temp) : target_(std::move(target)) {
  install_handlers();
  remove_stale_temporaries(target_);
  const std::filesystem::path dir = target_.parent_path().empty() ? "." : target_.parent_path();
  if (temp == Temp::Unnamed) {
    fd_ = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    // EOPNOTSUPP/EISDIR/EINVAL: the filesystem (or kernel) has no O_TMPFILE; fall back to a name.
    if (fd_ < 0 && errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
      throw IoError(
          fmt::format("{}: cannot create a temporary file in {}: {}", target_.string(), dir.string(), os_error(errno)));
    unnamed_ = fd_ >= 0;
  }
  if (!unnamed_) {
    temp_ = temp_prefix(target_) + fmt::format("{}-{}", ::getpid(), temp_counter.fetch_add(1));
    slot_ = register_temp(temp_);  // before the file exists: a signal in between unlinks nothing
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      const int err = errno;
      forget_temp();
      throw IoError(
          fmt::format("{}: cannot create temporary file {}: {}", target_.string(), temp_.string(), os_error(err)));
    }
  }
  buffer_ = std::make_unique<char[]>(kWriteBuffer);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
  forget_temp();
}

void AtomicFile::forget_temp() noexcept {
  unregister_temp(slot_);
  slot_ = -1;
}

void AtomicFile::require_space(uint64_t bytes) const {
  struct statvfs st {};
  if (::fstatvfs(fd_, &st) != 0) return;  // no answer: the writes themselves will report ENOSPC
  const uint64_t available = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  if (available < bytes)
    throw IoError(
        fmt::format("{}: not enough free space: writing it needs {} bytes ({}), its filesystem has {} ({}) available",
                    target_.string(), bytes, format_bytes(bytes), available, format_bytes(available)));
}

void AtomicFile::flush_buffer() {
  size_t done = 0;
  while (done < buffered_) {
    const ssize_t w = ::write(fd_, buffer_.get() + done, buffered_ - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw IoError(fmt::format("{}: write failed at offset {}: {}", target_.string(), position_ - buffered_ + done,
                                os_error(errno)));
    }
    // A short write is not an error: write the rest. Zero bytes for a non-empty request would repeat
    // forever, so it is one (a regular file never does it; a broken filesystem or injector might).
    if (w == 0)
      throw IoError(fmt::format("{}: write failed at offset {}: wrote 0 of {} bytes", target_.string(),
                                position_ - buffered_ + done, buffered_ - done));
    done += static_cast<size_t>(w);
  }
  buffered_ = 0;
}

void AtomicFile::write(const void* data, size_t n) {
  if (committed_) throw InvalidArgument(fmt::format("{}: write after commit", target_.string()));
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const size_t take = std::min(n, kWriteBuffer - buffered_);
    std::memcpy(buffer_.get() + buffered_, p, take);
    buffered_ += take;
    position_ += take;
    p += take;
    n -= take;
    if (buffered_ == kWriteBuffer) flush_buffer();
  }
}

void AtomicFile::write_zeros(uint64_t n) {
  static const char zeros[4096] = {};
  while (n > 0) {
    const size_t take = static_cast<size_t>(std::min<uint64_t>(n, sizeof zeros));
    write(zeros, take);
    n -= take;
  }
}

void AtomicFile::commit() {
  flush_buffer();
  if (::fsync(fd_) != 0) throw IoError(fmt::format("{}: fsync failed: {}", target_.string(), os_error(errno)));
  if (unnamed_) {
    // linkat cannot replace an existing target, so the inode gets a temporary name first (registered,
    // so a signal in the window removes it) and is renamed over the target like a named temporary.
    temp_ = temp_prefix(target_) + fmt::format("{}-{}", ::getpid(), temp_counter.fetch_add(1));
    slot_ = register_temp(temp_);
    const std::string proc = fmt::format("/proc/self/fd/{}", fd_);
    if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, temp_.c_str(), AT_SYMLINK_FOLLOW) != 0 &&
        ::linkat(fd_, "", AT_FDCWD, temp_.c_str(), AT_EMPTY_PATH) != 0) {
      const int err = errno;
      temp_.clear();
      forget_temp();
      throw IoError(
          fmt::format("{}: cannot give the temporary file a name (linkat): {}", target_.string(), os_error(err)));
    }
  }
  const int fd = fd_;
  fd_ = -1;
  // close() can report a write-back error that neither write() nor fsync() did (NFS, quotas); the
  // descriptor is gone either way, and the named temporary is removed by the destructor.
  if (::close(fd) != 0)
    throw IoError(fmt::format("{}: close failed on the temporary file {}: {}", target_.string(), temp_.string(),
                              os_error(errno)));
  if (::rename(temp_.c_str(), target_.c_str()) != 0)
    throw IoError(fmt::format("{}: cannot rename {} over it: {}", target_.string(), temp_.string(), os_error(errno)));
  committed_ = true;
  forget_temp();
  fsync_directory(target_);
}

}  // namespace skainet::base
