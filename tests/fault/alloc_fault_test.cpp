// Every heap allocation of opening stories260K through generate::Engine and generating a few tokens
// fails in turn (alloc_fault.cpp): each case must end in std::bad_alloc or a skainet::Error — no crash,
// no other exception, no leaked allocation — and the engine must open and generate the same tokens
// again afterwards.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <algorithm>
#include <atomic>
#include <string>

#include <gtest/gtest.h>

#include "alloc_fault.hpp"
#include "skainet/model/engine.hpp"
#include "skainet/io/gguf.hpp"
#include "skainet/core/thread_pool.hpp"
#include "convert/parallel.hpp"

namespace fs = std::filesystem;
using namespace skainet;

namespace {

const fs::path kStories = fs::path(SKAINET_SHARED_MODELS) / "stories260K.gguf";

struct Output {
  std::string text;
  std::vector<int32_t> ids;
  bool operator==(const Output&) const = default;
};

Output open_and_generate() {
  generate::EngineOptions o;
  o.plan.n_ctx = 64;
  o.threads = 2;
  o.progress = false;
  auto e = generate::Engine::open(kStories, o);
  generate::Generator& gen = e->sequence->sample_with({.temperature = 0.0f});
  Output out;
  gen.generate("Once upon a time", {.max_tokens = 4}, [&](std::string_view piece, int32_t id) {
    out.text += piece;
    out.ids.push_back(id);
    return true;
  });
  return out;
}

// SKAINET_ALLOC_FAULT_STRIDE=k tries every kth allocation only (1, every one, is the default).
uint64_t stride() {
  const char* s = std::getenv("SKAINET_ALLOC_FAULT_STRIDE");
  const long v = s ? std::atol(s) : 1;
  return v > 0 ? static_cast<uint64_t>(v) : 1;
}

}  // namespace

TEST(AllocationFaults, EveryAllocationOfLoadAndGenerationFailsCleanly) {
  // Twice unarmed: the first run also makes what lives for the whole process (the CPU's kernel table,
  // function-local statics), which the leak check must not count.
  const Output reference = open_and_generate();
  ASSERT_EQ(reference.ids.size(), 4u);
  test::arm_allocation_failure(0);
  ASSERT_EQ(open_and_generate(), reference);
  const uint64_t total = test::disarm_allocation_failure().count;
  ASSERT_GT(total, 100u) << "the injector does not see the engine's allocations";
  std::vector<uintptr_t> sites;
  sites.reserve(total / stride() + 1);  // before the baseline: the loop must not allocate
  const int64_t live_before = test::live_allocations();

  const auto start = std::chrono::steady_clock::now();
  uint64_t cases = 0, bad_alloc = 0, errors = 0, completed = 0;
  for (uint64_t n = 1; n <= total; n += stride()) {
    // No SCOPED_TRACE: its message would be a live allocation during the leak check.
    if (std::getenv("SKAINET_ALLOC_FAULT_TRACE")) std::fprintf(stderr, "case %llu\n", (unsigned long long)n);
    test::arm_allocation_failure(n);
    std::string other;
    try {
      // A failure the code tolerates (a nothrow allocation with a fallback) must not change the result.
      if (open_and_generate() == reference) ++completed;
    } catch (const std::bad_alloc&) {
      ++bad_alloc;
    } catch (const Error&) {
      ++errors;  // a layer that adds context to what it catches
    } catch (const std::exception& e) {
      other = e.what();
    }
    const test::AllocationFault f = test::disarm_allocation_failure();
    ++cases;
    const int64_t live = test::live_allocations();
    if (live != live_before) test::print_traced_live();
    EXPECT_EQ(other, "") << "allocation " << n << ": an exception other than std::bad_alloc or skainet::Error";
    ASSERT_TRUE(f.fired) << "allocation " << n << ": the run made fewer allocations than the reference run (" << f.count
                         << ")";
    sites.push_back(f.from);
    ASSERT_EQ(live, live_before) << "allocations leaked when allocation " << n << " of " << total << " failed";
  }
  // And afterwards the engine opens and generates exactly as before.
  EXPECT_EQ(open_and_generate(), reference);
  std::sort(sites.begin(), sites.end());
  sites.erase(std::unique(sites.begin(), sites.end()), sites.end());
  EXPECT_EQ(bad_alloc + errors + completed, cases)
      << "a run that completed despite a failed allocation generated other tokens";
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "allocation faults: " << cases << " cases (every " << stride() << " of " << total
            << " allocations per run), " << sites.size() << " distinct call sites (return addresses), " << bad_alloc
            << " std::bad_alloc, " << errors << " skainet::Error, " << completed << " completed, " << seconds << " s\n";
}

// Found by the test above: Header::find and find_tensor are noexcept but built a std::string of the
// key to look it up, so a failed allocation there terminated the process (allocation 500 of 2072).
TEST(AllocationFaults, HeaderLookupsAllocateNothing) {
  const gguf::Header h = gguf::read_header(kStories);
  test::arm_allocation_failure(0);
  EXPECT_NE(h.find("tokenizer.ggml.model"), nullptr);
  EXPECT_EQ(h.find("a key longer than any short-string buffer"), nullptr);
  EXPECT_NE(h.find_tensor("blk.0.attn_output.weight"), nullptr);
  EXPECT_EQ(test::disarm_allocation_failure().count, 0u);
}

// Found reading the code the engine runs (its own pool has one worker, so the test above cannot reach
// it): a worker that failed to start left the ones already started joinable, and destroying them
// terminated the process. Every allocation of starting four workers fails in turn.
TEST(AllocationFaults, ThreadPoolWhoseWorkerCannotStartStopsTheOthers) {
  test::arm_allocation_failure(0);
  { base::ThreadPool pool(5); }
  const uint64_t total = test::disarm_allocation_failure().count;
  ASSERT_GE(total, 4u);
  for (uint64_t n = 1; n <= total; ++n) {
    test::arm_allocation_failure(n);
    EXPECT_THROW(base::ThreadPool pool(5), std::bad_alloc) << "allocation " << n;
    EXPECT_TRUE(test::disarm_allocation_failure().fired);
  }
}

// The same in synth/quantize's parallel loop.
TEST(AllocationFaults, ParallelLoopWhoseThreadCannotStartFinishesTheOthers) {
  std::atomic<uint64_t> sum{0};
  auto add = [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) sum += i;
  };
  test::arm_allocation_failure(0);
  convert::detail::parallel_for(1000, 4, 1, add);
  const uint64_t total = test::disarm_allocation_failure().count;
  ASSERT_GE(total, 3u);
  for (uint64_t n = 1; n <= total; ++n) {
    test::arm_allocation_failure(n);
    EXPECT_THROW(convert::detail::parallel_for(1000, 4, 1, add), std::bad_alloc) << "allocation " << n;
    EXPECT_TRUE(test::disarm_allocation_failure().fired);
  }
}
