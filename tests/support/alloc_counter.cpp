// Interposes malloc/calloc/realloc/free/memalign/aligned_alloc/posix_memalign/valloc/pvalloc and
// replaces the global operator new/delete, so that every heap allocation in the process (any thread)
// is counted. The real work is forwarded to glibc's __libc_* entry points. Live bytes are kept with
// malloc_usable_size, so frees without a size (most of them) are accounted exactly.
#include "alloc_counter.hpp"

#include <malloc.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <new>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer) || __has_feature(thread_sanitizer)
#define SKAINET_NO_ALLOC_COUNTER 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SKAINET_NO_ALLOC_COUNTER 1
#endif

namespace {

std::atomic<uint64_t> g_allocations{0};
// Signed: only differences matter, and memory libc hands out behind malloc's back may be freed here.
std::atomic<int64_t> g_live{0};
std::atomic<bool> g_watching{false};
std::atomic<int64_t> g_base{0};
std::atomic<uint64_t> g_peak{0};
std::atomic<uint64_t> g_largest{0};

[[maybe_unused]] void raise_to(std::atomic<uint64_t>& a, uint64_t v) noexcept {
  uint64_t cur = a.load(std::memory_order_relaxed);
  while (v > cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

// Noted before the allocation is attempted, so a request too large to succeed is still seen.
[[maybe_unused]] void note_request(size_t n) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (g_watching.load(std::memory_order_acquire)) raise_to(g_largest, n);
}

[[maybe_unused]] void* note_alloc(void* p) noexcept {
  if (!p) return p;
  const auto size = static_cast<int64_t>(malloc_usable_size(p));
  const int64_t live = g_live.fetch_add(size, std::memory_order_relaxed) + size;
  if (g_watching.load(std::memory_order_acquire)) {
    const int64_t above = live - g_base.load(std::memory_order_relaxed);
    if (above > 0) raise_to(g_peak, static_cast<uint64_t>(above));
  }
  return p;
}

[[maybe_unused]] void note_free(void* p) noexcept {
  if (p) g_live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
}

}  // namespace

namespace skainet::test {

#ifdef SKAINET_NO_ALLOC_COUNTER
bool allocation_counter_available() noexcept { return false; }
#else
bool allocation_counter_available() noexcept { return true; }
#endif
uint64_t allocation_count() noexcept { return g_allocations.load(); }

AllocWatch::AllocWatch() noexcept : start_count_(allocation_count()) {
  g_peak.store(0, std::memory_order_relaxed);
  g_largest.store(0, std::memory_order_relaxed);
  g_base.store(g_live.load(std::memory_order_relaxed), std::memory_order_relaxed);
  g_watching.store(true, std::memory_order_release);
}

AllocWatch::~AllocWatch() { stop(); }

AllocStats AllocWatch::stop() noexcept {
  if (running_) {
    g_watching.store(false, std::memory_order_release);
    running_ = false;
    stats_ = {g_peak.load(), g_largest.load(), allocation_count() - start_count_};
  }
  return stats_;
}

}  // namespace skainet::test

#ifndef SKAINET_NO_ALLOC_COUNTER

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void* __libc_valloc(size_t);
void* __libc_pvalloc(size_t);
void __libc_free(void*);

void* malloc(size_t n) {
  note_request(n);
  return note_alloc(__libc_malloc(n));
}
void* calloc(size_t n, size_t size) {
  size_t total = 0;
  note_request(__builtin_mul_overflow(n, size, &total) ? SIZE_MAX : total);
  return note_alloc(__libc_calloc(n, size));
}
void* realloc(void* p, size_t n) {
  note_request(n);
  const size_t old = p ? malloc_usable_size(p) : 0;
  void* q = __libc_realloc(p, n);
  // glibc's realloc(p, 0) frees p and returns null; a failed realloc leaves p as it was.
  if (p && (q || n == 0)) g_live.fetch_sub(static_cast<int64_t>(old), std::memory_order_relaxed);
  return note_alloc(q);
}
void free(void* p) {
  note_free(p);
  __libc_free(p);
}
void* memalign(size_t align, size_t n) {
  note_request(n);
  return note_alloc(__libc_memalign(align, n));
}
void* aligned_alloc(size_t align, size_t n) { return memalign(align, n); }
int posix_memalign(void** out, size_t align, size_t n) {
  void* p = memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
void* valloc(size_t n) {
  note_request(n);
  return note_alloc(__libc_valloc(n));
}
void* pvalloc(size_t n) {
  note_request(n);
  return note_alloc(__libc_pvalloc(n));
}
}  // extern "C"

void* operator new(size_t n) {
  if (void* p = malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return malloc(n ? n : 1); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return malloc(n ? n : 1); }
void* operator new(size_t n, std::align_val_t a) {
  if (void* p = memalign(static_cast<size_t>(a), n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n, std::align_val_t a) { return operator new(n, a); }
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return memalign(static_cast<size_t>(a), n ? n : 1);
}
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return memalign(static_cast<size_t>(a), n ? n : 1);
}
void operator delete(void* p) noexcept { free(p); }
void operator delete[](void* p) noexcept { free(p); }
void operator delete(void* p, size_t) noexcept { free(p); }
void operator delete[](void* p, size_t) noexcept { free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { free(p); }
void operator delete(void* p, std::align_val_t) noexcept { free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { free(p); }

#endif  // SKAINET_NO_ALLOC_COUNTER
