// The unchanged `skainet` binary writing files (synth, quantize, export) with the I/O fault injector
// LD_PRELOADed (io_fault.c): every call of every file operation it makes on its outputs fails in turn.
// Each case must end in a clean error naming the file and the operation, leave no partial or temporary
// file, and leave each pre-existing output either untouched or (for files committed before the fault,
// or when only the directory's fsync failed after the rename) complete and new. In the asan preset the
// binary runs under ASan+UBSan+LeakSanitizer, whose reports would appear on stderr.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "cli/cli_support.hpp"

namespace fs = std::filesystem;
using namespace skainet;
using namespace skainet::cli_test;

namespace {

struct Command {
  std::string name;
  std::vector<std::string> args;     // "@D" stands for the output directory
  std::vector<std::string> outputs;  // relative to it, in the order the command commits them
};

struct Fault {
  const char* op;        // the injector's operation
  int err;               // 0 for short_write
  bool persist;          // every later call fails too
  const char* count_of;  // the counted operation whose calls are enumerated
};

// What the command did to its outputs, as counted by the injector (its REPORT file).
struct Report {
  std::map<std::string, long> calls;
  bool fired = false, on_directory = false;
};

Report read_report(const fs::path& p) {
  Report r;
  std::ifstream in(p);
  std::string key;
  long value = 0;
  while (in >> key >> value) {
    if (key == "fired")
      r.fired = value != 0;
    else if (key == "fired_on_directory")
      r.on_directory = value != 0;
    else
      r.calls[key] = value;
  }
  return r;
}

std::string old_contents(const std::string& name) { return "pre-existing " + name + "\n"; }

// Everything under `dir`, as paths relative to it (directories end in '/').
std::vector<std::string> tree(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    names.push_back(fs::relative(e.path(), dir).string() + (e.is_directory() ? "/" : ""));
  std::sort(names.begin(), names.end());
  return names;
}

class IoFaultCli : public ScratchTest {
 protected:
  fs::path out_dir() const { return path("out"); }
  fs::path report_path() const { return path("report"); }

  std::vector<std::string> args_of(const Command& c) const {
    std::vector<std::string> a;
    for (const std::string& s : c.args) a.push_back(s.starts_with("@D") ? out_dir().string() + s.substr(2) : s);
    return a;
  }

  // A fresh output directory holding the pre-existing outputs.
  void reset(const Command& c) const {
    fs::remove_all(out_dir());
    for (const std::string& o : c.outputs) {
      fs::create_directories((out_dir() / o).parent_path());
      std::ofstream(out_dir() / o, std::ios::binary) << old_contents(o);
    }
  }

  RunResult run(const Command& c, const char* op, long n, int err, bool persist) const {
    fs::remove(report_path());
    return run_skainet_env(args_of(c),
                           {"LD_PRELOAD=" SKAINET_IOFAULT_LIBRARY, "SKAINET_IOFAULT_DIR=" + out_dir().string(),
                            std::string("SKAINET_IOFAULT_OP=") + op, "SKAINET_IOFAULT_N=" + std::to_string(n),
                            "SKAINET_IOFAULT_ERRNO=" + std::to_string(err),
                            std::string("SKAINET_IOFAULT_PERSIST=") + (persist ? "1" : "0"),
                            "SKAINET_IOFAULT_REPORT=" + report_path().string()});
  }

