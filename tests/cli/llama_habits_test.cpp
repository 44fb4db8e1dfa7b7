// llama.cpp's command-line habits (issue 13, item 4): its spellings where they mean the same here,
// the flags that mean nothing on a CPU accepted and answered, unknown flags refused by their full
// name, the model given the same way everywhere, defaults in --help, --version.
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_support.hpp"

using namespace skainet::cli_test;
using nlohmann::json;

namespace {

const std::string kModel = kStories.string();

}  // namespace

TEST(LlamaHabits, GpuAndLockFlagsAreAcceptedAndAnsweredOnStderr) {
  const RunResult plain = run_skainet(greedy({}));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  // CLI11 alone would read `-ngl 99` as `-n gl` and fail on the value.
  const RunResult r = run_skainet(greedy({"-ngl", "99", "--mlock"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, plain.out);
  EXPECT_NE(r.err.find("-ngl 99: CPU only: ignored"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--mlock: no page is locked"), std::string::npos) << r.err;
}

TEST(LlamaHabits, StopStringsEndTheTextAndAreNotPrinted) {
  const RunResult plain = run_skainet(greedy({}));
  const size_t at = plain.out.find("Lily");
  ASSERT_NE(at, std::string::npos) << plain.out;
  for (const char* flag : {"--stop", "-r", "--reverse-prompt"}) {
    const RunResult r = run_skainet(greedy({flag, "Lily"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, plain.out.substr(0, at)) << flag;
    EXPECT_NE(r.err.find("stop: stop-string"), std::string::npos) << r.err;
  }
}

class LlamaHabitsFiles : public ScratchTest {};
TEST_F(LlamaHabitsFiles, PromptFromAFileAndEscapes) {
  const std::string file = path("prompt.txt").string();
  std::ofstream(file, std::ios::binary) << "Once upon a time";
  std::vector<std::string> args{"run", "-m",     kModel, "-f", file,  "-n",
                                "48",  "--temp", "0",    "-c", "256", "--no-display-prompt"};
  const RunResult from_file = run_skainet(args);
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  EXPECT_EQ(from_file.out, run_skainet(greedy({})).out);
  // -e turns "\n" into a newline (the prompt is echoed here).
  const RunResult escaped = run_skainet({"run", "-m", kModel, "-p", "One\\ntwo\\x21", "-e", "-n", "1", "--temp", "0"});
  ASSERT_EQ(escaped.exit_code, 0) << escaped.err;
  EXPECT_EQ(escaped.out.rfind("One\ntwo!", 0), 0u) << escaped.out;
  const RunResult raw = run_skainet({"run", "-m", kModel, "-p", "One\\ntwo", "-n", "1", "--temp", "0"});
  EXPECT_EQ(raw.out.rfind("One\\ntwo", 0), 0u) << raw.out;
}

TEST(LlamaHabits, CacheTypeOverrideTensorAndNoMmapMapOntoThePlan) {
  const RunResult r = run_skainet({"plan", kModel, "--json", "-ctk", "f32", "-ctv", "f32", "-ot", "ffn_down=f32,heap"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["kv_cache"]["type_k"], "F32");
  EXPECT_EQ(j["kv_cache"]["type_v"], "F32");
  for (const auto& t : j["tensors"]) {
    if (t["name"] == "blk.0.ffn_down.weight") EXPECT_EQ(t["decided_by"], "per-tensor-override") << t.dump();
    // The whole 1.1 MiB file lies within one fault span of the copied ffn_down weights, so the rest
    // is copied too rather than mapped (placement::copy_small_amid_copies).
    if (t["decided_by"] != "per-tensor-override") EXPECT_EQ(t["reason"], "copy-amid-copies") << t.dump();
  }
  EXPECT_EQ(j["totals"]["mapped"].get<uint64_t>(), 0u);
  const json mapped = json::parse(run_skainet({"plan", kModel, "--json"}).out);
  EXPECT_EQ(mapped["totals"]["mapped"], mapped["totals"]["file"]) << "F32 weights are mapped when nothing is copied";
  const json no_mmap = json::parse(run_skainet({"plan", kModel, "--json", "--no-mmap"}).out);
  EXPECT_EQ(no_mmap["totals"]["mapped"], 0) << "every weight read into memory";
  uint64_t tensor_bytes = 0;
  for (const auto& t : no_mmap["tensors"]) tensor_bytes += t["bytes"].get<uint64_t>();
  EXPECT_EQ(no_mmap["totals"]["heap"].get<uint64_t>() + no_mmap["totals"]["pages"].get<uint64_t>(), tensor_bytes);

  // K and V of their own types; a quantized one needs heads of whole blocks (stories260K's are 8
  // elements), and a type no cache holds is named with the list.
  const RunResult differ = run_skainet({"plan", kModel, "-ctk", "f16", "-ctv", "f32", "--kv-type", "bf16"});
  EXPECT_EQ(differ.exit_code, 0) << differ.err;
  EXPECT_NE(differ.out.find("K F16, V F32"), std::string::npos) << "-ctk/-ctv over --kv-type: " << differ.out;
  const RunResult quantized = run_skainet({"run", "-m", kModel, "-p", "x", "-ctk", "q8_0"});
  EXPECT_EQ(quantized.exit_code, 1);
  EXPECT_NE(quantized.err.find("the K cache type Q8_0: the head size 8 is not a whole number of Q8_0's 32-element"),
            std::string::npos)
      << quantized.err;
  const RunResult unknown = run_skainet({"plan", kModel, "-ctv", "q4_k"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("-ctv/--cache-type-v 'q4_k': a KV cache holds F32, F16, BF16, Q8_0, Q4_0"),
            std::string::npos)
      << unknown.err;
  EXPECT_EQ(run_skainet({"plan", kModel, "--no-mmap", "--weight-form", "keep,mapped"}).exit_code, 2);
}

TEST(LlamaHabits, UnknownFlagsAreRefusedByTheirFullName) {
  for (const std::string flag : {"-ngx", "-foo", "-ctx"}) {
    const RunResult r = run_skainet({"run", "-m", kModel, "-p", "x", flag, "1"});
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_NE(r.err.find("unknown option '" + flag + "'"), std::string::npos) << r.err;
  }
  const RunResult r = run_skainet({"plan", kModel, "--frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--frobnicate"), std::string::npos) << r.err;
  // The value of an option that takes text may look like a flag.
  EXPECT_EQ(run_skainet({"run", "-m", kModel, "-p", "-ngl", "-n", "1", "--temp", "0"}).exit_code, 0);
}

TEST(LlamaHabits, TheModelIsGivenTheSameWayToEveryCommand) {
  EXPECT_EQ(run_skainet({"plan", "-m", kModel, "--json"}).out, run_skainet({"plan", kModel, "--json"}).out);
  EXPECT_EQ(run_skainet({"inspect", "-m", kModel, "--json"}).out, run_skainet({"inspect", kModel, "--json"}).out);
  EXPECT_EQ(run_skainet({"tokenize", kModel, "-p", "hi", "--ids"}).out,
            run_skainet({"tokenize", "-m", kModel, "-p", "hi", "--ids"}).out);
  const RunResult positional = run_skainet(
      {"run", kModel, "-p", "Once upon a time", "-n", "48", "--temp", "0", "-c", "256", "--no-display-prompt"});
  EXPECT_EQ(positional.out, run_skainet(greedy({})).out);
  for (const std::string command : {"plan", "inspect", "run", "tokenize", "bench", "chat"}) {
    const RunResult none = run_skainet({command});
    EXPECT_EQ(none.exit_code, 2) << command;
    EXPECT_NE(none.err.find("a model: -m FILE"), std::string::npos) << command << ": " << none.err;
  }
  EXPECT_EQ(run_skainet({"plan", "-m", kModel, kModel}).exit_code, 2) << "both ways at once";
}

TEST(LlamaHabits, HelpShowsDefaultsAndVersionPrintsTheProjectVersion) {
  const RunResult help = run_skainet({"run", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("-n,--n-predict INT=128"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--temp FLOAT=0.8"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--profile TEXT=default"), std::string::npos) << help.out;
  const RunResult version = run_skainet({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  // The version is CMake's project(VERSION ...).
  std::ifstream cmake(std::filesystem::path(SKAINET_SOURCE_DIR) / "CMakeLists.txt");
  std::string line;
  std::string expected;
  while (std::getline(cmake, line))
    if (line.rfind("project(skainet VERSION ", 0) == 0) expected = line.substr(24, line.find(' ', 24) - 24);
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(version.out, "skainet " + expected + "\n");
}
