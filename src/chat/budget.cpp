#include "chat/budget.hpp"

#include "chat/value.hpp"

namespace skainet::chat {
namespace {

thread_local Budget* active = nullptr;

// Reading the clock costs about as much as a few steps; every this many steps is often enough.
constexpr uint64_t kStepsPerClockCheck = 1024;

[[noreturn]] void too_large(std::string_view what, uint64_t limit) {
  fail(std::string(what) + " larger than " + std::to_string(limit) + " bytes");
}

[[noreturn]] void out_of_memory(const Budget& b, std::string_view what, uint64_t bytes) {  // bytes: asked for now
  fail("the template's values would hold more than " + std::to_string(b.limits.max_memory_bytes) +
       " bytes, its memory budget (" + std::to_string(b.live_bytes) + " held, " + std::to_string(bytes) +
       " more for a " + std::string(what) + ")");
}

}  // namespace

Budget::Budget(const Limits& l) : limits(l), deadline(std::chrono::steady_clock::now() + l.max_time) {}

BudgetScope::BudgetScope(Budget& budget) : saved_(active) { active = &budget; }
BudgetScope::~BudgetScope() { active = saved_; }

void charge_work(uint64_t steps) {
  Budget* b = active;
  if (!b) return;
  b->steps += steps;
  if (b->steps > b->limits.max_steps)
    fail("the template ran past " + std::to_string(b->limits.max_steps) + " steps (its work budget)");
  if (b->steps >= b->next_clock_check) {
    b->next_clock_check = b->steps + kStepsPerClockCheck;
    if (std::chrono::steady_clock::now() > b->deadline)
      fail("the template ran past its time budget of " + std::to_string(b->limits.max_time.count()) + " ms");
  }
}

Charge& Charge::operator=(Charge&& o) noexcept {
  if (this != &o) {
    release();
    budget_ = o.budget_;
    bytes_ = o.bytes_;
    o.budget_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void Charge::grow(uint64_t bytes, std::string_view what) {
  Budget* b = budget_ ? budget_ : active;
  if (!b) return;
  if (b->live_bytes + bytes > b->limits.max_memory_bytes) out_of_memory(*b, what, bytes);
  charge_work(1 + bytes / kBytesPerStep);
  budget_ = b;
  b->live_bytes += bytes;
  bytes_ += bytes;
}

void Charge::release() noexcept {
  if (budget_) budget_->live_bytes -= bytes_;
  budget_ = nullptr;
  bytes_ = 0;
}

void check_value_bytes(uint64_t bytes, std::string_view what) {
  const Budget* b = active;
  if (!b) return;
  if (bytes > b->limits.max_value_bytes) too_large(what, b->limits.max_value_bytes);
  if (b->live_bytes + bytes > b->limits.max_memory_bytes) out_of_memory(*b, what, bytes);
}

StringBuilder::StringBuilder(std::string_view what, uint64_t limit)
    : what_(what), limit_(limit ? limit : (active ? active->limits.max_value_bytes : UINT64_MAX)) {}

void StringBuilder::reserve_more(uint64_t n) {
  if (text_.size() + n > limit_) too_large(what_, limit_);
  // Charged in the string's capacity steps, so a byte-by-byte build does not pay a charge per byte.
  if (text_.size() + n > charge_.bytes()) {
    uint64_t want = std::max<uint64_t>(text_.size() + n, 2 * charge_.bytes() + kObjectOverhead);
    want = std::min<uint64_t>(want, std::max<uint64_t>(limit_, text_.size() + n));
    charge_.grow(want - charge_.bytes(), what_);
    text_.reserve(want);
  }
}

void StringBuilder::append(std::string_view s) {
  reserve_more(s.size());
  text_ += s;
}

void StringBuilder::append(size_t n, char c) {
  reserve_more(n);
  text_.append(n, c);
}

}  // namespace skainet::chat