  // Runs every fault at every call of its operation; returns the number of cases.
  int check_command(const Command& c) {
    // The reference: the outputs of a run without a fault, and how many calls of each operation it makes.
    reset(c);
    const RunResult clean = run(c, "write", 0, 0, false);
    EXPECT_EQ(clean.exit_code, 0) << clean.err;
    const Report counted = read_report(report_path());
    std::map<std::string, std::string> golden;
    for (const std::string& o : c.outputs) golden[o] = read_bytes(out_dir() / o);
    const std::vector<std::string> expected_tree = tree(out_dir());
    EXPECT_GE(counted.calls.at("write"), 1);
    EXPECT_EQ(counted.calls.at("rename"), static_cast<long>(c.outputs.size()));

    const Fault faults[] = {
        {"write", ENOSPC, true, "write"},   {"write", EIO, false, "write"},     {"short_write", 0, false, "write"},
        {"fsync", EIO, false, "fsync"},     {"fsync", ENOSPC, false, "fsync"},  {"close", EIO, false, "close"},
        {"rename", EIO, false, "rename"},   {"rename", EXDEV, false, "rename"}, {"linkat", EIO, false, "linkat"},
        {"linkat", ENOSPC, true, "linkat"},
    };
    int cases = 0;
    for (const Fault& f : faults) {
      const long calls = counted.calls.at(f.count_of);
      for (long n = 1; n <= calls; ++n) {
        SCOPED_TRACE(testing::Message() << c.name << ": " << f.op << " call " << n << " of " << calls << " fails with "
                                        << (f.err ? std::strerror(f.err) : "a short count")
                                        << (f.persist ? ", and every later one" : ""));
        reset(c);
        const RunResult r = run(c, f.op, n, f.err, f.persist);
        const Report rep = read_report(report_path());
        ++cases;
        EXPECT_TRUE(rep.fired) << "the injector never reached the call";
        EXPECT_EQ(r.err.find("Sanitizer"), std::string::npos) << r.err;
        EXPECT_EQ(r.err.find("runtime error"), std::string::npos) << r.err;
        EXPECT_EQ(tree(out_dir()), expected_tree) << "a partial or temporary file is left, or an output is missing";

        // Outputs are committed in order: new ones, then untouched ones — never anything else.
        size_t replaced = 0;
        while (replaced < c.outputs.size() &&
               read_bytes(out_dir() / c.outputs[replaced]) == golden[c.outputs[replaced]])
          ++replaced;
        for (size_t i = replaced; i < c.outputs.size(); ++i)
          EXPECT_EQ(read_bytes(out_dir() / c.outputs[i]), old_contents(c.outputs[i]))
              << c.outputs[i] << " is neither old nor new";

        const bool must_fail = f.err != 0 && !(std::strcmp(f.op, "close") == 0 && rep.on_directory) &&
                               !(std::strcmp(f.op, "linkat") == 0 && !f.persist);
        if (f.err == 0 || (!must_fail && r.exit_code == 0)) {
          // A short write is completed; a closed directory descriptor loses nothing; a failed linkat is
          // retried another way (AT_EMPTY_PATH) and succeeds where the process may use it.
          EXPECT_EQ(r.exit_code, 0) << r.err;
          EXPECT_EQ(replaced, c.outputs.size()) << "a successful run wrote every output";
          continue;
        }
        EXPECT_EQ(r.exit_code, 1) << r.err;
        EXPECT_EQ(r.err.rfind("skainet: error: ", 0), 0u) << r.err;
        EXPECT_NE(r.err.find(std::strerror(f.err)), std::string::npos) << "the message names the cause: " << r.err;
        const std::string word = std::strcmp(f.op, "rename") == 0   ? "rename"
                                 : std::strcmp(f.op, "linkat") == 0 ? "linkat"
                                                                    : f.op;
        EXPECT_NE(r.err.find(word), std::string::npos) << "the message names the operation: " << r.err;
        bool names_output = false;
        for (const std::string& o : c.outputs)
          names_output = names_output || r.err.find((out_dir() / o).string()) != std::string::npos;
        EXPECT_TRUE(names_output) << "the message names the file: " << r.err;
        if (!rep.on_directory) {
          EXPECT_LT(replaced, c.outputs.size()) << "the file being written when the fault hit is untouched";
        }
      }
    }
    std::cout << c.name << ": " << cases << " fault cases (calls per run: write " << counted.calls.at("write")
              << ", fsync " << counted.calls.at("fsync") << ", close " << counted.calls.at("close") << ", rename "
              << counted.calls.at("rename") << ", linkat " << counted.calls.at("linkat") << ")\n";
    return cases;
  }
};

}  // namespace

TEST_F(IoFaultCli, SynthFailsCleanlyAtEveryFileOperation) {
  // 5.6 MiB of F32: two flushes of AtomicFile's 4 MiB buffer.
  const int cases = check_command(
      {"synth", {"synth", "@D/tiny.gguf", "--preset", "tiny", "--type", "F32", "--threads", "1"}, {"tiny.gguf"}});
  EXPECT_GE(cases, 12);
}

TEST_F(IoFaultCli, QuantizeFailsCleanlyAtEveryFileOperation) {
  const int cases =
      check_command({"quantize", {"quantize", kStories.string(), "@D/q8.gguf", "Q8_0", "--threads", "1"}, {"q8.gguf"}});
  EXPECT_GE(cases, 11);
}

TEST_F(IoFaultCli, ExportFailsCleanlyAtEveryFileOperation) {
  const int cases = check_command({"export",
                                   {"export", kStories.string(), "-o", "@D/exp", "-q", "--ctx", "64"},
                                   {"exp/model.irpa", "exp/model.mlir", "exp/compile.flags",
                                    "exp/compile.llvm-cpu.flags", "exp/run.flags", "exp/report.txt"}});
  EXPECT_GE(cases, 60);
}
