// Counts what operator new hands out in this test binary, so a test can prove that reading a hostile
// header never allocates in proportion to a count or length the file merely claims.
//
//   AllocWatch watch;
//   read_header(path);                 // or the throw
//   AllocStats s = watch.stop();       // s.peak_live: most bytes live at once above the start
#pragma once

#include <cstdint>

namespace skainet::test {

struct AllocStats {
  uint64_t peak_live = 0;  // highest live bytes above the level when the watch started
  uint64_t largest = 0;    // largest single request
  uint64_t count = 0;      // number of requests
};

// False where the global operator new is not ours (under AddressSanitizer, which brings its own).
bool alloc_guard_active() noexcept;

// One watch at a time; the test binary is single-threaded.
class AllocWatch {
 public:
  AllocWatch() noexcept;
  ~AllocWatch();
  AllocStats stop() noexcept;

 private:
  bool running_ = true;
};

}  // namespace skainet::test
