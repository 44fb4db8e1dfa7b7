// Issue 10, defect 8: a context beyond the trained one and a plan bigger than the machine's available
// memory are warnings, as data; `run` refuses the second (tests/cli/reliability_test.cpp).
#include <gtest/gtest.h>

#include "skainet/model/plan.hpp"

using namespace skainet;
using namespace skainet::plan;

namespace {

MemoryPlan stories_plan(PlanOptions o) {
  return make_plan(gguf::read_header(std::string(SKAINET_SHARED_MODELS) + "/stories260K.gguf"),
                   placement::MemoryProfile::preset("default"), placement::Platform::detect(), {}, o);
}

}  // namespace

TEST(PlanWarnings, ContextBeyondTheTrainedOne) {
  EXPECT_TRUE(stories_plan({.n_ctx = 2048}).warnings.empty());
  const MemoryPlan p = stories_plan({.n_ctx = 4096});
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_EQ(p.warnings[0], (PlanWarning{PlanWarningKind::ContextBeyondTraining, 4096, 2048}));
  EXPECT_NE(render_text(p).find("warning: context 4096 is beyond the 2048 tokens"), std::string::npos)
      << render_text(p);
}

TEST(PlanWarnings, ResidentBeyondAvailableMemory) {
  EXPECT_TRUE(stories_plan({.n_ctx = 256, .available_memory = uint64_t{1} << 40}).warnings.empty());
  const MemoryPlan p = stories_plan({.n_ctx = 256, .available_memory = 1 << 20});
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_EQ(p.warnings[0].kind, PlanWarningKind::ExceedsAvailableMemory);
  EXPECT_EQ(p.warnings[0].value, p.totals.resident());
  EXPECT_EQ(p.warnings[0].limit, 1u << 20);
  EXPECT_TRUE(p.has_warning(PlanWarningKind::ExceedsAvailableMemory));
  EXPECT_EQ(from_json(to_json(p)), p);  // warnings survive the JSON round trip
}
