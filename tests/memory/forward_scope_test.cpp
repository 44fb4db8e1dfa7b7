#include <gtest/gtest.h>

#include "skainet/compute/memory.hpp"

using namespace skainet;
using namespace skainet::memory;

TEST(ForwardScope, TwoAllocationsShareOneSlabAndDieAtReset) {
  ForwardScope fs({.slab_bytes = 4096});
  Tensor a = fs.allocate(Shape{3}, GgmlType::F32, "a");  // 12 bytes
  Tensor b = fs.allocate(Shape{5}, GgmlType::F16, "b");  // next 64-byte boundary
  EXPECT_EQ(a.storage().domain(), MemoryDomain::SlabSlice);
  EXPECT_EQ(b.storage().domain(), MemoryDomain::SlabSlice);
  const std::byte* pa = a.bytes();
  const std::byte* pb = b.bytes();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pa) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pb) % 64, 0u);
  EXPECT_EQ(pb - pa, 64);  // one slab, consecutive aligned offsets
  EXPECT_EQ(fs.stats().used, 74u);
  const uint64_t id_a = a.storage().id();

  fs.reset();
  // The memory is handed out again...
  Tensor c = fs.allocate(Shape{3}, GgmlType::F32, "c");
  EXPECT_EQ(c.bytes(), pa);
  // ...but the old views refuse every use, naming storage, origin and step.
  try {
    (void)a.data<float>();
    FAIL() << "read after reset";
  } catch (const StorageClosedException& e) {
    EXPECT_EQ(e.storage_id, id_a);
    EXPECT_EQ(e.origin, "a");
    EXPECT_EQ(e.died_in_step, 1u);
    EXPECT_EQ(e.domain, MemoryDomain::SlabSlice);
  }
  EXPECT_THROW(b.mutable_data<uint16_t>(), StorageClosedException);
  EXPECT_THROW(b.narrow(0, 0, 1), StorageClosedException);
  EXPECT_THROW(retain(a, ambient()), StorageClosedException);
}

TEST(ForwardScope, PeakStaysFlatAndSlabIsAllocatedOnce) {
  ForwardScope fs({.slab_bytes = 1 << 16});
  uint64_t peak = 0;
  for (int step = 0; step < 3; ++step) {
    {
      Tensor x = fs.allocate(Shape{7, 33}, GgmlType::F32, "x");
      Tensor y = fs.allocate(Shape{7, 64}, GgmlType::Q8_0, "y");
      Tensor z = fs.allocate(Shape{100}, GgmlType::BF16, "z");
      EXPECT_EQ(x.storage().generation(), static_cast<uint64_t>(step + 1));
    }
    if (step == 0) peak = fs.stats().peak;
    EXPECT_EQ(fs.stats().peak, peak);
    fs.reset();
  }
  EXPECT_EQ(peak, 960u /*924 F32, aligned*/ + 512 /*476 Q8_0, aligned*/ + 200 /*BF16*/);
  EXPECT_EQ(fs.stats().slab_allocations, 1u);
  EXPECT_EQ(fs.stats().resets, 3u);
  EXPECT_EQ(fs.stats().overflow_count, 0u);
  EXPECT_EQ(fs.stats().total_overflow_count, 0u);
  EXPECT_EQ(fs.stats().slices, 3u);  // records reused every step
  EXPECT_EQ(fs.step(), 4u);
}

