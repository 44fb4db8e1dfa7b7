#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#include "alloc_counter.hpp"
#include "block_fixture.hpp"

using namespace skainet;
using namespace skainet::test;
using memory::ExecutionContext;
using memory::ForwardScope;

namespace {

std::vector<float> bits(const Tensor& t) { return to_vector(t); }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST(Scoped, SameBitsAsAmbientAcrossResetsAtNonZeroOffsets) {
  ExecutionContext ctx(2);
  memory::ModelScope model("block");
  const Block b = make_block(ctx, model);
  const Tensor x = random_view(Shape{5, 64}, Layout::Offset, 21);
  const std::vector<float> ref = bits(run_block(ctx, b, x, 3));  // ambient
  ForwardScope fs({.slab_bytes = 1 << 20});
  for (int step = 0; step < 4; ++step) {
    const std::vector<float> got = ctx.step(fs, [&] {
      // Shift everything that follows to a different slab offset each step.
      const Tensor pad = ctx.empty(Shape{1 + 37 * step}, GgmlType::F32, "pad");
      const Tensor y = run_block(ctx, b, x, 3);
      EXPECT_EQ(y.storage().domain(), MemoryDomain::SlabSlice);
      EXPECT_GT(y.bytes() - pad.bytes(), 0);
      return bits(y);
    });
    EXPECT_TRUE(same_bits(got, ref)) << "step " << step;
  }
  EXPECT_EQ(fs.stats().slab_allocations, 1u);
  EXPECT_EQ(fs.stats().total_overflow_count, 0u);
}

TEST(Scoped, OverflowStillComputesAndAutoGrowRemovesIt) {
  ExecutionContext ctx(2);
  const Block b = make_block(ctx, ctx.ambient());
  const Tensor x = random_view(Shape{3, 64}, Layout::Contiguous, 22);
  const std::vector<float> ref = bits(run_block(ctx, b, x, 0));
  ForwardScope fixed({.slab_bytes = 2048});
  const std::vector<float> small = ctx.step(fixed, [&] {
    const std::vector<float> v = bits(run_block(ctx, b, x, 0));
    EXPECT_GT(fixed.stats().overflow_count, 0u);
    EXPECT_GT(fixed.stats().overflow_bytes, 0u);
    EXPECT_GT(fixed.stats().used, 0u);
    return v;
  });
  EXPECT_TRUE(same_bits(small, ref));
  EXPECT_GT(fixed.stats().max_overflow_bytes, 0u);

  ForwardScope grow({.slab_bytes = 2048, .grow_to_high_water = true});
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> got = ctx.step(grow, [&] {
      const std::vector<float> v = bits(run_block(ctx, b, x, 0));
      if (step > 0) {
        EXPECT_EQ(grow.stats().overflow_count, 0u) << "step " << step;
      }
      return v;
    });
    EXPECT_TRUE(same_bits(got, ref)) << "step " << step;
  }
  EXPECT_EQ(grow.stats().slab_allocations, 2u);
  EXPECT_EQ(grow.stats().slab_bytes, grow.stats().peak);
}

TEST(Scoped, SteadyStateStepsDoNotTouchTheHeap) {
  if (!allocation_counter_available())
    GTEST_SKIP() << "the malloc counter is disabled under sanitizers (they own malloc)";
  ExecutionContext ctx(2);
  memory::ModelScope model("block");
  const Block b = make_block(ctx, model);
  const Tensor x = random_view(Shape{4, 64}, Layout::Offset, 23);
  ForwardScope fs({.slab_bytes = 0, .grow_to_high_water = true});  // sized by the warm-up step
  float checksum = 0;
  auto step = [&](int64_t pos) {
    checksum += ctx.step(fs, [&] { return run_block(ctx, b, x, pos).data<float>()[5]; });
  };
  for (int i = 0; i < 3; ++i) step(i);  // warm-up: grows the slab, fills the slice records
  const uint64_t warmup_overflows = fs.stats().total_overflow_count;  // all in step 1, before it grew
  EXPECT_GT(warmup_overflows, 0u);
  const uint64_t before = allocation_count();
  for (int i = 3; i < 10; ++i) step(i);
  const uint64_t allocations = allocation_count() - before;
  EXPECT_EQ(allocations, 0u);
  EXPECT_EQ(fs.stats().total_overflow_count, warmup_overflows);
  EXPECT_EQ(fs.stats().slab_allocations, 1u);  // once, at the first step boundary
  EXPECT_EQ(fs.stats().resets, 10u);
  EXPECT_TRUE(std::isfinite(checksum));
  // The counter does count: one plain allocation shows up.
  // (Through a volatile pointer: an optimizer may drop a plain `delete new int`.)
  void* (*volatile allocate)(size_t) = std::malloc;
  const uint64_t probe = allocation_count();
  std::free(allocate(16));
  EXPECT_EQ(allocation_count() - probe, 1u);
}
