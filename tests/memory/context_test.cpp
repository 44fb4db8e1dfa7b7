#include <atomic>
#include <vector>

#include <gtest/gtest.h>

#include "skainet/compute/kernels.hpp"
#include "skainet/compute/memory.hpp"

using namespace skainet;
using namespace skainet::memory;

TEST(ExecutionContext, CreationOpsDrawFromTheActiveScope) {
  ExecutionContext ctx;
  EXPECT_EQ(ctx.scope().kind(), ScopeKind::Ambient);
  Tensor a = ctx.ones(Shape{2, 3});
  EXPECT_EQ(a.storage().domain(), MemoryDomain::HostHeap);
  EXPECT_EQ(a.data<float>()[5], 1.0f);
  Tensor inside = ctx.forward_scope(4096, [&](ForwardScope& fs) {
    EXPECT_EQ(&ctx.scope(), &fs);
    Tensor z = ctx.zeros(Shape{5}, GgmlType::F16);
    Tensor f = ctx.full(Shape{3}, 2.5f, GgmlType::BF16);
    const std::vector<float> v = {1, 2, 3, 4};
    Tensor g = ctx.from_floats(v, Shape{2, 2});
    EXPECT_EQ(z.storage().domain(), MemoryDomain::SlabSlice);
    EXPECT_EQ(z.data<uint16_t>()[4], 0);
    EXPECT_EQ(kernels::ref::bf16_to_fp32(f.data<uint16_t>()[2]), 2.5f);
    EXPECT_EQ(g.data<float>()[3], 4.0f);
    EXPECT_EQ(g.offset(), 0u);
    EXPECT_GT(static_cast<uint64_t>(g.bytes() - z.bytes()), 0u);
    return g;
  });
  EXPECT_EQ(ctx.scope().kind(), ScopeKind::Ambient);
  EXPECT_THROW(inside.bytes(), StorageClosedException);  // returned out of its scope: dead
}

TEST(ExecutionContext, StepResetsAPersistentScope) {
  ExecutionContext ctx;
  ForwardScope fs({.slab_bytes = 1024});
  std::vector<float> kept;
  Tensor leaked;
  for (int i = 0; i < 3; ++i) {
    const float v = ctx.step(fs, [&] {
      Tensor t = ctx.full(Shape{4}, static_cast<float>(i));
      leaked = t;
      return t.data<float>()[3];
    });
    kept.push_back(v);
  }
  EXPECT_EQ(kept, (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(fs.stats().resets, 3u);
  EXPECT_EQ(fs.stats().slab_allocations, 1u);
  try {
    (void)leaked.bytes();
    FAIL();
  } catch (const StorageClosedException& e) {
    EXPECT_EQ(e.died_in_step, 3u);
  }
  EXPECT_THROW(ctx.step(fs, [&] { throw InvalidArgument("x"); }), InvalidArgument);
  EXPECT_EQ(fs.stats().resets, 4u);  // reset even when the step throws
}

TEST(ExecutionContext, FromFloatsQuantizesPackedTypes) {
  ExecutionContext ctx;
  std::vector<float> v(64);
  for (int i = 0; i < 64; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i - 32) / 8.0f;
  Tensor q = ctx.from_floats(v, Shape{2, 32}, GgmlType::Q8_0);
  std::vector<float> back(64);
  kernels::ref::dequantize_row(GgmlType::Q8_0, q.bytes(), back.data(), 64);
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(back[static_cast<size_t>(i)], v[static_cast<size_t>(i)], 0.02);
  EXPECT_THROW(ctx.from_floats(v, Shape{3, 32}, GgmlType::Q8_0), InvalidArgument);
  EXPECT_THROW(ctx.full(Shape{32}, 1.0f, GgmlType::Q4_0), InvalidArgument);
}

TEST(ThreadPool, CoversEveryItemOnceAcrossThreads) {
  base::ThreadPool pool(3);
  EXPECT_EQ(pool.size(), 3);
  std::vector<std::atomic<int>> hits(1001);
  for (int round = 0; round < 20; ++round)
    pool.parallel_for(1001, 7, [&](int64_t b, int64_t e) noexcept {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    });
  for (auto& h : hits) EXPECT_EQ(h.load(), 20);
  // Nested dispatch runs inline instead of deadlocking.
  std::atomic<int> inner{0};
  pool.parallel_for(4, 1, [&](int64_t, int64_t) noexcept {
    pool.parallel_for(10, 1, [&](int64_t b, int64_t e) noexcept { inner += static_cast<int>(e - b); });
  });
  EXPECT_EQ(inner.load(), 40);
  base::ThreadPool single(1);
  int n = 0;
  single.parallel_for(5, 2, [&](int64_t b, int64_t e) noexcept { n += static_cast<int>(e - b); });
  EXPECT_EQ(n, 5);
}

// The plan's scratch is reserved once; requests within it reuse it, one beyond it grows the buffer
// (the old one freed first) and is counted, as a slab's overflow is.
TEST(ExecutionContext, ScratchWithinTheReservationNeverGrows) {
  ExecutionContext ctx;
  ctx.reserve_scratch(4096);
  const std::byte* reserved = ctx.scratch(100).data();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(reserved) % 64, 0u);
  EXPECT_EQ(ctx.scratch(4096).data(), reserved);
  EXPECT_EQ(ctx.scratch_stats().growths, 0u);
  EXPECT_EQ(ctx.scratch_stats().peak, 4096u);
  EXPECT_EQ(ctx.scratch(5000).size(), 5000u);
  EXPECT_EQ(ctx.scratch_stats().growths, 1u);
  EXPECT_EQ(ctx.scratch_stats().held, 5000u);
  EXPECT_EQ(ctx.scratch_stats().reserved, 4096u);
  ctx.reserve_scratch(1024);  // never shrinks what is held
  EXPECT_EQ(ctx.scratch_stats().held, 5000u);
}
