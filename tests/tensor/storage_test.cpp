#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>

#include "skainet/core/tensor.hpp"
#include "temp_dir.hpp"

using namespace skainet;

namespace {

size_t idx(MemoryDomain d) { return static_cast<size_t>(d); }

}  // namespace

TEST(Storage, HeapIsAlignedIdentifiedAndFreedOnce) {
  const StorageCounters before = storage_counters();
  auto a = Storage::heap(100, "blk.0.attn_q.weight");
  auto b = Storage::heap(0, "empty");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->bytes()) % 64, 0u);
  EXPECT_NE(a->id(), b->id());
  EXPECT_EQ(a->size(), 100u);
  EXPECT_EQ(a->domain(), MemoryDomain::HostHeap);
  EXPECT_EQ(a->ownership(), Ownership::Owned);
  EXPECT_EQ(a->origin(), "blk.0.attn_q.weight");
  EXPECT_TRUE(a->alive());
  EXPECT_TRUE(a->writable());
  a->close();
  a->close();  // idempotent: freed exactly once
  EXPECT_FALSE(a->alive());
  a.reset();
  b.reset();
  const StorageCounters after = storage_counters();
  EXPECT_EQ(after.acquired[idx(MemoryDomain::HostHeap)] - before.acquired[idx(MemoryDomain::HostHeap)], 2u);
  EXPECT_EQ(after.released[idx(MemoryDomain::HostHeap)] - before.released[idx(MemoryDomain::HostHeap)], 2u);
  EXPECT_EQ(after.bytes_released[idx(MemoryDomain::HostHeap)] - before.bytes_released[idx(MemoryDomain::HostHeap)],
            100u);
}

TEST(Storage, PagesArePageAlignedAndUnmappedOnClose) {
  const StorageCounters before = storage_counters();
  {
    auto p = Storage::pages(3 << 20, "kv cache");
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p->bytes()) % static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE)), 0u);
    EXPECT_EQ(p->domain(), MemoryDomain::HostPages);
    std::memset(p->bytes(), 0x5a, p->size());  // writable all the way
    EXPECT_EQ(static_cast<int>(p->bytes()[p->size() - 1]), 0x5a);
  }
  const StorageCounters after = storage_counters();
  EXPECT_EQ(after.released[idx(MemoryDomain::HostPages)] - before.released[idx(MemoryDomain::HostPages)], 1u);
  EXPECT_EQ(after.bytes_acquired[idx(MemoryDomain::HostPages)] - before.bytes_acquired[idx(MemoryDomain::HostPages)],
            uint64_t{3} << 20);
}

TEST(Storage, MappedWindowIsReadOnlyAtAnyOffset) {
  const test::TempDir dir("tensor");
  const auto path = dir / "values.bin";
  std::vector<float> values(3000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * 4));
  }
  // A window starting mid-page (offset 4100 = element 1025).
  auto s = Storage::map_file(path, 4100, 400, "tok_embd.weight");
  EXPECT_EQ(s->domain(), MemoryDomain::MappedFile);
  EXPECT_EQ(s->ownership(), Ownership::Owned);
  EXPECT_FALSE(s->writable());
  Tensor t(s, Shape{10, 10}, GgmlType::F32);
  EXPECT_EQ(t.data<float>()[0], 1025.0f);
  EXPECT_EQ(t.row(3).data<float>()[7], 1025.0f + 37);
  EXPECT_THROW(t.mutable_data<float>(), InvalidArgument);

  auto mapping = std::make_shared<const base::FileMapping>(path, 0, 12000);
  auto w1 = Storage::mapped(mapping, 8, 40, "a");
  auto w2 = Storage::mapped(mapping, 11960, 40, "b");
  EXPECT_EQ(w1->ownership(), Ownership::Borrowed);
  EXPECT_EQ(Tensor(w2, Shape{10}, GgmlType::F32).data<float>()[9], 2999.0f);
  EXPECT_THROW(Storage::mapped(mapping, 11980, 40, "c"), InvalidArgument);
}

TEST(Storage, SliceDiesWithItsGenerationAndNamesTheStep) {
  auto life = std::make_shared<Lifetime>();
  life->steps = true;
  life->label = "forward scope";
  alignas(64) static std::byte slab[256];
  auto rec = Storage::slice_record(life);
  rec->bind_slice(slab, 128, life->generation, "ops::matmul");
  Tensor t(rec, Shape{32}, GgmlType::F32);
  EXPECT_TRUE(t.alive());
  const uint64_t id = rec->id();
  life->generation++;  // the step ends
  EXPECT_FALSE(t.alive());
  try {
    (void)t.data<float>();
    FAIL() << "expected StorageClosedException";
  } catch (const StorageClosedException& e) {
    EXPECT_EQ(e.storage_id, id);
    EXPECT_EQ(e.origin, "ops::matmul");
    EXPECT_EQ(e.died_in_step, 1u);
    EXPECT_EQ(e.domain, MemoryDomain::SlabSlice);
  }
  EXPECT_THROW(t.narrow(0, 0, 4), StorageClosedException);  // a view is a use too
  // Rebinding the record (a new hand-out) does not revive the old view's generation.
  rec->bind_slice(slab, 128, life->generation, "ops::add");
  EXPECT_NE(rec->id(), id);
  EXPECT_TRUE(rec->alive());
}

TEST(Storage, OriginIsTruncatedNotAllocated) {
  const std::string long_name(200, 'x');
  auto s = Storage::heap(8, long_name);
  EXPECT_EQ(s->origin().size(), Storage::kOriginChars);
}

TEST(Storage, ClosedStorageThrowsWithoutStep) {
  auto s = Storage::heap(64, "weights");
  Tensor t(s, Shape{16}, GgmlType::F32);
  s->close();
  try {
    (void)t.bytes();
    FAIL();
  } catch (const StorageClosedException& e) {
    EXPECT_EQ(e.died_in_step, 0u);
    EXPECT_EQ(e.origin, "weights");
  }
}
