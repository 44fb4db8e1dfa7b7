#include <gtest/gtest.h>

#include "skainet/compute/memory.hpp"

using namespace skainet;
using namespace skainet::memory;

namespace {
uint64_t released_total() {
  const StorageCounters c = storage_counters();
  return c.released[0] + c.released[1] + c.released[2];
}
}  // namespace

TEST(ModelScope, ClosesEverythingOnceAndRefusesLaterAllocation) {
  Tensor w, kv;
  const uint64_t before = released_total();
  {
    ModelScope model("tiny", {.off_heap_threshold = 4096});
    w = model.allocate(Shape{8, 8}, GgmlType::F32, "blk.0.attn_q.weight");
    kv = model.allocate(Shape{64, 64}, GgmlType::F16, "kv.0");  // 8 KiB: pages
    EXPECT_EQ(w.storage().domain(), MemoryDomain::HostHeap);
    EXPECT_EQ(kv.storage().domain(), MemoryDomain::HostPages);
    auto adopted = Storage::heap(32, "adopted");
    Tensor view(adopted, Shape{8}, GgmlType::F32);
    model.adopt(adopted);
    EXPECT_TRUE(view.alive());  // views made before adoption stay valid until close
    EXPECT_EQ(model.stats().storages, 3u);
    model.close();
    EXPECT_EQ(released_total() - before, 3u);
    EXPECT_EQ(model.stats().closed_storages, 3u);
    EXPECT_FALSE(view.alive());
    model.close();  // twice: nothing more
    EXPECT_EQ(released_total() - before, 3u);
    try {
      (void)model.allocate(Shape{4}, GgmlType::F32, "blk.1.ffn_up.weight");
      FAIL();
    } catch (const ScopeClosedError& e) {
      EXPECT_EQ(e.kind, ScopeKind::Model);
      EXPECT_EQ(e.scope_name, "tiny");
      EXPECT_EQ(e.origin, "blk.1.ffn_up.weight");
    }
  }  // destructor after close: no second free
  EXPECT_EQ(released_total() - before, 3u);
  try {
    (void)w.data<float>();
    FAIL();
  } catch (const StorageClosedException& e) {
    EXPECT_EQ(e.origin, "blk.0.attn_q.weight");
    EXPECT_EQ(e.died_in_step, 0u);
  }
  w = Tensor();
  kv = Tensor();
  EXPECT_EQ(released_total() - before, 3u);
}

TEST(AmbientScope, BehavesLikePlainAllocation) {
  Tensor t = ambient().allocate(Shape{3, 3}, GgmlType::F32, "plain");
  EXPECT_EQ(t.storage().domain(), MemoryDomain::HostHeap);
  EXPECT_EQ(t.storage().ownership(), Ownership::Owned);
  EXPECT_EQ(t.offset(), 0u);
  EXPECT_EQ(t.storage().size(), 36u);
  auto storage = t.storage_ref();
  t = Tensor();
  EXPECT_EQ(storage.use_count(), 1);  // lifetime = references, nothing else
}
