// One fuzz target, driven two ways: by libFuzzer under `make fuzz` (clang, coverage-guided) and by a
// replay test in the default suite (any compiler, seeded mutations; see fuzz_replay.hpp).
//
//   // tests/fuzz/widget_fuzzer.cpp
//   namespace skainet::fuzz {
//   int widget_one_input(const uint8_t* data, size_t size) { ... return 0; }
//   std::vector<Bytes> widget_seeds() { ... }
//   }  // namespace skainet::fuzz
//   SKAINET_FUZZ_ENTRY(skainet::fuzz::widget_one_input, skainet::fuzz::widget_seeds)
//
// A GoogleTest binary can hold only one LLVMFuzzerTestOneInput, and one binary replays several
// targets, so the libFuzzer entry points exist only where the fuzz build defines SKAINET_LIBFUZZER
// (tests/fuzz/CMakeLists.txt); the replay tests call the named functions.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace skainet::fuzz {

using Bytes = std::vector<uint8_t>;

// A broken invariant: print what and abort, so libFuzzer saves the input and a replay test dies loudly.
[[noreturn]] inline void fail(const char* target, const char* what) {
  std::fprintf(stderr, "%s: invariant broken: %s\n", target, what);
  std::abort();
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

inline Bytes bytes_of(std::string_view s) { return Bytes(s.begin(), s.end()); }

inline Bytes read_file(const std::filesystem::path& path, uint64_t max_bytes = UINT64_MAX) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "fuzz: cannot read %s\n", path.c_str());
    std::abort();
  }
  Bytes b;
  char c;
  while (b.size() < max_bytes && f.get(c)) b.push_back(static_cast<uint8_t>(c));
  return b;
}

// The readers take files: each input becomes an in-memory file reached by its /proc path.
struct MemFile {
  int fd = -1;
  std::string path;

  MemFile() {
    fd = ::memfd_create("skainet-fuzz-input", MFD_CLOEXEC);
    if (fd < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path = "/proc/self/fd/" + std::to_string(fd);
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

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

// libFuzzer starts from the seeds a target makes itself: with SKAINET_FUZZ_SEED_DIR set (run_fuzzer.sh
// does), LLVMFuzzerInitialize writes them there before the corpus directories are read.
inline void write_seeds(const std::vector<Bytes>& seeds) {
  const char* dir = std::getenv("SKAINET_FUZZ_SEED_DIR");
  if (dir == nullptr || *dir == '\0') return;
  std::filesystem::create_directories(dir);
  for (size_t i = 0; i < seeds.size(); ++i) {
    std::ofstream f(std::filesystem::path(dir) / ("seed-" + std::to_string(i)), std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(seeds[i].data()), static_cast<std::streamsize>(seeds[i].size()));
  }
}

}  // namespace skainet::fuzz

#ifdef SKAINET_LIBFUZZER
#define SKAINET_FUZZ_ENTRY(one_input, seeds)                                                                \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return one_input(data, size); } \
  extern "C" int LLVMFuzzerInitialize(int*, char***) {                                                      \
    skainet::fuzz::write_seeds(seeds());                                                                    \
    return 0;                                                                                               \
  }
#else
#define SKAINET_FUZZ_ENTRY(one_input, seeds)
#endif
