// The slot pool: FIFO queue accounting (no model), and with stories260K: requests on slots built from
// one loaded model, batched by one stepper, answer as one at a time; a reader stops its own request;
// a request goes to the slot holding its prefix; the prompt cache keeps prefixes beyond the slots.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

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

// A request's n choices take n slots at once, in the same line: one waits until as many are free.
TEST(ServeSlots, SeveralSlotsAreTakenTogether) {
  SlotPool pool(3, 4);
  EXPECT_THROW(pool.acquire({}, 4), InvalidArgument) << "more than the pool holds would wait forever";
  EXPECT_THROW(pool.acquire({}, 0), InvalidArgument);
  std::optional<SlotPool::Lease> one = pool.acquire();
  std::vector<SlotPool::Lease> two = pool.acquire({}, 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_NE(two[0].index(), two[1].index());
  EXPECT_EQ(pool.counts().busy, 3u);
  two.clear();
  std::vector<SlotPool::Lease> three;
  std::thread waiter([&] { three = pool.acquire({}, 3); });
  wait_for([&] { return pool.counts().waiting == 1; });
  EXPECT_EQ(pool.counts().busy, 1u) << "two free slots are not taken while the request needs three";
  one.reset();
  waiter.join();
  EXPECT_EQ(three.size(), 3u);
  EXPECT_EQ(pool.counts().busy, 3u);
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

TEST(ServeSlots, ChoiceTakesTheLongestPrefixThenTheLeastRecentlyUsed) {
  using R = SlotReason;
  // {index, reusable, last used}
  const std::vector<SlotCandidate> slots = {{0, 5, 3}, {1, 40, 1}, {2, 40, 2}, {3, 0, 0}};
  EXPECT_EQ(choose_slot(slots, 60), (SlotChoice{1, 40, R::LongestPrefix})) << "equal prefixes: the older";
  EXPECT_EQ(choose_slot(std::span(slots).first(1), 50), (SlotChoice{0, 5, R::LongestPrefix})) << "a tenth";
  // A prefix under a tenth of the prompt (a shared BOS) is no match: the least recently used slot.
  EXPECT_EQ(choose_slot(slots, 500), (SlotChoice{3, 0, R::LeastRecentlyUsed}));
  EXPECT_EQ(choose_slot(std::span(slots).first(1), 51), (SlotChoice{0, 5, R::LeastRecentlyUsed}))
      << "the only free slot, chosen by age; its prefix is still reused";
  const std::vector<SlotCandidate> none = {{0, 0, 7}, {1, 0, 4}, {2, 0, 9}};
  EXPECT_EQ(choose_slot(none, 10), (SlotChoice{1, 0, R::LeastRecentlyUsed}));
  const std::vector<SlotCandidate> fresh = {{2, 0, 0}, {0, 0, 0}, {1, 0, 0}};
  EXPECT_EQ(choose_slot(fresh, 10).index, 0u) << "never used: the lowest index";
  EXPECT_THROW(choose_slot({}, 10), InvalidArgument);
}

TEST(ServeSlots, AccountingPoolLendsTheLeastRecentlyUsedSlot) {
  SlotPool pool(3, 0);
  std::optional<SlotPool::Lease> a = pool.acquire(), b = pool.acquire(), c = pool.acquire();
  EXPECT_EQ((std::vector<size_t>{a->index(), b->index(), c->index()}), (std::vector<size_t>{0, 1, 2}));
  b.reset();
  a.reset();
  EXPECT_EQ(pool.acquire()->index(), 1u) << "slot 1 was handed back before slot 0";
}

constexpr size_t kSlots = 3;
constexpr int kTokens = 24;

std::unique_ptr<generate::Engine> open_stories(uint32_t slots, uint64_t prompt_cache = 0) {
  generate::EngineOptions o;
  o.plan.n_ctx = 256;
  o.plan.slots = slots;
  o.plan.prompt_cache = prompt_cache;
  o.plan.batch_slots = true;  // as serve plans them
  o.threads = 1;
  o.progress = false;
  o.sequence = false;
  return generate::Engine::open(SKAINET_SHARED_MODELS "/stories260K.gguf", o);
}

// A request through the stepper on a lent slot: its token ids, as the callback sees them.
std::vector<int32_t> request(Stepper& stepper, Slot& slot, std::span<const int32_t> prompt,
                             const text::SamplerConfig& sampling, generate::PrefixReuse reuse,
                             generate::Stats* stats = nullptr) {
  slot.sample_with(sampling);
  std::vector<int32_t> out;
  const generate::Stats s = stepper.generate(
      slot, prompt, {.max_tokens = kTokens, .stop_at_eos = false},
      [&](std::string_view, int32_t id) {
        if (id >= 0) out.push_back(id);
        return true;
      },
      reuse);
  if (stats) *stats = s;
  return out;
}

TEST(ServeSlots, PlanPricesEverySlot) {
  const auto one = open_stories(1);
  const auto three = open_stories(kSlots);
  EXPECT_EQ(three->plan.slots, kSlots);
  EXPECT_EQ(three->plan.totals.kv, kSlots * one->plan.totals.kv);
  EXPECT_EQ(three->plan.totals.slab, three->plan.batch->total()) << "one batch's slabs for all slots";
  EXPECT_EQ(three->plan.totals.mapped, one->plan.totals.mapped);  // the weights are shared
  EXPECT_FALSE(three->sequence) << "sequence = false builds no sequence of its own";
  EXPECT_THROW(SlotPool(*one, 2, 0), InvalidArgument) << "more slots than the plan priced";
}

// Three requests at once on three slots, each from its own thread through one stepper (so their
// prompts and decodes share passes), get the tokens each prompt gets alone on a sequence of its own.
// (Zero heap allocations per batched step: tests/generate/batch_test.cpp.)
TEST(ServeSlots, ConcurrentRequestsAnswerAsAlone) {
  const auto engine = open_stories(kSlots);
  SlotPool pool(*engine, kSlots, 0);
  Stepper stepper(*engine, 1);
  const text::Tokenizer& tok = *engine->tokenizer;
  const std::vector<std::string> prompts = {"Once upon a time", "The cat sat", "Lily wanted to play"};

  std::vector<std::vector<int32_t>> alone;
  const std::unique_ptr<generate::Sequence> own = engine->new_sequence(1);
  for (const auto& p : prompts) {
    std::vector<int32_t> out;
    own->sample_with({.temperature = 0})
        .generate_ids(tok.encode(p, true), {.max_tokens = kTokens, .stop_at_eos = false}, nullptr, &out);
    alone.push_back(out);
  }

  std::vector<std::vector<int32_t>> together(kSlots);
  std::vector<std::thread> workers;
  for (size_t i = 0; i < kSlots; ++i)
    workers.emplace_back([&, i] {
      std::optional<SlotPool::Lease> l = pool.acquire();
      together[i] = request(stepper, l->slot(), tok.encode(prompts[i], true), {.temperature = 0},
                            generate::PrefixReuse::Recompute);
    });
  for (auto& w : workers) w.join();
  for (size_t i = 0; i < kSlots; ++i) EXPECT_EQ(together[i], alone[i]) << "slot " << i << ": " << prompts[i];
}

// A callback that says stop ends its request at once and frees the batch slot; a stop string cuts the
// text and says so; the other requests are not disturbed.
TEST(ServeSlots, AReaderStopsItsRequestAlone) {
  const auto engine = open_stories(2);
  SlotPool pool(*engine, 2, 0);
  Stepper stepper(*engine, 1);
  const std::vector<int32_t> prompt = engine->tokenizer->encode("Once upon a time", true);
  std::optional<SlotPool::Lease> a = pool.acquire(), b = pool.acquire();
  a->slot().sample_with({.temperature = 0});
  int pieces = 0;
  const generate::Stats stopped =
      stepper.generate(a->slot(), prompt, {.max_tokens = 64}, [&](std::string_view, int32_t) { return ++pieces < 3; });
  EXPECT_EQ(stopped.stop, generate::StopReason::Callback);
  EXPECT_EQ(stopped.generated_tokens, 3);

  std::string full;
  b->slot().sample_with({.temperature = 0});
  stepper.generate(b->slot(), prompt, {.max_tokens = 32, .stop_at_eos = false}, [&](std::string_view piece, int32_t) {
    full += piece;
    return true;
  });
  ASSERT_GT(full.size(), 12u);
  generate::Options cut{.max_tokens = 32, .stop_at_eos = false};
  cut.stop_strings = {full.substr(6, 5)};
  std::string shown;
  a->slot().sample_with({.temperature = 0});
  const generate::Stats s = stepper.generate(a->slot(), prompt, cut, [&](std::string_view piece, int32_t) {
    shown += piece;
    return true;
  });
  EXPECT_EQ(s.stop, generate::StopReason::StopString);
  EXPECT_EQ(shown, full.substr(0, 6));
}

}  // namespace
}  // namespace skainet::serve

