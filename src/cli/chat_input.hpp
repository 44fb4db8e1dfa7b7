// Where `skainet chat` gets the user's entries. At a terminal: a line editor (libedit's readline API:
// arrows, Home/End, Ctrl-A/E/K/W, Up and Down through this session's history); from a pipe or a file:
// plain reads, so scripts see no prompts or terminal codes. Either way a line ending in `\` goes on
// onto the next one (the backslash dropped, a newline kept), so one entry can span several lines.
//
//   install_chat_sigint();
//   ChatInput input(::isatty(STDIN_FILENO) != 0, first_message);
//   while (std::optional<ChatEntry> e = input.next()) { ... e->text ... }
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

namespace skainet::cli {

// Set by SIGINT once install_chat_sigint() ran: Ctrl-C stops a reply, and at the prompt ends the chat.
// Callers clear it before what Ctrl-C may interrupt.
extern std::atomic<bool> g_chat_interrupted;
// Without SA_RESTART, so a Ctrl-C at the prompt interrupts read() instead of waiting for a line.
void install_chat_sigint();

struct ChatEntry {
  std::string text;
  // -p's first message: always a message, never a slash command.
  bool from_command_line = false;
};

class ChatInput {
 public:
  ChatInput(bool terminal, std::optional<std::string> first);
  ~ChatInput();
  ChatInput(const ChatInput&) = delete;
  ChatInput& operator=(const ChatInput&) = delete;

  bool terminal() const noexcept { return terminal_; }
  // The next non-blank entry, its continued lines joined; nullopt at the end of input (Ctrl-D) or on
  // Ctrl-C at the prompt.
  std::optional<ChatEntry> next();

  class Source;  // a line at a time: the line editor or plain reads (chat_input.cpp)

 private:
  std::optional<std::string> line(bool continued);

  bool terminal_;
  std::optional<std::string> first_;
  std::unique_ptr<Source> source_;
};

}  // namespace skainet::cli