TEST(ForwardScope, OverflowIsCountedAndAutoGrowRemovesIt) {
  ForwardScope fs({.slab_bytes = 256, .grow_to_high_water = true});
  {
    Tensor small = fs.allocate(Shape{16}, GgmlType::F32, "small");  // 64 bytes, fits
    Tensor big = fs.allocate(Shape{100}, GgmlType::F32, "big");     // 400 bytes: overflow
    Tensor tail = fs.allocate(Shape{16}, GgmlType::F32, "tail");    // fits after small
    EXPECT_EQ(big.storage().domain(), MemoryDomain::HostHeap);
    EXPECT_EQ(tail.storage().domain(), MemoryDomain::SlabSlice);
    big.mutable_data<float>()[99] = 1.0f;  // overflow storage is real memory
    EXPECT_EQ(fs.stats().overflow_bytes, 400u);
    EXPECT_EQ(fs.stats().overflow_count, 1u);
    EXPECT_EQ(fs.stats().demand, 64u + 400 + 48 + 64);
    Tensor kept = big;
    fs.reset();
    EXPECT_THROW(kept.bytes(), StorageClosedException);  // overflow dies with its step too
  }
  EXPECT_EQ(fs.stats().max_overflow_bytes, 400u);
  EXPECT_EQ(fs.stats().slab_allocations, 2u);  // grown once, at the step boundary
  EXPECT_GE(fs.stats().slab_bytes, 576u);
  for (int step = 0; step < 3; ++step) {
    {
      Tensor small = fs.allocate(Shape{16}, GgmlType::F32, "small");
      Tensor big = fs.allocate(Shape{100}, GgmlType::F32, "big");
      Tensor tail = fs.allocate(Shape{16}, GgmlType::F32, "tail");
      EXPECT_EQ(big.storage().domain(), MemoryDomain::SlabSlice);
    }
    EXPECT_EQ(fs.stats().overflow_count, 0u);
    EXPECT_EQ(fs.stats().overflow_bytes, 0u);
    fs.reset();
  }
  EXPECT_EQ(fs.stats().slab_allocations, 2u);
  EXPECT_EQ(fs.stats().total_overflow_count, 1u);
}

TEST(ForwardScope, HeldDeadRecordsAreNotReused) {
  ForwardScope fs({.slab_bytes = 1024});
  Tensor held = fs.allocate(Shape{4}, GgmlType::F32, "held");
  const uint64_t id = held.storage().id();
  fs.reset();
  Tensor fresh = fs.allocate(Shape{4}, GgmlType::F32, "fresh");
  EXPECT_NE(&fresh.storage(), &held.storage());
  EXPECT_EQ(held.storage().id(), id);  // still explains itself
  EXPECT_EQ(held.storage().origin(), "held");
  EXPECT_EQ(fs.stats().slices, 2u);
}

TEST(ForwardScope, ClosingTheScopeKillsEverything) {
  Tensor t;
  {
    ForwardScope fs({.slab_bytes = 1024});
    t = fs.allocate(Shape{4}, GgmlType::F32, "late");
  }
  EXPECT_FALSE(t.alive());
  EXPECT_THROW(t.bytes(), StorageClosedException);
}

TEST(Retain, SurvivesResetIntoAmbientAndModelScopes) {
  ModelScope model("m");
  ForwardScope fs({.slab_bytes = 4096});
  Tensor in_ambient, in_model, packed_kept;
  {
    Tensor x = fs.allocate(Shape{3, 5}, GgmlType::F32, "x");
    float* p = x.mutable_data<float>();
    for (int i = 0; i < 15; ++i) p[i] = static_cast<float>(i) * 0.5f;
    in_ambient = retain(x.transpose(0, 1), ambient());  // any view: copied contiguous
    in_model = retain(x.narrow(1, 1, 3), model);
    Tensor q = fs.allocate(Shape{2, 32}, GgmlType::Q4_0, "q");
    for (uint64_t i = 0; i < q.nbytes(); ++i) q.mutable_bytes()[i] = std::byte(i * 7);
    packed_kept = retain(q.row(1), ambient());
  }
  fs.reset();
  EXPECT_EQ(in_ambient.shape(), (Shape{5, 3}));
  EXPECT_EQ(in_ambient.storage().domain(), MemoryDomain::HostHeap);
  EXPECT_EQ(in_ambient.data<float>()[1], 2.5f);  // x[1][0]
  EXPECT_EQ(in_model.data<float>()[3], 3.0f);    // x[1][1]
  ASSERT_EQ(packed_kept.type(), GgmlType::Q4_0);
  for (uint64_t i = 0; i < 18; ++i) EXPECT_EQ(packed_kept.bytes()[i], std::byte((18 + i) * 7));
  model.close();
  EXPECT_THROW(in_model.bytes(), StorageClosedException);
}
