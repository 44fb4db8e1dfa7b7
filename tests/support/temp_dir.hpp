// A scratch directory for one test (or one fixture instance), removed with everything in it when the
// object goes, including after a failed ASSERT.
//
//   TempDir dir("gguf");                   // /tmp/skainet-gguf-<pid>-<n>, fresh and empty
//   write_file(dir / "case.gguf", bytes);
//
// The pid keeps concurrent test binaries (ctest -j) apart; the per-process counter keeps instances
// of one binary apart.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace skainet::test {

class TempDir {
 public:
  explicit TempDir(std::string_view tag = "test") {
    static std::atomic<unsigned> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("skainet-" + std::string(tag) + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);  // a leftover of an earlier process with the same pid
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const noexcept { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace skainet::test
