// `skainet chat` at a real terminal, in a tmux pane (tmux.hpp). A missing tmux fails the test
// (scripts/setup.sh installs it).
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cli_support.hpp"
#include "tmux.hpp"

using namespace skainet::cli_test;

namespace {

// The screen's non-blank lines, trailing blanks removed (capture-pane keeps a prompt's trailing space
// only while text follows it).
std::vector<std::string> lines(const std::string& screen) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t end; start < screen.size(); start = end + 1) {
    end = std::min(screen.find('\n', start), screen.size());
    const std::string line = screen.substr(start, end - start);
    if (const size_t last = line.find_last_not_of(' '); last != std::string::npos)
      out.push_back(line.substr(0, last + 1));
  }
  return out;
}

std::string last_line(const std::string& screen) {
  const std::vector<std::string> all = lines(screen);
  return all.empty() ? std::string() : all.back();
}

// The prompt lines: "> what was typed", or ">" while empty.
std::vector<std::string> prompts(const std::string& screen) {
  std::vector<std::string> out;
  for (const std::string& line : lines(screen))
    if (line == ">" || line.starts_with("> ")) out.push_back(line);
  return out;
}

}  // namespace

// Each test: tmux installed, a server of its own, and `skainet chat` on stories260K in its pane.
class ChatTerminal : public ScratchTest {
 protected:
  void SetUp() override {
    ASSERT_EQ(shell("tmux -V").second, 0) << "tmux is missing (scripts/setup.sh installs it)";
    // The shell writes the chat's exit status to a file (tmux's #{pane_dead_status} sometimes never
    // comes: tmux 3.3 can leave the exited process unreaped). remain-on-exit keeps the screen to read
    // afterwards; it is set while a placeholder runs, before the chat can end.
    const std::string chat = std::string(SKAINET_BINARY_DIR) + "/skainet chat -m " + quoted(kStories.string()) +
                             " -c 256 --temp 0 -n 8; echo $? > " + quoted(exit_file_);
    const auto [out, status] = tmux_.run(
        "new-session -d -s chat -x 200 -y 50 'exec sleep 60' \\; set-option -t chat remain-on-exit on \\; "
        "respawn-pane -k -t chat " +
        quoted("sh -c " + quoted(chat)));
    ASSERT_EQ(status, 0) << out;
    ASSERT_TRUE(tmux_.wait_for(prompt_is(">"))) << tmux_.screen();
  }

  // Types `text` (literally: no key names) and Enter.
  void type(const std::string& text) {
    tmux_.run("send-keys -t chat -l " + quoted(text));
    tmux_.run("send-keys -t chat Enter");
  }
  static std::function<bool(const std::string&)> prompt_is(std::string line) {
    return [line](const std::string& screen) { return last_line(screen) == line; };
  }
  // The chat's exit status, once it has ended ("" if it has not within the deadline).
  std::string exit_status() {
    tmux_.wait_for([&](const std::string&) { return read_bytes(exit_file_).ends_with("\n"); });
    return read_bytes(exit_file_);
  }

  Tmux tmux_{path("tmux.socket").string()};
  const std::string exit_file_ = path("exit-status").string();
};

TEST_F(ChatTerminal, UpRecallsTheLastMessageAndExitEndsWithCodeZero) {
  // At a terminal a bad command is a message and the chat goes on.
  type("/frobnicate");
  ASSERT_TRUE(tmux_.wait_for([](const std::string& s) {
    return s.find("unknown command '/frobnicate'") != std::string::npos && last_line(s) == ">";
  })) << tmux_.screen();

  // Not ASCII, so the line editor must decode UTF-8 whatever the environment's locale.
  const std::string message = "Once upon a time in Zürich";
  type(message);
  // The reply, then an empty prompt again.
  ASSERT_TRUE(tmux_.wait_for([](const std::string& s) { return prompts(s).size() == 3 && last_line(s) == ">"; }))
      << tmux_.screen();

  tmux_.run("send-keys -t chat Up");
  EXPECT_TRUE(tmux_.wait_for(prompt_is("> " + message))) << tmux_.screen();

  // Ctrl-A Ctrl-K empties the recalled line; /save and /exit must not reach the model.
  tmux_.run("send-keys -t chat C-a C-k");
  ASSERT_TRUE(tmux_.wait_for(prompt_is(">"))) << tmux_.screen();
  const std::string file = path("terminal.json").string();
  type("/save " + file);
  // Not the prompt alone: until the keys arrive the empty prompt of before is on the screen too.
  ASSERT_TRUE(tmux_.wait_for([](const std::string& s) {
    return s.find("saved 2 messages") != std::string::npos && last_line(s) == ">";
  })) << tmux_.screen();
  type("/exit");
  EXPECT_EQ(exit_status(), "0\n") << tmux_.screen();
  EXPECT_EQ(prompts(tmux_.screen()),
            (std::vector<std::string>{"> /frobnicate", "> " + message, "> /save " + file, "> /exit"}))
      << tmux_.screen();
  const std::string saved = read_bytes(file);
  EXPECT_NE(saved.find("\"content\": \"" + message + "\""), std::string::npos) << saved;
}

TEST_F(ChatTerminal, ABackslashContinuesTheMessageAndCtrlDEndsWithCodeZero) {
  type("Once upon\\");
  ASSERT_TRUE(tmux_.wait_for(prompt_is("..."))) << tmux_.screen();
  type("a time");
  ASSERT_TRUE(tmux_.wait_for([](const std::string& s) { return prompts(s).size() == 2 && last_line(s) == ">"; }))
      << tmux_.screen();
  const std::string file = path("continued.json").string();
  type("/save " + file);
  ASSERT_TRUE(tmux_.wait_for([](const std::string& s) {
    return s.find("saved 2 messages") != std::string::npos && last_line(s) == ">";
  })) << tmux_.screen();
  tmux_.run("send-keys -t chat C-d");
  EXPECT_EQ(exit_status(), "0\n") << tmux_.screen();
  const std::string saved = read_bytes(file);
  EXPECT_NE(saved.find(R"("content": "Once upon\na time")"), std::string::npos) << saved;
}
