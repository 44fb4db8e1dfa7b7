// skainet::base::ThreadPool — a fixed set of worker threads for data-parallel kernels.
//
//   base::ThreadPool pool(4);                       // the caller plus 3 workers
//   pool.parallel_for(rows, 8, [&](int64_t begin, int64_t end) noexcept { work(begin, end); });
//
// A dispatch allocates nothing: the callable stays on the caller's stack and the workers get a plain
// function pointer and a context pointer (no std::function). The caller works too and returns when
// every chunk is done. A parallel_for called from inside a task runs inline.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace skainet::base {

class ThreadPool {
 public:
  using TaskFn = void (*)(void* context, int64_t begin, int64_t end) noexcept;

  explicit ThreadPool(int threads = 1);  // total threads taking part, caller included (at least 1)
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const noexcept { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(context, begin, end) over [0, n) in chunks of `grain` items (at least 1); where it runs
  // inline (one thread, a nested call, a single chunk) as one call over [0, n).
  void run(int64_t n, int64_t grain, TaskFn fn, void* context) noexcept;

  template <class F>
  void parallel_for(int64_t n, int64_t grain, F&& f) noexcept {
    using Fn = std::remove_reference_t<F>;
    run(
        n, grain, [](void* c, int64_t b, int64_t e) noexcept { (*static_cast<Fn*>(c))(b, e); },
        const_cast<void*>(static_cast<const void*>(&f)));
  }

 private:
  void worker_loop();
  void stop_and_join() noexcept;
  void work_chunks() noexcept;

  std::vector<std::thread> workers_;
  std::mutex dispatch_mutex_;  // one dispatch at a time from outside
  // Workers spin briefly on epoch_ before sleeping on wake_: a decode step dispatches hundreds of
  // matmuls back to back, and a condition-variable round trip per dispatch costs more than the work.
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> epoch_{0};
  // kOpen while the current job takes helpers, plus the number of workers inside it. A worker joins
  // only while it is open; the dispatcher closes it once every chunk is claimed and then waits for
  // the joined ones alone, never for a worker the OS has not scheduled yet (on a machine busy with
  // other processes that wait was a time slice per dispatch).
  static constexpr uint32_t kOpen = 1u << 31;
  std::atomic<uint32_t> join_{0};
  std::atomic<int> sleeping_{0};
  std::atomic<bool> stop_{false};
  // The current job (written before join_ opens, read by a worker after it joined).
  TaskFn fn_ = nullptr;
  void* context_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
  std::atomic<int64_t> next_{0};
};

}  // namespace skainet::base
