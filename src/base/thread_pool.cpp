#include "skainet/thread_pool.hpp"

namespace skainet::base {
namespace {

thread_local bool t_in_task = false;

}  // namespace

ThreadPool::ThreadPool(int threads) {
  const int workers = threads > 1 ? threads - 1 : 0;
  workers_.reserve(static_cast<size_t>(workers));
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

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
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || epoch_ != seen; });
      if (stop_) return;
      seen = epoch_;
    }
    work_chunks();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --busy_workers_;
    }
    done_.notify_one();
  }
}

void ThreadPool::run(int64_t n, int64_t grain, TaskFn fn, void* context) noexcept {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  // Nested calls, single-thread pools and single chunks run inline: no hand-off to pay for.
  if (t_in_task || workers_.empty() || n <= grain) {
    const bool was_in_task = t_in_task;
    t_in_task = true;
    for (int64_t b = 0; b < n; b += grain) fn(context, b, b + grain < n ? b + grain : n);
    t_in_task = was_in_task;
    return;
  }
  std::lock_guard<std::mutex> dispatch(dispatch_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = fn;
    context_ = context;
    n_ = n;
    grain_ = grain;
    next_.store(0, std::memory_order_relaxed);
    busy_workers_ = static_cast<int>(workers_.size());
    ++epoch_;
  }
  wake_.notify_all();
  work_chunks();
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return busy_workers_ == 0; });
}

}  // namespace skainet::base
