// The slot pool: FIFO queue accounting (no model), and with stories260K: slots built from one loaded
// model decode concurrently with the same tokens as one at a time, and with zero heap allocations per
// decode step while several are busy.
#include <gtest/gtest.h>

#include <barrier>
#include <chrono>
#include <thread>

#include "alloc_counter.hpp"
#include "skainet/app/serve.hpp"

namespace skainet::serve {
namespace {

using namespace std::chrono_literals;

// Polls until `pred` holds (a waiter has reached the queue); fails after 10 s.
template <class Pred>
void wait_for(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!pred()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "timed out";
    std::this_thread::sleep_for(1ms);
  }
}

TEST(ServeSlots, CountsBusyAndRefusesPastTheQueueLimit) {
  SlotPool pool(2, 1);
  EXPECT_EQ(pool.counts().busy, 0u);
  std::optional<SlotPool::Lease> a = pool.acquire(), b = pool.acquire();
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->index(), b->index());
  EXPECT_EQ(pool.counts().busy, 2u);

  std::optional<SlotPool::Lease> c;
  std::thread waiter([&] { c = pool.acquire(); });
  wait_for([&] { return pool.counts().waiting == 1; });
  EXPECT_FALSE(pool.acquire()) << "a second waiter past a queue limit of 1 must be refused at once";

  const size_t freed = a->index();
  a.reset();
  waiter.join();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->index(), freed);
  EXPECT_EQ(pool.counts().waiting, 0u);
  EXPECT_EQ(pool.counts().busy, 2u);
  b.reset();
  c.reset();
  EXPECT_EQ(pool.counts().busy, 0u);
}

TEST(ServeSlots, WaitersAreServedFirstComeFirstServed) {
  SlotPool pool(1, 8);
  std::optional<SlotPool::Lease> held = pool.acquire();
  std::mutex m;
  std::vector<int> order;
  std::vector<std::thread> waiters;
  for (int i = 0; i < 4; ++i) {
    waiters.emplace_back([&, i] {
      std::optional<SlotPool::Lease> l = pool.acquire();
      ASSERT_TRUE(l);
      std::lock_guard lock(m);
      order.push_back(i);
    });
    wait_for([&] { return pool.counts().waiting == static_cast<size_t>(i + 1); });
  }
  held.reset();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

TEST(ServeSlots, QueueLimitZeroRefusesAnyWait) {
  SlotPool pool(1, 0);
  std::optional<SlotPool::Lease> held = pool.acquire();
  ASSERT_TRUE(held);
  EXPECT_FALSE(pool.acquire());
}

TEST(ServeSlots, CloseWakesWaitersEmptyHanded) {
  SlotPool pool(1, 4);
  std::optional<SlotPool::Lease> held = pool.acquire();
  std::optional<SlotPool::Lease> got;
  bool returned = false;
  std::thread waiter([&] {
    got = pool.acquire();
    returned = true;
  });
  wait_for([&] { return pool.counts().waiting == 1; });
  pool.close();
  waiter.join();
  EXPECT_TRUE(returned);
  EXPECT_FALSE(got);
  EXPECT_FALSE(pool.acquire());
}

constexpr size_t kSlots = 3;
constexpr int kWarmSteps = 4, kCountedSteps = 24;

std::unique_ptr<generate::Engine> open_stories(uint32_t slots) {
  generate::EngineOptions o;
  o.plan.n_ctx = 256;
  o.plan.slots = slots;
  o.threads = 1;
  o.progress = false;
  o.sequence = false;
  return generate::Engine::open(SKAINET_SHARED_MODELS "/stories260K.gguf", o);
}

// Greedy prefill + decode on one slot; returns the tokens.
std::vector<int32_t> greedy(Slot& slot, std::span<const int32_t> prompt, int steps) {
  slot.sample_with({.temperature = 0});
  std::vector<int32_t> out;
  int32_t t = slot.generator.prefill(prompt, 0);
  int64_t pos = static_cast<int64_t>(prompt.size());
  out.push_back(t);
  for (int i = 0; i < steps; ++i) out.push_back(t = slot.generator.decode_step(t, pos++));
  return out;
}

TEST(ServeSlots, PlanPricesEverySlot) {
  const auto one = open_stories(1);
  const auto three = open_stories(kSlots);
  EXPECT_EQ(three->plan.slots, kSlots);
  EXPECT_EQ(three->plan.totals.kv, kSlots * one->plan.totals.kv);
  EXPECT_EQ(three->plan.totals.slab, kSlots * one->plan.totals.slab);
  EXPECT_EQ(three->plan.totals.mapped, one->plan.totals.mapped);  // the weights are shared
  EXPECT_FALSE(three->sequence) << "sequence = false builds no sequence of its own";
  EXPECT_THROW(SlotPool(*one, 2, 1, 0), InvalidArgument) << "more slots than the plan priced";
}

// Three slots decode at once on their own threads, each from a different prompt. Counted: the decode
// steps of all slots (forward + sample, each on its slot's slabs), between two barriers that every
// slot thread reaches after its prefill and warm-up steps — nothing else runs in that window. The
// tokens must equal those of the same prompts run one at a time on a single slot.
TEST(ServeSlots, ConcurrentSlotsDecodeWithoutAllocatingAndAsAlone) {
  const auto engine = open_stories(kSlots);
  SlotPool pool(*engine, kSlots, 1, 0);
  const text::Tokenizer& tok = *engine->tokenizer;
  const std::vector<std::string> prompts = {"Once upon a time", "The cat sat", "Lily wanted to play"};

  std::vector<std::vector<int32_t>> alone;
  {
    std::optional<SlotPool::Lease> l = pool.acquire();
    for (const auto& p : prompts) alone.push_back(greedy(l->slot(), tok.encode(p, true), kWarmSteps + kCountedSteps));
  }

  uint64_t before = 0, after = 0;
  std::barrier start(static_cast<ptrdiff_t>(kSlots), [&]() noexcept { before = test::allocation_count(); });
  std::barrier stop(static_cast<ptrdiff_t>(kSlots), [&]() noexcept { after = test::allocation_count(); });
  std::vector<std::vector<int32_t>> together(kSlots);
  std::vector<std::thread> workers;
  std::vector<SlotPool::Lease> leases;
  for (size_t i = 0; i < kSlots; ++i) leases.push_back(std::move(*pool.acquire()));
  for (size_t i = 0; i < kSlots; ++i) {
    together[i].reserve(1 + kWarmSteps + kCountedSteps);
    workers.emplace_back([&, i] {
      Slot& slot = leases[i].slot();
      const std::vector<int32_t> prompt = tok.encode(prompts[i], true);
      slot.sample_with({.temperature = 0});
      int32_t t = slot.generator.prefill(prompt, 0);
      int64_t pos = static_cast<int64_t>(prompt.size());
      together[i].push_back(t);
      for (int s = 0; s < kWarmSteps; ++s) together[i].push_back(t = slot.generator.decode_step(t, pos++));
      start.arrive_and_wait();
      for (int s = 0; s < kCountedSteps; ++s) together[i].push_back(t = slot.generator.decode_step(t, pos++));
      stop.arrive_and_wait();
    });
  }
  for (auto& w : workers) w.join();
  for (size_t i = 0; i < kSlots; ++i) EXPECT_EQ(together[i], alone[i]) << "slot " << i << ": " << prompts[i];
  if (test::allocation_counter_available()) {
    EXPECT_EQ(after - before, 0u) << kSlots << " slots x " << kCountedSteps << " decode steps allocated";
  }
}

}  // namespace
}  // namespace skainet::serve
