// A tiny fork-join over row ranges for the converters: one std::thread per chunk, joined before
// returning. Threads are started per tensor; with a few hundred tensors the start cost is noise
// next to the work, and nothing outlives the call (there is no shared pool yet).
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace skainet::convert::detail {

inline unsigned resolve_threads(unsigned requested) {
  if (requested != 0) return requested;
  return std::max(1u, std::thread::hardware_concurrency());
}

// Calls fn(begin, end) on contiguous pieces of [0, n) from up to `threads` threads, giving each at
// least min_per_thread items so small tensors stay on the calling thread. Rethrows the first error.
template <class Fn>
void parallel_for(uint64_t n, unsigned threads, uint64_t min_per_thread, const Fn& fn) {
  if (n == 0) return;
  const uint64_t by_size = std::max<uint64_t>(1, n / std::max<uint64_t>(1, min_per_thread));
  const unsigned workers = static_cast<unsigned>(std::min<uint64_t>({threads, by_size, n}));
  if (workers <= 1) {
    fn(uint64_t{0}, n);
    return;
  }
  std::exception_ptr error;
  std::mutex error_mutex;
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  const uint64_t chunk = (n + workers - 1) / workers;
  auto run = [&](uint64_t begin, uint64_t end) {
    try {
      fn(begin, end);
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  try {
    for (unsigned w = 1; w < workers; ++w) {
      const uint64_t begin = std::min(n, w * chunk), end = std::min(n, begin + chunk);
      if (begin < end) pool.emplace_back(run, begin, end);
    }
  } catch (...) {
    // A thread that could not start: the started ones reference this frame and, joinable, would
    // terminate the process when the vector is destroyed. Let them finish, then report.
    for (auto& t : pool) t.join();
    throw;
  }
  run(0, std::min(n, chunk));
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace skainet::convert::detail
