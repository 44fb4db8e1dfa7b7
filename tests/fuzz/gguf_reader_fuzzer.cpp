// libFuzzer target for gguf::read_header. Each input becomes a file (an in-memory memfd, reached by
// its /proc path, since the reader works on files) and is read with data bounds checked; the only
// acceptable failure is a skainet::Error. Anything else (a crash, a sanitizer report, another
// exception type) is a finding.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "skainet/gguf.hpp"

namespace {

struct MemFile {
  int fd = -1;
  std::string path;

  MemFile() {
    fd = ::memfd_create("gguf-fuzz-input", MFD_CLOEXEC);
    if (fd < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path = "/proc/self/fd/" + std::to_string(fd);
  }

  void assign(const uint8_t* data, size_t size) {
    if (::ftruncate(fd, 0) != 0) std::abort();
    size_t done = 0;
    while (done < size) {
      const ssize_t w = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
      if (w <= 0) std::abort();
      done += static_cast<size_t>(w);
    }
  }
};

void read_and_use(const std::string& path, const skainet::gguf::ReadOptions& options) {
  try {
    const skainet::gguf::Header h = skainet::gguf::read_header(path, options);
    // Touch what a caller would, so a header that passed validation but holds a bad value shows up.
    for (const skainet::gguf::TensorInfo& t : h.tensors) {
      if (t.file_offset < h.data_offset) std::abort();
      if (options.check_data_bounds && t.file_offset + t.bytes > h.file_size) std::abort();
      (void)h.find_tensor(t.name);
    }
    for (const skainet::gguf::KeyValue& kv : h.metadata) {
      if (h.find(kv.key) == nullptr) std::abort();
      if (!kv.value.is_array()) (void)skainet::gguf::to_string(kv.value.scalar);
    }
    (void)h.find_u32("general.alignment");
  } catch (const skainet::Error&) {
    // Malformed input is expected to end here.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static MemFile file;
  file.assign(data, size);
  skainet::gguf::ReadOptions strict;
  read_and_use(file.path, strict);
  skainet::gguf::ReadOptions lax;  // the path tools take on damaged files
  lax.check_data_bounds = false;
  read_and_use(file.path, lax);
  return 0;
}
