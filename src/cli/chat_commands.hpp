// `skainet chat`'s slash commands (/help, /exit, /clear, /save FILE, /load FILE, /stats): one table of
// name, argument and help text, and the conversation files /save writes and /load reads.
//
//   ParsedEntry e = parse_entry(entry_text);   // nullopt: a message for the model
//   if (e.command) outcome = run_command(*e.command, session);             // CommandError on a bad command or file
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "skainet/core/base.hpp"

namespace skainet::cli {

// An unknown command, a missing or surplus argument, a file /save cannot write or /load cannot read.
class CommandError : public InvalidArgument {
 public:
  explicit CommandError(std::string message) : InvalidArgument(std::move(message)) {}
};

// What the commands act on: cmd_chat.cpp's conversation.
class ChatSession {
 public:
  virtual ~ChatSession() = default;
  // The messages so far, system message first when there is one: [{role, content}, ...].
  virtual const nlohmann::ordered_json& messages() const = 0;
  // Replaced wholesale (/load; /clear with the system message alone). The KV cache needs no reset:
  // the next turn reuses only the prefix it shares with the new conversation.
  virtual void replace(nlohmann::ordered_json messages) = 0;
  // The last turn's stats line, nullopt before the first turn.
  virtual std::optional<std::string> last_stats() const = 0;
};

struct SlashCommand {
  std::string name;  // without the slash
  std::string argument;
};

// An entry that starts with `/` is a command; `//` sends the rest, one slash dropped, as a message
// (the text that follows is returned in `message`). Anything else is a message.
struct ParsedEntry {
  std::optional<SlashCommand> command;
  std::string message;
};
ParsedEntry parse_entry(std::string_view text);

enum class CommandOutcome : uint8_t { Continue, Exit };
CommandOutcome run_command(const SlashCommand& command, ChatSession& session);

// The help text, one line per command (also what /help prints).
std::string command_help();

// A conversation file: a JSON array of {"role", "content"} objects, written atomically (a temporary
// renamed over the target, so a reader never sees half a file).
void save_conversation(const std::filesystem::path& path, const nlohmann::ordered_json& messages);
// The messages of such a file; CommandError naming the file and what is wrong (not JSON, not an array,
// message N without a string role or content, a role other than system/user/assistant, above 64 MiB).
nlohmann::ordered_json load_conversation(const std::filesystem::path& path);

}  // namespace skainet::cli
