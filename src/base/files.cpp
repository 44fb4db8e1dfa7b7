#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "skainet/base.hpp"

namespace skainet::base {
namespace {

std::string os_error(int err) { return std::strerror(err); }

}  // namespace

FileReader::FileReader(const std::filesystem::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw IoError(fmt::format("{}: cannot open: {}", path.string(), os_error(errno)));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    throw IoError(fmt::format("{}: cannot stat: {}", path.string(), os_error(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw IoError(fmt::format("{}: not a regular file", path.string()));
  }
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
      throw IoError(fmt::format("{}: read of {} bytes at offset {} failed: {}", path_.string(), n, offset,
                                os_error(errno)));
    }
    if (r == 0)
      throw IoError(fmt::format("{}: unexpected end of file reading {} bytes at offset {} (file size {})",
                                path_.string(), n, offset, size_));
    done += static_cast<size_t>(r);
  }
  bytes_read_ += n;
}

FileMapping::FileMapping(const std::filesystem::path& path, uint64_t offset, uint64_t length)
    : offset_(offset), length_(length) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t base_offset = offset - offset % page;
  const uint64_t span = checked_add<uint64_t>(length, offset - base_offset, "mapping length");
  if (span > std::numeric_limits<size_t>::max()) throw IoError(fmt::format("{}: {} bytes cannot be mapped", path.string(), span));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(fmt::format("{}: cannot open for mapping: {}", path.string(), os_error(errno)));
  base_length_ = span == 0 ? 1 : static_cast<size_t>(span);
  void* p = ::mmap(nullptr, base_length_, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(base_offset));
  const int err = errno;
  ::close(fd);  // the mapping keeps its own reference to the file
  if (p == MAP_FAILED)
    throw IoError(fmt::format("{}: cannot map {} bytes at offset {}: {}", path.string(), length, offset, os_error(err)));
  base_ = p;
  data_ = static_cast<const std::byte*>(p) + (offset - base_offset);
}

FileMapping::~FileMapping() {
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

namespace {
constexpr size_t kWriteBuffer = 4u << 20;
std::atomic<unsigned> temp_counter{0};
}  // namespace

AtomicFile::AtomicFile(std::filesystem::path target) : target_(std::move(target)) {
  temp_ = target_;
  temp_ += fmt::format(".tmp-{}-{}", ::getpid(), temp_counter.fetch_add(1));
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) throw IoError(fmt::format("{}: cannot create temporary file {}: {}", target_.string(), temp_.string(), os_error(errno)));
  buffer_ = std::make_unique<char[]>(kWriteBuffer);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFile::flush_buffer() {
  size_t done = 0;
  while (done < buffered_) {
    const ssize_t w = ::write(fd_, buffer_.get() + done, buffered_ - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw IoError(fmt::format("{}: write failed at offset {}: {}", temp_.string(), position_ - buffered_ + done, os_error(errno)));
    }
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
  if (::fsync(fd_) != 0) throw IoError(fmt::format("{}: fsync failed: {}", temp_.string(), os_error(errno)));
  ::close(fd_);
  fd_ = -1;
  if (::rename(temp_.c_str(), target_.c_str()) != 0)
    throw IoError(fmt::format("{}: cannot rename {} over it: {}", target_.string(), temp_.string(), os_error(errno)));
  committed_ = true;
}

}  // namespace skainet::base
