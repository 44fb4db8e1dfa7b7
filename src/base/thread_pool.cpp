#include "skainet/core/thread_pool.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace skainet::base {
namespace {

thread_local bool t_in_task = false;

// About a millisecond of polling before a worker sleeps; the dispatcher yields after a shorter spin
// (on a busy machine the other core may be running someone else).
constexpr int kWorkerSpins = 1 << 16;
constexpr int kDispatcherSpins = 1 << 12;

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  const int workers = threads > 1 ? threads - 1 : 0;
  workers_.reserve(static_cast<size_t>(workers));
  try {
    for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { worker_loop(); });
  } catch (...) {
    // A worker that could not start (no memory, no thread): the destructor will not run for a
    // constructor that throws, and destroying a joinable std::thread terminates the process, so the
    // workers already started are stopped and joined here.
    stop_and_join();
    throw;
  }
}

void ThreadPool::stop_and_join() noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

ThreadPool::~ThreadPool() { stop_and_join(); }

void ThreadPool::work_chunks() noexcept {
  const bool was_in_task = t_in_task;
  t_in_task = true;
  for (;;) {
    const int64_t begin = next_.fetch_add(grain_, std::memory_order_relaxed);
    if (begin >= n_) break;
    const int64_t end = begin + grain_ < n_ ? begin + grain_ : n_;
    fn_(context_, begin, end);
  }
  t_in_task = was_in_task;
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    int spins = 0;
    uint64_t epoch;
    while ((epoch = epoch_.load(std::memory_order_acquire)) == seen && !stop_.load(std::memory_order_relaxed)) {
      if (++spins < kWorkerSpins) {
        cpu_relax();
        continue;
      }
      std::unique_lock<std::mutex> lock(mutex_);
      sleeping_.fetch_add(1);
      wake_.wait(lock, [&] { return stop_.load() || epoch_.load() != seen; });
      sleeping_.fetch_sub(1);
      spins = 0;
    }
    if (stop_.load()) return;
    seen = epoch;
    // Join the job if it still takes helpers (it may already be a later one: fine, its fields are
    // set before it opens). A closed job is finished or about to be: nothing to do.
    uint32_t state = join_.load(std::memory_order_relaxed);
    while ((state & kOpen) &&
           !join_.compare_exchange_weak(state, state + 1, std::memory_order_acquire, std::memory_order_relaxed)) {
    }
    if (!(state & kOpen)) continue;
    work_chunks();
    join_.fetch_sub(1, std::memory_order_release);
  }
}

void ThreadPool::run(int64_t n, int64_t grain, TaskFn fn, void* context) noexcept {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  // Nested calls, single-thread pools and single chunks run inline, as one call over [0, n): no
  // hand-off to pay for, and a kernel sees all its rows at once (a small model's 64-row projection in
  // 16-row chunks transposed its weights four times over).
  if (t_in_task || workers_.empty() || n <= grain) {
    const bool was_in_task = t_in_task;
    t_in_task = true;
    fn(context, 0, n);
    t_in_task = was_in_task;
    return;
  }
  std::lock_guard<std::mutex> dispatch(dispatch_mutex_);
  fn_ = fn;
  context_ = context;
  n_ = n;
  grain_ = grain;
  next_.store(0, std::memory_order_relaxed);
  join_.store(kOpen, std::memory_order_release);
  {
    // Advanced under the mutex so a worker about to sleep either sees it or is woken below.
    std::lock_guard<std::mutex> lock(mutex_);
    epoch_.fetch_add(1, std::memory_order_release);
  }
  if (sleeping_.load() > 0) wake_.notify_all();
  work_chunks();
  // Every chunk is claimed: close the job and wait only for the workers that joined it.
  join_.fetch_and(~kOpen, std::memory_order_relaxed);
  for (int spins = 0; join_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kDispatcherSpins)
      cpu_relax();
    else
      std::this_thread::yield();
  }
}

}  // namespace skainet::base
