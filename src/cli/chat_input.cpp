#include "chat_input.hpp"

#include <langinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>

#include <editline/readline.h>
#include <fmt/format.h>

namespace skainet::cli {

std::atomic<bool> g_chat_interrupted{false};

namespace {

extern "C" void on_sigint(int) { g_chat_interrupted.store(true); }

constexpr const char* kPrompt = "> ";
constexpr const char* kContinuationPrompt = "... ";

}  // namespace

void install_chat_sigint() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  ::sigaction(SIGINT, &sa, nullptr);
}

// One line (without its newline) at a time; nullopt at the end of input or on Ctrl-C.
class ChatInput::Source {
 public:
  virtual ~Source() = default;
  virtual std::optional<std::string> read_line(const char* prompt) = 0;
  // A line the user gave another way (-p), so that Up recalls it too.
  virtual void remember(const std::string&) {}
};

namespace {

// stdin is a pipe or a file: read() in chunks, no prompt, no echo.
class PlainSource final : public ChatInput::Source {
 public:
  std::optional<std::string> read_line(const char*) override {
    for (;;) {
      if (const size_t nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      if (eof_) {
        if (buffer_.empty()) return std::nullopt;
        return std::exchange(buffer_, {});
      }
      char chunk[4096];
      const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) {
        if (g_chat_interrupted.load()) return std::nullopt;
        continue;
      }
      if (n <= 0)
        eof_ = true;
      else
        buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  std::string buffer_;
  bool eof_ = false;
};

// stdin is a terminal: libedit's readline (BSD licence, Debian's libedit-dev; docs/cli.md says why
// not GNU readline). The history lives in memory for the session only.
class EditorSource final : public ChatInput::Source {
 public:
  EditorSource() {
    // libedit reads and edits characters as the locale decodes them: in the "C" locale it drops every
    // byte above 127, so "héllo" would arrive as "hllo". The chat is UTF-8 whatever the user's locale
    // says (the models' text is); only LC_CTYPE, so numbers still print the same.
    const char* ctype = std::setlocale(LC_CTYPE, "");
    if (ctype == nullptr || std::string_view(nl_langinfo(CODESET)) != "UTF-8") std::setlocale(LC_CTYPE, "C.UTF-8");
    rl_readline_name = "skainet";  // ~/.editrc sections
    // libedit's own SIGINT handler would re-raise the signal to the whole process group; ours only
    // sets g_chat_interrupted, and read() returning EINTR ends readline.
    rl_catch_signals = 0;
    using_history();
  }
  ~EditorSource() override { clear_history(); }

  std::optional<std::string> read_line(const char* prompt) override {
    char* raw = readline(prompt);
    if (raw == nullptr) {
      fmt::print("\n");  // the cursor leaves the prompt line
      std::fflush(stdout);
      return std::nullopt;
    }
    std::string line(raw);
    std::free(raw);  // NOLINT: readline's buffer is malloc'd
    if (g_chat_interrupted.load()) return std::nullopt;
    // Each line as typed, so Up recalls exactly what is on screen (a continued line keeps its `\`).
    remember(line);
    return line;
  }

  void remember(const std::string& line) override {
    if (line.find_first_not_of(" \t") != std::string::npos) add_history(line.c_str());
  }
};

}  // namespace

ChatInput::ChatInput(bool terminal, std::optional<std::string> first) : terminal_(terminal), first_(std::move(first)) {
  if (terminal_)
    source_ = std::make_unique<EditorSource>();
  else
    source_ = std::make_unique<PlainSource>();
}

ChatInput::~ChatInput() = default;

std::optional<std::string> ChatInput::line(bool continued) {
  g_chat_interrupted.store(false);
  return source_->read_line(continued ? kContinuationPrompt : kPrompt);
}

std::optional<ChatEntry> ChatInput::next() {
  if (first_) {
    if (terminal_) fmt::print("{}{}\n", kPrompt, *first_);
    source_->remember(*first_);
    return ChatEntry{.text = *std::exchange(first_, std::nullopt), .from_command_line = true};
  }
  for (;;) {
    std::optional<std::string> text = line(false);
    if (!text) return std::nullopt;
    // A trailing backslash continues the entry: dropped, a newline kept in its place. The end of input
    // in the middle ends the entry with what came so far.
    while (!text->empty() && text->back() == '\\') {
      text->back() = '\n';
      std::optional<std::string> more = line(true);
      if (!more) {
        if (g_chat_interrupted.load()) return std::nullopt;
        text->pop_back();
        break;
      }
      text->append(*more);
    }
    if (text->find_first_not_of(" \t\n") != std::string::npos) return ChatEntry{.text = std::move(*text)};
  }
}

}  // namespace skainet::cli
