// `skainet export`'s sizes as a user gives them (issue 24, finding 12): --seq-len is a positive token
// count, and a --ctx beyond the trained context or the memory available is said on stderr as `run`
// says it.
#include <filesystem>

#include "cli_support.hpp"

using namespace skainet::cli_test;

namespace {

class ExportCommand : public ScratchTest {};

}  // namespace

TEST_F(ExportCommand, SeqLenMustBeAPositiveTokenCount) {
  const std::string model = kStories.string();
  for (const std::string n : {"-5", "0", "-9223372036854775808"}) {
    const std::filesystem::path out = path("out" + n);
    const RunResult r =
        run_skainet({"export", model, "-o", out.string(), "-q", "--kernels", "stablehlo", "--seq-len", n});
    EXPECT_EQ(r.exit_code, 2) << n << ": " << r.err;
    EXPECT_NE(r.err.find("--seq-len: '" + n + "' is not a positive token count"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out / "model.mlir")) << n << " was exported";
  }
  // Beyond the context: export_model refuses it (exit code 1), naming both.
  const RunResult beyond = run_skainet({"export", model, "-o", path("beyond").string(), "-q", "--kernels", "stablehlo",
                                        "--ctx", "32", "--seq-len", "33"});
  EXPECT_EQ(beyond.exit_code, 1) << beyond.err;
  EXPECT_NE(beyond.err.find("--seq-len 33 exceeds the context of 32"), std::string::npos) << beyond.err;
  // A valid one, and none (the default), still export.
  const RunResult ok = run_skainet(
      {"export", model, "-o", path("ok").string(), "-q", "--kernels", "stablehlo", "--ctx", "32", "--seq-len", "8"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(std::filesystem::exists(path("ok") / "model.mlir"));
  EXPECT_EQ(ok.err.find("warning"), std::string::npos) << ok.err;
}

TEST_F(ExportCommand, ContextBeyondTrainingAndMemoryWarnsAsRunDoes) {
  const std::string model = kStories.string();
  // The KV cache alone would be terabytes: `plan` and `run` warn about both (run then refuses it).
  const RunResult r = run_skainet(
      {"export", model, "-o", path("huge").string(), "-q", "--kernels", "stablehlo", "--ctx", "4000000000"});
  EXPECT_EQ(r.exit_code, 0) << r.err;  // recorded symbolically: nothing of that size is held now
  EXPECT_NE(r.err.find("skainet: warning: context 4000000000 is beyond the 2048 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("skainet: warning: resident"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("exceeds the memory available now"), std::string::npos) << r.err;
  const RunResult beyond =
      run_skainet({"export", model, "-o", path("beyond").string(), "-q", "--kernels", "stablehlo", "--ctx", "4096"});
  EXPECT_EQ(beyond.exit_code, 0) << beyond.err;
  EXPECT_NE(beyond.err.find("skainet: warning: context 4096 is beyond the 2048 tokens"), std::string::npos)
      << beyond.err;
  EXPECT_EQ(beyond.err.find("exceeds the memory"), std::string::npos) << beyond.err;
}

// The report ends with what to run next, on this export's own paths (issue 28: export did not say).
TEST_F(ExportCommand, ReportSaysWhatToRunNext) {
  const std::filesystem::path out = path("next");
  const RunResult r =
      run_skainet({"export", kStories.string(), "-o", out.string(), "--kernels", "stablehlo", "--ctx", "32"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string compile = "iree-compile " + (out / "model.mlir").string() + " $(cat " +
                              (out / "compile.flags").string() + ") --iree-hal-target-device=local";
  EXPECT_NE(r.out.find(compile), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--parameters=model=" + (out / "model.irpa").string()), std::string::npos) << r.out;
}
