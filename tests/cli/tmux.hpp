// A terminal for the CLI tests: tmux runs a command in a detached pane, the test types into it with
// send-keys and reads the screen with capture-pane. A tmux server of its own (-S with a socket in the
// test's scratch folder, -f /dev/null: no user configuration), killed at the end, so no other session
// is touched and nothing is left behind. Every wait polls with a deadline.
#pragma once

#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <utility>

namespace skainet::cli_test {

// `s` in single quotes for sh.
inline std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a shell command and returns its stdout and stderr together, and its exit status.
inline std::pair<std::string, int> shell(const std::string& command) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {"popen failed", -1};
  std::string out;
  std::array<char, 4096> buf;
  while (const size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  return {out, ::pclose(pipe)};
}

// A tmux server on `socket` whose session `session` the test makes (new-session -s).
class Tmux {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Tmux(std::string socket, std::string session = "chat")
      : socket_(std::move(socket)), session_(std::move(session)) {}
  ~Tmux() { shell(base() + " kill-server"); }
  Tmux(const Tmux&) = delete;
  Tmux& operator=(const Tmux&) = delete;

  std::pair<std::string, int> run(const std::string& args) const { return shell(base() + " " + args); }
  std::string screen() const { return run("capture-pane -p -t " + session_).first; }
  std::string format(const std::string& f) const {
    return run("display-message -p -t " + session_ + " " + quoted(f)).first;
  }

  // Polls until `done(screen)` holds; false after `limit`.
  bool wait_for(const std::function<bool(const std::string&)>& done,
                std::chrono::milliseconds limit = std::chrono::seconds(10)) const {
    for (const auto end = Clock::now() + limit; Clock::now() < end;) {
      if (done(screen())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 private:
  std::string base() const { return "tmux -S " + quoted(socket_) + " -f /dev/null"; }
  std::string socket_, session_;
};

}  // namespace skainet::cli_test
