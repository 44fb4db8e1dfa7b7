// Process-wide heap accounting for tests (malloc family and operator new, any thread), made by
// interposing malloc in the test binary (COUNT_ALLOCATIONS in tests/CMakeLists.txt). Not available
// under a sanitizer, which owns malloc itself: there every number reads 0 and tests skip their checks.
//
//   const uint64_t before = allocation_count();
//   step();
//   EXPECT_EQ(allocation_count() - before, 0u);
//
//   AllocWatch watch;                  // what reading a hostile header costs
//   read_header(path);
//   AllocStats s = watch.stop();       // s.peak_live, s.largest, s.count
#pragma once

#include <cstdint>

namespace skainet::test {

bool allocation_counter_available() noexcept;
// Allocation requests since the process started (realloc counts as one).
uint64_t allocation_count() noexcept;

struct AllocStats {
  uint64_t peak_live = 0;  // most bytes live at once above the level when the watch started
  uint64_t largest = 0;    // largest single request, seen even if it failed
  uint64_t count = 0;      // number of requests
};

// Watches from construction to stop() (or destruction). One watch at a time: starting one resets the
// peak and the largest request.
class AllocWatch {
 public:
  AllocWatch() noexcept;
  ~AllocWatch();
  AllocWatch(const AllocWatch&) = delete;
  AllocWatch& operator=(const AllocWatch&) = delete;
  // Ends the watch; later calls return the same numbers.
  AllocStats stop() noexcept;

 private:
  uint64_t start_count_ = 0;
  bool running_ = true;
  AllocStats stats_;
};

}  // namespace skainet::test
