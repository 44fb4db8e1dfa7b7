// The allocation-failure injector of test_fault_alloc (alloc_fault.cpp replaces operator new/delete).
//
//   arm_allocation_failure(120);                 // the 120th allocation from now throws std::bad_alloc
//   try { open_and_generate(); } catch (...) {}
//   AllocationFault f = disarm_allocation_failure();   // f.fired: it was reached; f.count: allocations seen
//   arm_allocation_failure(0);                   // count only
#pragma once

#include <cstdint>

namespace skainet::test {

struct AllocationFault {
  uint64_t count = 0;  // allocations since arming
  bool fired = false;  // the chosen one was reached (and failed)
  uintptr_t from = 0;  // return address of the failed operator new call
};

void arm_allocation_failure(uint64_t n) noexcept;
AllocationFault disarm_allocation_failure() noexcept;
// Allocations made and not yet freed (through operator new), since the process started.
int64_t live_allocations() noexcept;
// With SKAINET_ALLOC_FAULT_TRACE set: prints the allocations made while armed that are still live.
void print_traced_live() noexcept;

}  // namespace skainet::test
