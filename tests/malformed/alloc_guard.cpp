// Replaces the global operator new/delete of the test binary with a counting version. Sizes are taken
// from malloc_usable_size so that deletes without a size (most of them) are counted exactly.
#include "malformed/alloc_guard.hpp"

#include <malloc.h>

#include <algorithm>
#include <cstdint>
#include <cstddef>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define SKAINET_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SKAINET_TEST_ASAN 1
#endif
#endif

namespace skainet::test {
namespace {

// Plain globals: the binary is single-threaded while a watch runs, and atomics would add nothing but
// cost to every allocation of the test framework.
uint64_t g_live = 0;
uint64_t g_base = 0;
bool g_watching = false;
AllocStats g_stats;

// Counted before the allocation is attempted, so a request too large to succeed is still seen.
[[maybe_unused]] void note_request(size_t requested) noexcept {
  if (!g_watching) return;
  ++g_stats.count;
  g_stats.largest = std::max<uint64_t>(g_stats.largest, requested);
}

[[maybe_unused]] void note_alloc(void* p) noexcept {
  g_live += malloc_usable_size(p);
  if (!g_watching) return;
  if (g_live > g_base) g_stats.peak_live = std::max(g_stats.peak_live, g_live - g_base);
}

[[maybe_unused]] void note_free(void* p) noexcept {
  if (p) g_live -= malloc_usable_size(p);
}

}  // namespace

#ifdef SKAINET_TEST_ASAN
bool alloc_guard_active() noexcept { return false; }
#else
bool alloc_guard_active() noexcept { return true; }
#endif

AllocWatch::AllocWatch() noexcept {
  g_stats = {};
  g_base = g_live;
  g_watching = true;
}

AllocWatch::~AllocWatch() { stop(); }

AllocStats AllocWatch::stop() noexcept {
  if (running_) {
    g_watching = false;
    running_ = false;
  }
  return g_stats;
}

}  // namespace skainet::test

#ifndef SKAINET_TEST_ASAN
namespace {

void* counted_alloc(size_t n, size_t align) {
  skainet::test::note_request(n);
  if (n > SIZE_MAX - align) throw std::bad_alloc();
  void* p = align <= alignof(std::max_align_t) ? std::malloc(n ? n : 1)
                                               : std::aligned_alloc(align, (std::max<size_t>(n, 1) + align - 1) / align * align);
  if (!p) throw std::bad_alloc();
  skainet::test::note_alloc(p);
  return p;
}

void* counted_alloc_nothrow(size_t n, size_t align) noexcept {
  try {
    return counted_alloc(n, align);
  } catch (...) {
    return nullptr;
  }
}

void counted_free(void* p) noexcept {
  skainet::test::note_free(p);
  std::free(p);
}

constexpr size_t kPlain = alignof(std::max_align_t);

}  // namespace

void* operator new(size_t n) { return counted_alloc(n, kPlain); }
void* operator new[](size_t n) { return counted_alloc(n, kPlain); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return counted_alloc_nothrow(n, kPlain); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return counted_alloc_nothrow(n, kPlain); }
void* operator new(size_t n, std::align_val_t a) { return counted_alloc(n, static_cast<size_t>(a)); }
void* operator new[](size_t n, std::align_val_t a) { return counted_alloc(n, static_cast<size_t>(a)); }
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_alloc_nothrow(n, static_cast<size_t>(a));
}
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_alloc_nothrow(n, static_cast<size_t>(a));
}

void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, size_t) noexcept { counted_free(p); }
void operator delete[](void* p, size_t) noexcept { counted_free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { counted_free(p); }
#endif
