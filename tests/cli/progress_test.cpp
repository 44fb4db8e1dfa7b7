// A long job's progress as a user sees it (issue 28): piped, plain lines every
// SKAINET_PROGRESS_EVERY seconds and a summary; at a terminal (a tmux pane, tmux.hpp) a bar redrawn in
// place that ends as the summary; nothing with --quiet.
#include <algorithm>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_support.hpp"
#include "tmux.hpp"

using namespace skainet::cli_test;

namespace {

class Progress : public ScratchTest {};

const std::vector<std::string> kEvery{"SKAINET_PROGRESS_EVERY=0.001"};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// "synth: 42%, 4.0 MiB of 93.7 MiB[, 85.3 MiB/s, 0:01 left], at blk.3.ffn_up.weight"
bool is_log_line(const std::string& line, const std::string& label) {
  static const std::regex re(R"(^(\w+): \d{1,3}%, [0-9.]+ (B|KiB|MiB|GiB) of [0-9.]+ (B|KiB|MiB|GiB)(, .*)?$)");
  std::smatch m;
  return std::regex_match(line, m, re) && m[1] == label;
}

// "synth: 93.7 MiB in 1.1 s (85.3 MiB/s)" (the rate only after half a second)
bool is_summary(const std::string& line, const std::string& label) {
  static const std::regex re(R"(^(\w+): [0-9.]+ (B|KiB|MiB|GiB) in [0-9.]+ s( \([0-9.]+ (B|KiB|MiB|GiB)/s\))?$)");
  std::smatch m;
  return std::regex_match(line, m, re) && m[1] == label;
}

}  // namespace

TEST_F(Progress, PipedSynthPrintsPlainLinesAndASummary) {
  // One thread, 64 blocks: a second or two (0.3 s at 6 blocks on all cores is too short); lines after the first half
  // second carry a rate and the time left.
  const RunResult r = run_skainet_env({"synth", path("s.gguf").string(), "--preset", "stories15M", "--type", "Q4_K_M",
                                       "--layers", "64", "--threads", "1"},
                                      kEvery);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = lines_of(r.err);
  ASSERT_GE(lines.size(), 3u) << r.err;
  bool rate = false, tensor = false;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    EXPECT_TRUE(is_log_line(lines[i], "synth")) << lines[i];
    EXPECT_EQ(lines[i].find('\r'), std::string::npos) << "no redraws when piped";
    EXPECT_EQ(lines[i].find('\x1b'), std::string::npos) << "no escapes when piped";
    if (lines[i].find(" MiB/s, ") != std::string::npos && lines[i].find(" left, at ") != std::string::npos) rate = true;
    if (lines[i].find(", at blk.") != std::string::npos || lines[i].find(", at token_embd") != std::string::npos)
      tensor = true;
  }
  EXPECT_TRUE(rate) << "no line with a rate and the time left:\n" << r.err;
  EXPECT_TRUE(tensor) << "no line naming a tensor:\n" << r.err;
  EXPECT_TRUE(is_summary(lines.back(), "synth")) << lines.back();
  EXPECT_NE(lines.back().find("/s)"), std::string::npos) << lines.back();
}

TEST_F(Progress, QuietJobsPrintNothingEvenWithTheInterval) {
  for (const std::string flag : {"-q", "--quiet"}) {
    const RunResult synth =
        run_skainet_env({"synth", path("s.gguf").string(), "--preset", "stories15M", "--type", "Q8_0", flag}, kEvery);
    EXPECT_EQ(synth.exit_code, 0) << synth.err;
    EXPECT_EQ(synth.err, "") << flag;
    const RunResult quantize =
        run_skainet_env({"quantize", kStories.string(), path("q.gguf").string(), "Q8_0", flag}, kEvery);
    EXPECT_EQ(quantize.exit_code, 0) << quantize.err;
    EXPECT_EQ(quantize.err, "") << flag;
    const RunResult exported = run_skainet_env(
        {"export", kStories.string(), "-o", path("x" + flag).string(), "--kernels", "stablehlo", "--ctx", "32", flag},
        kEvery);
    EXPECT_EQ(exported.exit_code, 0) << exported.err;
    EXPECT_EQ(exported.err.find("export: "), std::string::npos) << flag << ": " << exported.err;
  }
}

