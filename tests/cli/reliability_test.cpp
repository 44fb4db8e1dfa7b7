// Issue 10: the nine defects a hostile probe found, each reproduced through the `skainet` command as
// the issue describes it (the library-level tests sit in tests/base, tests/plan, tests/placement, ...).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/cli_support.hpp"
#include "skainet/model/convert.hpp"

extern char** environ;

namespace skainet::cli_test {
namespace {

namespace fs = std::filesystem;

class Reliability : public ScratchTest {
 protected:
  // A copy of stories260K, optionally with one uint32 metadata value replaced.
  fs::path stories_copy(const std::string& name, const std::string& key = {}, uint32_t value = 0) {
    std::string bytes = read_bytes(kStories);
    if (!key.empty()) {
      const size_t at = bytes.find(key);
      EXPECT_NE(at, std::string::npos) << key;
      std::memcpy(bytes.data() + at + key.size() + 4, &value, 4);  // key, uint32 type id, value
    }
    const fs::path p = path(name);
    std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p;
  }
};

// Defect 2: a FIFO as the model hung inspect/plan/run in open() forever.
TEST_F(Reliability, FifoAsTheModelIsRefusedAtOnce) {
  const fs::path fifo = path("model.gguf");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::vector<std::string>& args : {std::vector<std::string>{"inspect", fifo.string()},
                                               {"plan", fifo.string()},
                                               {"run", "-m", fifo.string(), "-p", "x", "-n", "1"}}) {
    SCOPED_TRACE(args[0]);
    // Should the command block, a writer opened after 20 s lets it go, so the test fails, not hangs.
    std::atomic<bool> done{false};
    std::thread watchdog([&] {
      for (int i = 0; i < 200 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (!done) {
        const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
        if (fd >= 0) ::close(fd);
      }
    });
    const auto start = std::chrono::steady_clock::now();
    const RunResult r = run_skainet(args);
    done = true;
    watchdog.join();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("a FIFO, not a regular file"), std::string::npos) << r.err;
  }
}

// Defect 4: llama.block_count = 20000 on stories260K allocated 5.2 GB, printed an 11 MB list, and
// `plan` exited 0.
TEST_F(Reliability, HugeBlockCountFailsFastWithABoundedMessage) {
  const fs::path model = stories_copy("layers.gguf", "llama.block_count", 20000);
  for (const std::vector<std::string>& args : {std::vector<std::string>{"plan", model.string()},
                                               {"plan", model.string(), "--json"},
                                               {"run", "-m", model.string(), "-p", "x", "-n", "1"}}) {
    SCOPED_TRACE(args[0]);
    const auto start = std::chrono::steady_clock::now();
    const RunResult r = run_skainet(args);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_LT(r.err.size(), 2000u) << r.err;
    EXPECT_NE(r.err.find("missing tensor 'blk.5.attn_norm.weight'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("179955 of 180002 required tensors missing"), std::string::npos) << r.err;
  }
}

// Defect 6: `quantize X X` replaced its input and reported the output's size as the input's.
TEST_F(Reliability, QuantizeRefusesToOverwriteItsInputThroughAnyLink) {
  const fs::path in = stories_copy("in.gguf");
  const std::string before = read_bytes(in);
  fs::create_hard_link(in, path("hard.gguf"));
  fs::create_symlink(in, path("soft.gguf"));
  for (const fs::path& out : {in, path("hard.gguf"), path("soft.gguf")}) {
    SCOPED_TRACE(out.string());
    const RunResult r = run_skainet({"quantize", in.string(), out.string(), "Q8_0"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("is the input file"), std::string::npos) << r.err;
    EXPECT_EQ(read_bytes(in), before);
  }
  // A new output path is fine, and the input size printed is the input's (1.1 MiB), not the output's.
  const RunResult r = run_skainet({"quantize", in.string(), path("out.gguf").string(), "Q8_0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("48 tensors, 1.1 MiB -> "), std::string::npos) << r.out;
}

// Defect 5: --repeat-last-n 500000000 took 1.9 GiB of RSS while the plan said 6.8 MiB.
TEST_F(Reliability, RepeatLastNDoesNotAllocateOutsideThePlan) {
  const RunResult r = run_skainet({"run", "-m", kStories.string(), "-p", "Once", "-n", "4", "--ctx", "256",
                                   "--repeat-penalty", "1.1", "--repeat-last-n", "500000000", "-s", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t at = r.err.find("peak RSS ");
  ASSERT_NE(at, std::string::npos) << r.err;
  const size_t open = r.err.find('(', at);
  const uint64_t peak = std::stoull(r.err.substr(open + 1));
  EXPECT_LT(peak, uint64_t{200} << 20) << r.err;
}

// Defect 3: synth/quantize killed by a signal left "OUT.tmp-PID-N" behind.
TEST_F(Reliability, SynthKilledBySignalsLeavesNoTemporary) {
  const fs::path out_dir = path("out");
  fs::create_directories(out_dir);
  const std::string binary = std::string(SKAINET_BINARY_DIR) + "/skainet";
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGKILL}) {
    SCOPED_TRACE(sig);
    const std::string out = (out_dir / "big.gguf").string();
    std::vector<std::string> args = {binary,   "synth", out,         "--preset", "tinyllama-1.1b",
                                     "--type", "Q4_0",  "--threads", "1"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    // Default actions in the child: a shell running us in the background ignores SIGINT, and the
    // child would inherit that (AtomicFile rightly leaves an ignored signal alone).
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t defaults;
    sigemptyset(&defaults);
    for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&defaults, s);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, binary.c_str(), &actions, &attr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // well into writing 591 MiB
    ::kill(pid, sig);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "synth finished before the signal: make the model bigger";
    EXPECT_EQ(WTERMSIG(status), sig) << "the signal's own status, re-raised after the cleanup";
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(out_dir)) left.push_back(e.path().filename().string());
    EXPECT_TRUE(left.empty()) << left.front();
  }
}

// Defect 8: --ctx 20000000 filled 11.9 GiB of KV cache and then failed; plan reported 50.1 GiB on a
// 23 GiB machine without a word.
TEST_F(Reliability, ContextBeyondTrainingWarnsAndPlansBeyondMemoryAreRefused) {
  const std::string model = kStories.string();
  const RunResult plan = run_skainet({"plan", model, "--ctx", "200000000"});  // KV cache alone: 128 GB
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find("warning: context 200000000 is beyond the 2048 tokens"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("exceeds the memory available now"), std::string::npos) << plan.out;
  const RunResult json_plan = run_skainet({"plan", model, "--ctx", "200000000", "--json"});
  ASSERT_EQ(json_plan.exit_code, 0) << json_plan.err;
  const auto j = nlohmann::json::parse(json_plan.out);
  ASSERT_EQ(j["warnings"].size(), 2u);
  EXPECT_EQ(j["warnings"][1]["kind"], "exceeds-available-memory");

  const auto start = std::chrono::steady_clock::now();
  const RunResult run = run_skainet({"run", "-m", model, "-p", "x", "-n", "1", "--ctx", "200000000"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(run.exit_code, 3) << run.err;
  EXPECT_NE(run.err.find("refusing before loading anything"), std::string::npos) << run.err;

  const RunResult beyond = run_skainet({"run", "-m", model, "-p", "x", "-n", "2", "--ctx", "4096", "-s", "1"});
  EXPECT_EQ(beyond.exit_code, 0) << beyond.err;
  EXPECT_NE(beyond.err.find("skainet: warning: context 4096 is beyond the 2048 tokens"), std::string::npos)
      << beyond.err;
}

// Writes `n` bytes at an absolute offset of an existing file.
void poke(const fs::path& file, uint64_t offset, const void* bytes, size_t n) {
  std::fstream f(file, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(n));
}

// Defect 7: a Q8_0 file with NaN scales ran and printed nothing; quantize turned 3e38 into Inf.
TEST_F(Reliability, CheckTensorsFindsNanScalesAndQuantizeRefusesNonFiniteOutput) {
  const fs::path q8 = path("q8.gguf");
  convert::QuantizeOptions o;
  o.scheme = convert::parse_scheme("Q8_0");
  convert::quantize(kStories, q8, o);
  const RunResult clean = run_skainet({"plan", q8.string(), "--check-tensors"});
  EXPECT_EQ(clean.exit_code, 0) << clean.err;
  EXPECT_NE(clean.out.find("checked 48 tensors"), std::string::npos) << clean.out;
  EXPECT_NE(clean.out.find("all finite"), std::string::npos) << clean.out;

  const gguf::TensorInfo t = *gguf::read_header(q8).find_tensor("blk.0.attn_q.weight");
  ASSERT_EQ(t.type, GgmlType::Q8_0);
  const uint16_t nan_f16 = 0x7E00;
  poke(q8, t.file_offset + 3 * 34, &nan_f16, 2);  // the scale of block 3 (34-byte blocks)
  for (const std::vector<std::string>& args : {std::vector<std::string>{"plan", q8.string(), "--check-tensors"},
                                               {"plan", q8.string(), "--check-tensors", "--json"},
                                               {"run", "-m", q8.string(), "-p", "x", "-n", "1", "--check-tensors"}}) {
    SCOPED_TRACE(args[0]);
    const RunResult r = run_skainet(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("tensor 'blk.0.attn_q.weight': element 96 (block 3) is nan"), std::string::npos) << r.err;
  }

  // 3e38 is a finite float, but its Q8_0 scale (3e38 / 127) overflows F16.
  const fs::path big = stories_copy("big.gguf");
  const gguf::TensorInfo w = *gguf::read_header(big).find_tensor("blk.1.ffn_up.weight");
  ASSERT_EQ(w.type, GgmlType::F32);
  const float huge = 3e38f;
  poke(big, w.file_offset + 5 * 4, &huge, 4);
  for (const std::string type : {"Q8_0", "F16"}) {
    SCOPED_TRACE(type);
    const RunResult r = run_skainet({"quantize", big.string(), path("out.gguf").string(), type});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("tensor 'blk.1.ffn_up.weight': element "), std::string::npos) << r.err;
    EXPECT_TRUE(r.err.find("is inf") != std::string::npos || r.err.find("nan") != std::string::npos) << r.err;
    EXPECT_NE(r.err.find("the largest input magnitude in that block is 3e+38"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(path("out.gguf")));
  }
}

// Defect 9: a missing file was exit code 2 in plan/run/tokenize/bench and 1 elsewhere; docs/cli.md
// says 1 (an unreadable file is an error, not a command-line mistake).
TEST_F(Reliability, MissingFileIsExitCodeOneInEveryCommand) {
  const std::string missing = path("missing.gguf").string();
  for (const std::vector<std::string>& args : {std::vector<std::string>{"inspect", missing},
                                               {"plan", missing},
                                               {"run", "-m", missing, "-p", "x"},
                                               {"tokenize", "-m", missing, "-p", "x"},
                                               {"bench", "-m", missing},
                                               {"quantize", missing, path("o.gguf").string(), "Q8_0"},
                                               {"synth", path("o.gguf").string(), "--vocab-from", missing}}) {
    SCOPED_TRACE(args[0]);
    const RunResult r = run_skainet(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("skainet: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(missing + ": cannot open: No such file or directory"), std::string::npos) << r.err;
  }
}

// Defect 9: `plan --explain X --json` printed text.
TEST_F(Reliability, ExplainWithJsonPrintsJson) {
  const RunResult r = run_skainet({"plan", kStories.string(), "--explain", "blk.0.attn_q.weight", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["name"], "blk.0.attn_q.weight");
  EXPECT_EQ(j["reason"], "mapped-file-bytes");
  EXPECT_NE(j["explanation"].get<std::string>().find("blk.0.attn_q.weight"), std::string::npos);
}

}  // namespace
}  // namespace skainet::cli_test
