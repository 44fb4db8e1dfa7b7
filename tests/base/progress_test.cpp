// Progress's wording from given numbers (no clock), and what it writes to a log stream: a line per
// interval while the job runs, the summary only when a line was printed, nothing for an unfinished job.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "skainet/core/base.hpp"

namespace skainet::base {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

TEST(Progress, BarNamesPercentBytesRateTimeLeftAndItem) {
  const ProgressLine p{
      .label = "quantize", .item = "blk.3.ffn_up.weight", .done = 300 * kMiB, .total = 1000 * kMiB, .seconds = 3.0};
  EXPECT_EQ(progress_bar_text(p),
            "quantize [#########                     ]  30% 300.0 MiB of 1000.0 MiB  100.0 MiB/s  0:07 left  "
            "blk.3.ffn_up.weight");
  EXPECT_EQ(progress_log_text(p),
            "quantize: 30%, 300.0 MiB of 1000.0 MiB, 100.0 MiB/s, 0:07 left, at blk.3.ffn_up.weight");
  EXPECT_EQ(progress_done_text({.label = "quantize", .done = 1000 * kMiB, .total = 1000 * kMiB, .seconds = 10.0}),
            "quantize: 1000.0 MiB in 10.0 s (100.0 MiB/s)");
}

TEST(Progress, NoRateBeforeHalfASecondAndLongJobsInHours) {
  EXPECT_EQ(progress_log_text({.label = "synth", .done = kMiB, .total = 4 * kMiB, .seconds = 0.1}),
            "synth: 25%, 1.0 MiB of 4.0 MiB");
  EXPECT_EQ(progress_log_text({.label = "load", .done = kMiB, .total = 7201 * kMiB, .seconds = 1.0}),
            "load: 0%, 1.0 MiB of 7.0 GiB, 1.0 MiB/s, 2:00:00 left");
}

std::string written(std::FILE* f) {
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s += static_cast<char>(c);
  return s;
}

TEST(Progress, LogLinesThenTheSummary) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p("export", 2 * kMiB, {.stream = f, .output = Progress::Output::Log, .log_every_seconds = 0});
    p.item("token_embd.weight");
    p.advance(kMiB);
    p.finish();
  }
  const std::string s = written(f);
  std::fclose(f);
  EXPECT_NE(s.find("export: 0%, 0 B of 2.0 MiB, at token_embd.weight\n"), std::string::npos) << s;
  EXPECT_NE(s.find("export: 50%, 1.0 MiB of 2.0 MiB, at token_embd.weight\n"), std::string::npos) << s;
  EXPECT_NE(s.find("export: 1.0 MiB in "), std::string::npos) << s;
}

TEST(Progress, ShortPipedJobAndUnfinishedJobStaySilent) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress quick("synth", kMiB, {.stream = f, .output = Progress::Output::Log, .log_every_seconds = 3600});
    quick.advance(kMiB);
    quick.finish();
    Progress failed("quantize", kMiB, {.stream = f, .output = Progress::Output::Log, .log_every_seconds = 3600});
    failed.advance(1);
  }
  EXPECT_EQ(written(f), "");
  std::fclose(f);
}

TEST(Progress, TerminalRedrawsOneLineAndEndsWithTheSummary) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p("loading", kMiB, {.stream = f, .output = Progress::Output::Terminal});
    p.item("output.weight");
    p.advance(kMiB);
    p.finish();
  }
  const std::string s = written(f);
  std::fclose(f);
  EXPECT_EQ(s.rfind("\rloading [", 0), 0u) << s;
  EXPECT_NE(s.find("\rloading: 1.0 MiB in "), std::string::npos) << s;
  EXPECT_EQ(s.back(), '\n');
}

}  // namespace
}  // namespace skainet::base
