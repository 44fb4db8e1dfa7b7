// Slots over one loaded model, and the FIFO queue in front of them.
//
// What a slot shares and what it owns: the weights (views into the engine's ModelScope) and the
// tokenizer are read-only after loading, so any number of slots read them at once. A slot owns its
// KV cache, the record of what that cache holds, and its sampler (a generate::Sequence with
// SequenceParts::KvCache); the slabs, the matmul scratch and the threads a forward pass draws from are
// the Stepper's batch's, one set for every slot (stepper.cpp).
//
// Which slot: a finished request's keys and values stay in its slot's cache, so a request goes to the
// free slot holding the longest prefix of its prompt (choose_slot) and computes only the rest. The
// FIFO order is kept: the first in line takes the best free slot for its own prompt.
//
// With a prompt cache (--cache-ram), what a request is about to overwrite in the slot it gets is saved
// there first, and a saved prefix the prompt shares more of than the slot's own is copied into it: more
// conversations than slots keep their work (through_prompt_cache).
#include <algorithm>

#include <fmt/format.h>

#include "skainet/app/serve.hpp"

namespace skainet::serve {

SlotChoice choose_slot(std::span<const SlotCandidate> free_slots, size_t prompt_tokens) {
  if (free_slots.empty()) throw InvalidArgument("choose_slot: no free slot to choose from");
  const SlotCandidate* longest = &free_slots.front();
  const SlotCandidate* oldest = &free_slots.front();
  // Among equals, the least recently used; among never used, the lowest index.
  auto older = [](const SlotCandidate& a, const SlotCandidate& b) {
    return a.last_used != b.last_used ? a.last_used < b.last_used : a.index < b.index;
  };
  for (const SlotCandidate& c : free_slots) {
    if (c.reusable > longest->reusable || (c.reusable == longest->reusable && older(c, *longest))) longest = &c;
    if (older(c, *oldest)) oldest = &c;
  }
  const bool match = longest->reusable > 0 &&
                     static_cast<double>(longest->reusable) >= kSlotMatchShare * static_cast<double>(prompt_tokens);
  const SlotCandidate& chosen = match ? *longest : *oldest;
  return {chosen.index, chosen.reusable, match ? SlotReason::LongestPrefix : SlotReason::LeastRecentlyUsed};
}

SlotPool::SlotPool(size_t slots, size_t queue_limit)
    : size_(slots), queue_limit_(queue_limit), last_used_(slots, 0), cells_(new std::atomic<uint32_t>[slots]) {
  for (size_t i = 0; i < slots; ++i) cells_[i].store(0, std::memory_order_relaxed);
  if (slots == 0) throw InvalidArgument("a slot pool needs at least one slot");
  for (size_t i = 0; i < slots; ++i) free_.push_back(i);
}

SlotPool::SlotPool(generate::Engine& engine, size_t slots, size_t queue_limit, uint64_t prompt_cache_bytes)
    : SlotPool(slots, queue_limit) {
  if (!engine.plan.kv || !engine.plan.model || !engine.tokenizer)
    throw InvalidArgument("slots need an engine with a model plan and a tokenizer");
  if (engine.plan.slots < slots)
    throw InvalidArgument(fmt::format("{} slots asked for, but the plan priced {}", slots, engine.plan.slots));
  if (prompt_cache_bytes > engine.plan.totals.prompt_cache)
    throw InvalidArgument(fmt::format("a prompt cache of {} bytes asked for, but the plan priced {}",
                                      prompt_cache_bytes, engine.plan.totals.prompt_cache));
  if (prompt_cache_bytes > 0) prompt_cache_.emplace(prompt_cache_bytes);
  slots_.reserve(slots);
  for (size_t i = 0; i < slots; ++i) slots_.push_back(engine.new_sequence(1, generate::SequenceParts::KvCache));
}

SlotPool::~SlotPool() { close(); }

SlotChoice SlotPool::choose(std::span<const int32_t> prompt) const {
  std::vector<SlotCandidate> candidates;
  candidates.reserve(free_.size());
  for (const size_t i : free_)
    candidates.push_back({i, slots_.empty() || prompt.empty() ? 0 : slots_[i]->reusable(prompt), last_used_[i]});
  return choose_slot(candidates, prompt.size());
}

// The slot's cells past the prefix the request reuses are about to be overwritten: unless the request
// continues most of what the slot holds (at least half), that is saved first. Then a saved prefix
// longer than the slot's own match (and a match by choose_slot's share) is copied into the slot. The
// slot is free, so nobody reads its cache meanwhile; the copies are at a request's start, never a step.
SlotChoice SlotPool::through_prompt_cache(SlotChoice choice, std::span<const int32_t> prompt) {
  if (!prompt_cache_ || slots_.empty()) return choice;
  Slot& slot = *slots_[choice.index];
  const std::optional<PromptCache::Match> saved = prompt_cache_->best(prompt);
  const bool restore = saved && saved->reusable > choice.reusable &&
                       static_cast<double>(saved->reusable) >= kSlotMatchShare * static_cast<double>(prompt.size());
  // Taken out before the slot's prefix goes in, which could otherwise evict it.
  generate::SavedPrefix back = restore ? prompt_cache_->take(saved->entry) : generate::SavedPrefix{};
  if (restore || 2 * choice.reusable < slot.cached().size()) prompt_cache_->put(slot.save());
  if (!restore) return choice;
  slot.restore(back);
  cells_[choice.index].store(static_cast<uint32_t>(back.tokens.size()), std::memory_order_relaxed);
  return {choice.index, saved->reusable, SlotReason::PromptCache};
}

std::optional<SlotPool::Lease> SlotPool::acquire(std::span<const int32_t> prompt) {
  std::vector<Lease> one = acquire(prompt, 1);
  if (one.empty()) return std::nullopt;
  return std::move(one.front());
}

std::vector<SlotPool::Lease> SlotPool::acquire(std::span<const int32_t> prompt, size_t count) {
  if (count == 0 || count > size_)
    throw InvalidArgument(fmt::format("{} slots asked for at once; the pool holds {}", count, size_));
  std::unique_lock lock(mutex_);
  if (closed_) return {};
  // The queue holds only callers that must wait: one who finds the slots free and nobody ahead takes them.
  if ((free_.size() < count || !queue_.empty()) && queue_.size() >= queue_limit_) return {};
  const uint64_t ticket = next_ticket_++;
  queue_.push_back(ticket);
  turn_.wait(lock, [&] { return closed_ || (queue_.front() == ticket && free_.size() >= count); });
  if (closed_) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), ticket));
    return {};
  }
  queue_.pop_front();
  std::vector<Lease> leases;
  leases.reserve(count);
  for (size_t k = 0; k < count; ++k) {
    // A free slot's cache is read here under the mutex: nobody generates on it until it is lent.
    const SlotChoice choice = through_prompt_cache(choose(prompt), prompt);
    free_.erase(std::find(free_.begin(), free_.end(), choice.index));
    leases.push_back(Lease(this, choice));
  }
  // The next in line may find a slot free too.
  turn_.notify_all();
  return leases;
}

