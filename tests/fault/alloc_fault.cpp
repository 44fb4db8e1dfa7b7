// Replaces the global operator new/delete of test_fault_alloc so that the Nth allocation (counted
// from arm_allocation_failure) throws std::bad_alloc, and counts live allocations for the leak check.
// operator new, not malloc: every allocation of the engine goes through it (containers, strings, heap
// storage with align_val_t), and under a sanitizer malloc belongs to the sanitizer while a replaced
// operator new still forwards to it, so the same test runs in the asan preset.
#include "alloc_fault.hpp"

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>

namespace {

std::atomic<bool> g_armed{false};
std::atomic<uint64_t> g_count{0};    // allocations since arming
std::atomic<uint64_t> g_fail_at{0};  // 0: count only
std::atomic<bool> g_fired{false};
std::atomic<uintptr_t> g_fired_from{0};
std::atomic<int64_t> g_live{0};

// Whether this allocation must fail; notes where it was asked for.
bool must_fail(void* caller) noexcept {
  if (!g_armed.load(std::memory_order_relaxed)) return false;
  const uint64_t n = g_count.fetch_add(1, std::memory_order_relaxed) + 1;
  if (n != g_fail_at.load(std::memory_order_relaxed)) return false;
  g_fired.store(true, std::memory_order_relaxed);
  g_fired_from.store(reinterpret_cast<uintptr_t>(caller), std::memory_order_relaxed);
  return true;
}

// Diagnosis of a leak (SKAINET_ALLOC_FAULT_TRACE=1): which allocations made while armed are still live.
constexpr size_t kTrace = 16384;
struct Traced {
  std::atomic<void*> p{nullptr};
  void* caller = nullptr;
  uint64_t index = 0;
};
Traced g_trace[kTrace];
const bool g_tracing = std::getenv("SKAINET_ALLOC_FAULT_TRACE") != nullptr;

void trace(void* p, void* caller) noexcept {
  if (!g_tracing || !p || !g_armed.load(std::memory_order_relaxed)) return;
  const uint64_t i = g_count.load(std::memory_order_relaxed);
  if (i < kTrace) {
    g_trace[i].caller = caller;
    g_trace[i].index = i;
    g_trace[i].p.store(p);
  }
}
void untrace(void* p) noexcept {
  if (!g_tracing || !p) return;
  for (Traced& t : g_trace) {
    void* q = p;
    if (t.p.compare_exchange_strong(q, nullptr)) return;
  }
}

void* allocate(size_t n, size_t align) noexcept {
  void* p = nullptr;
  if (align <= alignof(std::max_align_t)) {
    p = std::malloc(n ? n : 1);
  } else if (::posix_memalign(&p, align < sizeof(void*) ? sizeof(void*) : align, n ? n : 1) != 0) {
    p = nullptr;
  }
  if (p) g_live.fetch_add(1, std::memory_order_relaxed);
  return p;
}

void release(void* p) noexcept {
  if (!p) return;
  untrace(p);
  g_live.fetch_sub(1, std::memory_order_relaxed);
  std::free(p);
}

void* throwing_new(size_t n, size_t align, void* caller) {
  if (must_fail(caller)) throw std::bad_alloc();
  if (void* p = allocate(n, align)) {
    trace(p, caller);
    return p;
  }
  throw std::bad_alloc();
}

void* nothrow_new(size_t n, size_t align, void* caller) noexcept {
  if (must_fail(caller)) return nullptr;
  void* p = allocate(n, align);
  trace(p, caller);
  return p;
}

}  // namespace

namespace skainet::test {

void arm_allocation_failure(uint64_t n) noexcept {
  g_armed.store(false);
  g_count.store(0);
  g_fail_at.store(n);
  g_fired.store(false);
  g_fired_from.store(0);
  g_armed.store(true);
}

AllocationFault disarm_allocation_failure() noexcept {
  g_armed.store(false);
  return {g_count.load(), g_fired.load(), g_fired_from.load()};
}

int64_t live_allocations() noexcept { return g_live.load(); }

void print_traced_live() noexcept {
  for (const Traced& t : g_trace)
    if (t.p.load()) std::fprintf(stderr, "live: allocation %llu from %p\n", (unsigned long long)t.index, t.caller);
}

}  // namespace skainet::test

#define CALLER __builtin_return_address(0)
constexpr size_t kPlain = alignof(std::max_align_t);

void* operator new(size_t n) { return throwing_new(n, kPlain, CALLER); }
void* operator new[](size_t n) { return throwing_new(n, kPlain, CALLER); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return nothrow_new(n, kPlain, CALLER); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return nothrow_new(n, kPlain, CALLER); }
void* operator new(size_t n, std::align_val_t a) { return throwing_new(n, static_cast<size_t>(a), CALLER); }
void* operator new[](size_t n, std::align_val_t a) { return throwing_new(n, static_cast<size_t>(a), CALLER); }
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return nothrow_new(n, static_cast<size_t>(a), CALLER);
}
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return nothrow_new(n, static_cast<size_t>(a), CALLER);
}
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, size_t) noexcept { release(p); }
void operator delete[](void* p, size_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
