// One render's budget of memory, work and time (Limits), and the two ways code charges it: Charge
// for bytes a value or a buffer holds, charge_work for steps.
//
// The render that runs on this thread installs its budget (BudgetScope); everything below finds it
// there. Values are built in dozens of places (filters, methods, operators, the context) that have no
// evaluator at hand, and charging where a string, list or dict is built, not where a filter decides to
// check, is what keeps the next filter from forgetting it. With no budget installed (parsing, a unit
// test calling a filter directly) nothing is charged.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "skainet/text/chat.hpp"

namespace skainet::chat {

// Work of one step: an item touched, an expression evaluated, this many bytes copied, or this many
// bytes scanned. Measured (tests/chat/budget_test.cpp), an interpreted step costs 25-120 ns, copying
// 256 bytes about as much, and a loop over 16 bytes that looks at each (code points, lines, words) too.
constexpr uint64_t kBytesPerStep = 256;
constexpr uint64_t kBytesScannedPerStep = 16;

struct Budget {
  explicit Budget(const Limits& limits);
  const Limits limits;
  uint64_t live_bytes = 0;  // held now by the render's values and buffers
  uint64_t steps = 0;
  uint64_t next_clock_check = 0;
  std::chrono::steady_clock::time_point deadline;
};

// Installs `budget` as this thread's for the scope's lifetime.
class BudgetScope {
 public:
  explicit BudgetScope(Budget& budget);
  ~BudgetScope();
  BudgetScope(const BudgetScope&) = delete;
  BudgetScope& operator=(const BudgetScope&) = delete;

 private:
  Budget* saved_;
};

// Charges `steps` of work; fails (ValueError) past Limits::max_steps or past Limits::max_time.
void charge_work(uint64_t steps);
inline void charge_bytes_scanned(uint64_t bytes) { charge_work(1 + bytes / kBytesScannedPerStep); }

// Bytes one object holds against the render's memory budget, given back when it is freed. grow() checks
// the render's total against Limits::max_memory_bytes before the caller allocates, and charges the
// copying as work; the limit on one value is the caller's to check (check_value_bytes), since an output
// buffer has its own (Limits::max_output_bytes).
class Charge {
 public:
  Charge() = default;
  Charge(Charge&& o) noexcept : budget_(o.budget_), bytes_(o.bytes_) {
    o.budget_ = nullptr;
    o.bytes_ = 0;
  }
  Charge& operator=(Charge&& o) noexcept;
  Charge(const Charge&) = delete;
  Charge& operator=(const Charge&) = delete;
  ~Charge() { release(); }

  // `what` names the value in the error ("string", "list", "output of 'indent'").
  void grow(uint64_t bytes, std::string_view what);
  uint64_t bytes() const { return bytes_; }

 private:
  void release() noexcept;
  Budget* budget_ = nullptr;
  uint64_t bytes_ = 0;
};

// What a value of `bytes` would hold, checked against Limits::max_value_bytes and the render's free
// memory without charging: for code about to allocate a value whose size it can compute first.
void check_value_bytes(uint64_t bytes, std::string_view what);

// A string being built piece by piece (the output of a filter, an operator, a macro, the render): each
// append is checked against `limit` and charged before the string grows.
class StringBuilder {
 public:
  // limit 0: Limits::max_value_bytes of the installed budget (or none without one).
  explicit StringBuilder(std::string_view what, uint64_t limit = 0);
  void append(std::string_view s);
  void append(size_t n, char c);
  StringBuilder& operator+=(std::string_view s) {
    append(s);
    return *this;
  }
  StringBuilder& operator+=(char c) {
    append(1, c);
    return *this;
  }
  const std::string& str() const { return text_; }
  size_t size() const { return text_.size(); }
  bool empty() const { return text_.empty(); }
  // The text, its charge given back: the Value it becomes charges it again, so it is not counted twice.
  std::string take() {
    charge_ = Charge();
    return std::move(text_);
  }

 private:
  void reserve_more(uint64_t n);
  std::string text_;
  Charge charge_;
  std::string_view what_;
  uint64_t limit_;
};

// Struct sizes a value is charged for beside its bytes (estimates: the object and its allocation).
constexpr uint64_t kObjectOverhead = 64;

}  // namespace skainet::chat