void SlotPool::release(size_t index) {
  {
    std::lock_guard lock(mutex_);
    free_.push_back(index);
    last_used_[index] = ++releases_;
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
  return {size_, size_ - free_.size(), queue_.size(), prompt_cache_ ? prompt_cache_->entries() : 0,
          prompt_cache_ ? prompt_cache_->bytes() : 0};
}

std::vector<SlotLoad> SlotPool::loads() const {
  std::vector<SlotLoad> out(size_, SlotLoad{.busy = true});
  {
    std::lock_guard lock(mutex_);
    for (const size_t i : free_) out[i].busy = false;
  }
  for (size_t i = 0; i < size_; ++i) out[i].cells = cells_[i].load(std::memory_order_relaxed);
  return out;
}

std::atomic<uint32_t>& SlotPool::Lease::cells() const noexcept { return pool_->cells_[choice_.index]; }

SlotPool::Lease& SlotPool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    if (pool_) pool_->release(choice_.index);
    pool_ = std::exchange(other.pool_, nullptr);
    choice_ = other.choice_;
  }
  return *this;
}

SlotPool::Lease::~Lease() {
  if (pool_) pool_->release(choice_.index);
}

Slot& SlotPool::Lease::slot() const {
  if (pool_->slots_.empty()) throw InvalidArgument("this slot pool has no model (built for accounting only)");
  return *pool_->slots_[choice_.index];
}

}  // namespace skainet::serve
