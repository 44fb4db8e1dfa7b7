// Slots over one loaded model, and the FIFO queue in front of them.
//
// What a slot shares and what it owns: the weights (views into the engine's ModelScope) and the
// tokenizer are read-only after loading, so any number of slots read them at once. Everything a
// forward pass writes is the slot's own generate::Sequence: the KV cache, the layer slab (inside
// model::Transformer), the step slab (inside the Generator), the matmul scratch and the active-scope
// pointer (inside the ExecutionContext). The kernels' thread pool is per ExecutionContext as well,
// so slots never enter one pool together (a pool serializes outside dispatches on a mutex: sharing
// one would make the slots take turns at every matmul); instead the --threads are divided between
// the slots.
#include <algorithm>

#include <fmt/format.h>

#include "skainet/app/serve.hpp"

namespace skainet::serve {

SlotPool::SlotPool(size_t slots, size_t queue_limit) : size_(slots), queue_limit_(queue_limit) {
  if (slots == 0) throw InvalidArgument("a slot pool needs at least one slot");
  for (size_t i = slots; i-- > 0;) free_.push_back(i);  // slot 0 is handed out first
}

SlotPool::SlotPool(generate::Engine& engine, size_t slots, int threads_per_slot, size_t queue_limit)
    : SlotPool(slots, queue_limit) {
  if (!engine.plan.kv || !engine.plan.model || !engine.tokenizer)
    throw InvalidArgument("slots need an engine with a model plan and a tokenizer");
  if (engine.plan.slots < slots)
    throw InvalidArgument(fmt::format("{} slots asked for, but the plan priced {}", slots, engine.plan.slots));
  slots_.reserve(slots);
  for (size_t i = 0; i < slots; ++i) slots_.push_back(engine.new_sequence(threads_per_slot));
}

SlotPool::~SlotPool() { close(); }

std::optional<SlotPool::Lease> SlotPool::acquire() {
  std::unique_lock lock(mutex_);
  if (closed_) return std::nullopt;
  // The queue holds only callers that must wait: one who finds a free slot and nobody ahead takes it.
  if ((free_.empty() || !queue_.empty()) && queue_.size() >= queue_limit_) return std::nullopt;
  const uint64_t ticket = next_ticket_++;
  queue_.push_back(ticket);
  turn_.wait(lock, [&] { return closed_ || (queue_.front() == ticket && !free_.empty()); });
  if (closed_) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), ticket));
    return std::nullopt;
  }
  queue_.pop_front();
  const size_t index = free_.back();
  free_.pop_back();
  // The next in line may find a slot free too.
  turn_.notify_all();
  return Lease(this, index);
}

void SlotPool::release(size_t index) {
  {
    std::lock_guard lock(mutex_);
    free_.push_back(index);
  }
  turn_.notify_all();
}

void SlotPool::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  turn_.notify_all();
}

SlotCounts SlotPool::counts() const {
  std::lock_guard lock(mutex_);
  return {size_, size_ - free_.size(), queue_.size()};
}

SlotPool::Lease& SlotPool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    if (pool_) pool_->release(index_);
    pool_ = std::exchange(other.pool_, nullptr);
    index_ = other.index_;
  }
  return *this;
}

SlotPool::Lease::~Lease() {
  if (pool_) pool_->release(index_);
}

Slot& SlotPool::Lease::slot() const {
  if (pool_->slots_.empty()) throw InvalidArgument("this slot pool has no model (built for accounting only)");
  return *pool_->slots_[index_];
}

}  // namespace skainet::serve