TEST_F(Progress, PipedQuantizeAndExportPrintLinesWithTheInterval) {
  const RunResult quantize = run_skainet_env({"quantize", kStories.string(), path("q.gguf").string(), "Q8_0"}, kEvery);
  ASSERT_EQ(quantize.exit_code, 0) << quantize.err;
  std::vector<std::string> lines = lines_of(quantize.err);
  ASSERT_GE(lines.size(), 2u) << quantize.err;
  EXPECT_TRUE(is_log_line(lines.front(), "quantize")) << quantize.err;
  EXPECT_NE(quantize.err.find(", at "), std::string::npos) << quantize.err;
  EXPECT_TRUE(is_summary(lines.back(), "quantize")) << quantize.err;

  const RunResult exported = run_skainet_env(
      {"export", kStories.string(), "-o", path("x").string(), "--kernels", "stablehlo", "--ctx", "32"}, kEvery);
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  bool line = false, summary = false;
  for (const std::string& l : lines_of(exported.err)) {
    line = line || is_log_line(l, "export");
    summary = summary || is_summary(l, "export");
  }
  EXPECT_TRUE(line) << exported.err;
  EXPECT_TRUE(summary) << exported.err;
}

TEST_F(Progress, ABadIntervalIsNamedAndTheDefaultUsed) {
  for (const std::string bad : {"abc", "0", "-1", "2s"}) {
    const RunResult r = run_skainet_env({"quantize", kStories.string(), path("q.gguf").string(), "Q8_0"},
                                        {"SKAINET_PROGRESS_EVERY=" + bad});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // The default of 5 s: this short job prints no line, only the warning.
    EXPECT_EQ(r.err,
              "skainet: warning: SKAINET_PROGRESS_EVERY='" + bad + "' is not a positive number of seconds; using 5\n")
        << bad;
  }
}

// At a terminal: the bar (label, [, %, bytes, rate, time left, tensor) redrawn in place, replaced by the
// summary at the end; exit code 0. A missing tmux fails the test (scripts/setup.sh installs it).
TEST_F(Progress, TerminalShowsABarThenTheSummary) {
  ASSERT_EQ(shell("tmux -V").second, 0) << "tmux is missing (scripts/setup.sh installs it)";
  Tmux tmux(path("tmux.socket").string(), "job");
  const std::string exit_file = path("exit-status").string();
  // One thread, 64 blocks: a second or two, so the bar is on the screen a while.
  const std::string job = std::string(SKAINET_BINARY_DIR) + "/skainet synth " + quoted(path("t.gguf").string()) +
                          " --preset stories15M --type Q4_K_M --layers 64 --threads 1 > /dev/null; echo $? > " +
                          quoted(exit_file);
  // remain-on-exit keeps the screen to read afterwards; set while a placeholder runs.
  const auto [out, status] = tmux.run(
      "new-session -d -s job -x 200 -y 50 'exec sleep 60' \\; set-option -t job remain-on-exit on \\; "
      "respawn-pane -k -t job " +
      quoted("sh -c " + quoted(job)));
  ASSERT_EQ(status, 0) << out;
  static const std::regex bar(R"(synth \[#* *\] +\d{1,3}% [0-9.]+ \w+ of [0-9.]+ \w+)");
  // Polled until the job ends: some screen on the way shows the bar with a rate and the time left.
  std::string seen;
  bool bar_seen = false;
  ASSERT_TRUE(tmux.wait_for(
      [&](const std::string& s) {
        if (std::regex_search(s, bar)) {
          seen = s;
          bar_seen = bar_seen || (s.find("/s  ") != std::string::npos && s.find(" left  ") != std::string::npos);
        }
        return read_bytes(exit_file).ends_with("\n");
      },
      std::chrono::seconds(60)))
      << tmux.screen();
  EXPECT_TRUE(bar_seen) << "no bar with a rate and the time left; last seen:\n" << seen;
  EXPECT_EQ(read_bytes(exit_file), "0\n") << tmux.screen();
  // With its history: tmux 3.3 can scroll the screen when it writes "Pane is dead" below the summary.
  const std::string screen = tmux.run("capture-pane -p -S - -t job").first;
  // The summary in the bar's place: no bar left on the screen (tmux adds its "Pane is dead" line).
  const std::vector<std::string> shown = lines_of(screen);
  EXPECT_FALSE(std::regex_search(screen, bar)) << screen;
  EXPECT_TRUE(std::any_of(shown.begin(), shown.end(), [](std::string l) {
    l.erase(l.find_last_not_of(' ') + 1);
    return is_summary(l, "synth") && l.ends_with("/s)");
  })) << screen;
}
