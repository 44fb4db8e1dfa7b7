// Helpers for the CLI tests: run the built `skainet` binary, a scratch directory per test, and
// reading a tensor back as floats.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "skainet/io/gguf.hpp"
#include "temp_dir.hpp"

namespace skainet::cli_test {

inline const std::filesystem::path kStories = std::filesystem::path(SKAINET_SHARED_MODELS) / "stories260K.gguf";

struct RunResult {
  int exit_code = -1;  // -1000 - signal when the process died of a signal
  std::string out, err;
};

// `run` on stories260K, greedy, 48 tokens at --ctx 256 without the prompt echoed, then `extra`: the
// command line the llama.cpp-habit tests vary one flag of.
inline std::vector<std::string> greedy(std::vector<std::string> extra) {
  std::vector<std::string> args{"run", "-m",  kStories.string(),    "-p", "Once upon a time", "-n", "48", "--temp", "0",
                                "-c",  "256", "--no-display-prompt"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Runs SKAINET_BINARY_DIR/skainet with `args`, capturing stdout and stderr; stdin is empty, or `input`.
RunResult run_skainet(const std::vector<std::string>& args);
RunResult run_skainet(const std::vector<std::string>& args, const std::string& input);
// The same with `env` ("NAME=value") added to this process's environment (a later entry wins).
RunResult run_skainet_env(const std::vector<std::string>& args, const std::vector<std::string>& env,
                          const std::string& input = "");

// A fresh directory for one test (gtest makes a fixture object per test), removed afterwards.
class ScratchTest : public ::testing::Test {
 protected:
  std::filesystem::path path(const std::string& name) const { return dir_ / name; }
  test::TempDir dir_{"cli"};
};

std::string read_bytes(const std::filesystem::path& p);
// All of a tensor's values, decoded with the reference dequantizer.
std::vector<float> read_tensor(const gguf::Header& h, const std::string& name);
// ||a - b|| / ||b||
double relative_error(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace skainet::cli_test