namespace skainet::serve {
namespace {

// Greedy tokens of a request on a lent slot, with or without its cached prefix; a repeat penalty
// reads the history, so a wrong one would show.
std::vector<int32_t> greedy_reusing(Stepper& stepper, Slot& slot, std::span<const int32_t> prompt,
                                    generate::PrefixReuse reuse, generate::Stats* stats = nullptr) {
  return request(stepper, slot, prompt, {.temperature = 0, .repeat_penalty = 1.2f}, reuse, stats);
}

std::vector<int32_t> prefix_of(const std::vector<int32_t>& v, size_t n) { return {v.begin(), v.begin() + n}; }

// Three slots, each left holding a different story; then requests go to the slot holding their prefix,
// compute only the rest and answer as a fresh slot would.
TEST(ServeSlots, ARequestGoesToTheSlotHoldingItsPrefix) {
  const auto engine = open_stories(kSlots);
  SlotPool pool(*engine, kSlots, 0);
  Stepper stepper(*engine, 1);
  const text::Tokenizer& tok = *engine->tokenizer;
  const std::vector<std::string> stories = {
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun.",
      "The cat sat on the mat and looked at the bird in the tree. The bird sang a happy song.",
      "Tom had a big blue kite. One windy day he took it to the hill with his friend Sam."};
  std::vector<std::vector<int32_t>> ids;
  for (const auto& s : stories) ids.push_back(tok.encode(s, true));
  {
    std::vector<SlotPool::Lease> leases;
    for (size_t i = 0; i < kSlots; ++i) {
      leases.push_back(std::move(*pool.acquire(ids[i])));
      ASSERT_EQ(leases.back().index(), i) << "empty slots are lent in order";
      greedy_reusing(stepper, leases.back().slot(), ids[i], generate::PrefixReuse::Reuse);
    }
  }  // handed back in order: slot 0 is now the least recently used

  // Longest prefix wins: slot 1's story with a new ending.
  const std::vector<int32_t> cat = [&] {
    std::vector<int32_t> v = prefix_of(ids[1], ids[1].size() - 6);
    for (int32_t t : tok.encode(" The dog ran away", false)) v.push_back(t);
    return v;
  }();
  std::vector<int32_t> reused, fresh;
  generate::Stats s;
  {
    std::optional<SlotPool::Lease> l = pool.acquire(cat);
    EXPECT_EQ(l->choice(), (SlotChoice{1, ids[1].size() - 6, SlotReason::LongestPrefix}));
    reused = greedy_reusing(stepper, l->slot(), cat, generate::PrefixReuse::Reuse, &s);
    EXPECT_EQ(static_cast<size_t>(s.cached_tokens), ids[1].size() - 6);
    fresh = greedy_reusing(stepper, l->slot(), cat, generate::PrefixReuse::Recompute);
  }
  EXPECT_EQ(reused, fresh);

  // A shorter prompt that is a prefix of slot 2's: only its last token runs.
  const std::vector<int32_t> kite = prefix_of(ids[2], 12);
  {
    std::optional<SlotPool::Lease> l = pool.acquire(kite);
    EXPECT_EQ(l->choice(), (SlotChoice{2, 11, SlotReason::LongestPrefix}));
    reused = greedy_reusing(stepper, l->slot(), kite, generate::PrefixReuse::Reuse, &s);
    EXPECT_EQ(s.prompt_tokens, 1);
    fresh = greedy_reusing(stepper, l->slot(), kite, generate::PrefixReuse::Recompute);
  }
  EXPECT_EQ(reused, fresh);

  // A prompt that diverges at token 0 (no BOS): the least recently used slot, 0, nothing reused.
  const std::vector<int32_t> other = tok.encode("Ben found a shiny red stone by the river.", false);
  {
    std::optional<SlotPool::Lease> l = pool.acquire(other);
    EXPECT_EQ(l->choice(), (SlotChoice{0, 0, SlotReason::LeastRecentlyUsed}));
    reused = greedy_reusing(stepper, l->slot(), other, generate::PrefixReuse::Reuse, &s);
    EXPECT_EQ(s.cached_tokens, 0);
    fresh = greedy_reusing(stepper, l->slot(), other, generate::PrefixReuse::Recompute);
  }
  EXPECT_EQ(reused, fresh);
}

// ---- the prompt cache ----

generate::SavedPrefix saved(std::vector<int32_t> tokens, size_t cell_bytes = 10) {
  const size_t cells = tokens.size() * cell_bytes;
  return {.tokens = std::move(tokens), .cells = std::vector<std::byte>(cells, std::byte{7})};
}

TEST(ServePromptCache, FindsTheLongestSharedPrefixAndGivesItBack) {
  PromptCache cache(1000);
  cache.put(saved({1, 2, 3, 4}));
  cache.put(saved({1, 2, 9}));
  cache.put(saved({}));  // nothing to keep
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_EQ(cache.bytes(), 4u * 14 + 3u * 14);
  // The common prefix less the prompt's last token (it must run), as a slot's reusable().
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
  ASSERT_TRUE(cache.best(prompt));
  EXPECT_EQ(cache.best(prompt)->reusable, 4u);
  EXPECT_EQ(cache.best(std::vector<int32_t>{1, 2, 3, 4})->reusable, 3u);
  EXPECT_EQ(cache.best(std::vector<int32_t>{1, 2, 9, 9})->reusable, 3u);
  EXPECT_FALSE(cache.best(std::vector<int32_t>{5, 1, 2}));
  EXPECT_FALSE(cache.best(std::vector<int32_t>{1})) << "a one-token prompt reuses nothing";
  EXPECT_FALSE(cache.best({}));
  const generate::SavedPrefix back = cache.take(cache.best(prompt)->entry);
  EXPECT_EQ(back.tokens, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(back.cells.size(), 40u);
  EXPECT_EQ(cache.entries(), 1u);
  EXPECT_EQ(cache.bytes(), 3u * 14);
  // Equal shares: the most recently saved or used.
  cache.put(saved({1, 2, 7}));
  EXPECT_EQ(cache.take(cache.best(std::vector<int32_t>{1, 2, 5})->entry).tokens, (std::vector<int32_t>{1, 2, 7}));
}

TEST(ServePromptCache, KeepsEachPrefixOnceAndWithinItsBound) {
  PromptCache cache(100);  // 14 bytes a token here: 7 tokens fit
  cache.put(saved({1, 2}));
  cache.put(saved({1, 2, 3}));  // holds {1, 2} whole: that entry goes
  EXPECT_EQ(cache.entries(), 1u);
  cache.put(saved({1, 2}));  // held already
  EXPECT_EQ(cache.entries(), 1u);
  EXPECT_EQ(cache.bytes(), 3u * 14);
  cache.put(saved({5, 6, 7}));
  EXPECT_EQ(cache.entries(), 2u);
  // {1, 2} was used last (put again): {5, 6, 7} is now the least recently used and makes room.
  cache.put(saved({1, 2}));
  cache.put(saved({8, 9, 10, 11}));
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_LE(cache.bytes(), cache.limit());
  EXPECT_FALSE(cache.best(std::vector<int32_t>{5, 6, 7, 1}));
  EXPECT_TRUE(cache.best(std::vector<int32_t>{1, 2, 3, 1}));
  cache.put(saved(std::vector<int32_t>(8, 3)));  // over the bound alone: not kept, nothing evicted
  EXPECT_EQ(cache.entries(), 2u);
}

// One slot and a prompt cache: a story, then another (the first is saved as the slot is taken), then
// the first with a new ending gets its prefix back from the cache, computes only the rest and answers
// as computing everything does; the second's prefix was saved in turn.
TEST(ServeSlots, APromptCacheKeepsPrefixesBeyondTheSlots) {
  const auto engine = open_stories(1, uint64_t{8} << 20);
  EXPECT_THROW(SlotPool(*engine, 1, 0, uint64_t{9} << 20), InvalidArgument) << "more than the plan priced";
  SlotPool pool(*engine, 1, 0, uint64_t{8} << 20);
  Stepper stepper(*engine, 1);
  const text::Tokenizer& tok = *engine->tokenizer;
  const std::vector<int32_t> lily =
      tok.encode("Once upon a time, there was a little girl named Lily. She loved to play outside in the sun.", true);
  const std::vector<int32_t> cat =
      tok.encode("The cat sat on the mat and looked at the bird in the tree. The bird sang a happy song.", true);
  const auto new_ending = [&](const std::vector<int32_t>& ids) {
    std::vector<int32_t> v = prefix_of(ids, ids.size() - 6);
    for (int32_t t : tok.encode(" The dog ran away", false)) v.push_back(t);
    return v;
  };
  for (const auto* ids : {&lily, &cat}) {
    std::optional<SlotPool::Lease> l = pool.acquire(*ids);
    EXPECT_EQ(l->choice().reason, SlotReason::LeastRecentlyUsed);
    greedy_reusing(stepper, l->slot(), *ids, generate::PrefixReuse::Reuse);
  }
  for (const auto* ids : {&lily, &cat}) {
    const std::vector<int32_t> prompt = new_ending(*ids);
    std::vector<int32_t> reused, fresh;
    generate::Stats s;
    {
      std::optional<SlotPool::Lease> l = pool.acquire(prompt);
      EXPECT_EQ(l->choice(), (SlotChoice{0, ids->size() - 6, SlotReason::PromptCache}));
      reused = greedy_reusing(stepper, l->slot(), prompt, generate::PrefixReuse::Reuse, &s);
      EXPECT_EQ(static_cast<size_t>(s.cached_tokens), ids->size() - 6);
    }
    {
      // Without the cache: the whole prompt computed afresh (taking the slot saves what it held).
      std::optional<SlotPool::Lease> l = pool.acquire();
      fresh = greedy_reusing(stepper, l->slot(), prompt, generate::PrefixReuse::Recompute, &s);
      EXPECT_EQ(s.cached_tokens, 0);
    }
    EXPECT_EQ(reused, fresh);
  }
}

}  // namespace
}  // namespace skainet::serve
