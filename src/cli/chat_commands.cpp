#include "chat_commands.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "command_line.hpp"

namespace skainet::cli {
namespace {

using Json = nlohmann::ordered_json;

// A conversation file larger than this is refused before it is parsed (the prompt file's limit).
constexpr uint64_t kConversationFileMaxBytes = uint64_t{64} << 20;
constexpr std::string_view kRoles[] = {"system", "user", "assistant"};

std::string count_messages(size_t n) { return fmt::format("{} message{}", n, n == 1 ? "" : "s"); }

CommandOutcome help(const std::string&, ChatSession&) {
  fmt::print(stderr, "{}", command_help());
  return CommandOutcome::Continue;
}

CommandOutcome exit_chat(const std::string&, ChatSession&) { return CommandOutcome::Exit; }

// The system message stays: it is the chat's instructions, not part of what was said.
CommandOutcome clear(const std::string&, ChatSession& session) {
  const Json& messages = session.messages();
  Json kept = Json::array();
  if (!messages.empty() && messages.front().value("role", "") == "system") kept.push_back(messages.front());
  session.replace(std::move(kept));
  fmt::print(stderr, "skainet: the conversation is cleared{}\n",
             session.messages().empty() ? "" : " (the system message kept)");
  return CommandOutcome::Continue;
}

// A FILE argument: a leading `~/` is the home folder, as the shell would have it (no shell reads a
// command typed at the chat's prompt).
std::string expand_home(const std::string& file) {
  const char* home = std::getenv("HOME");
  if (file.starts_with("~/") && home != nullptr && *home != '\0') return std::string(home) + file.substr(1);
  return file;
}

CommandOutcome save(const std::string& argument, ChatSession& session) {
  const std::string file = expand_home(argument);
  save_conversation(file, session.messages());
  fmt::print(stderr, "skainet: saved {} to {}\n", count_messages(session.messages().size()), file);
  return CommandOutcome::Continue;
}

CommandOutcome load(const std::string& argument, ChatSession& session) {
  const std::string file = expand_home(argument);
  Json messages = load_conversation(file);
  const size_t n = messages.size();
  session.replace(std::move(messages));
  fmt::print(stderr, "skainet: loaded {} from {}\n", count_messages(n), file);
  return CommandOutcome::Continue;
}

CommandOutcome stats(const std::string&, ChatSession& session) {
  const std::optional<std::string> line = session.last_stats();
  fmt::print(stderr, "{}\n", line ? *line : "skainet: no turn yet: /stats shows the last reply's");
  return CommandOutcome::Continue;
}

struct CommandSpec {
  std::string_view name;
  std::string_view argument;  // empty: takes none
  std::string_view help;
  CommandOutcome (*run)(const std::string& argument, ChatSession& session);
};

constexpr CommandSpec kCommands[] = {
    {"help", "", "list the commands", help},
    {"exit", "", "end the chat (as Ctrl-D or the end of input; exit code 0)", exit_chat},
    {"clear", "", "forget the conversation, keep the system message", clear},
    {"save", "FILE", "write the conversation to FILE as JSON [{role, content}, ...]", save},
    {"load", "FILE", "replace the conversation with the one FILE holds (as /save writes it)", load},
    {"stats", "", "the last reply's stats line (every reply's with --show-stats)", stats},
};

const CommandSpec* find_command(std::string_view name) {
  for (const CommandSpec& c : kCommands)
    if (c.name == name) return &c;
  return nullptr;
}

std::string_view trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(" \t\n");
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(" \t\n") - begin + 1);
}

std::string unknown_command(std::string_view name) {
  std::string nearest;
  size_t best = 3;  // a typo is at most two edits away
  for (const CommandSpec& c : kCommands)
    if (const size_t d = edit_distance(name, c.name); d < best) best = d, nearest = c.name;
  return fmt::format("unknown command '/{}'{}; /help lists the commands (// sends a message that starts with /)", name,
                     nearest.empty() ? "" : fmt::format(", did you mean '/{}'?", nearest));
}

// "an object", "a string", ...: what a JSON value is, for the messages.
std::string a_json(const Json& j) {
  const std::string_view type = j.type_name();
  if (j.is_null()) return "null";
  return fmt::format("{} {}", type.front() == 'a' || type.front() == 'o' ? "an" : "a", type);
}

}  // namespace

ParsedEntry parse_entry(std::string_view text) {
  if (!text.starts_with('/')) return {.command = std::nullopt, .message = std::string(text)};
  if (text.starts_with("//")) return {.command = std::nullopt, .message = std::string(text.substr(1))};
  const std::string_view rest = text.substr(1);
  const size_t end = std::min(rest.find_first_of(" \t\n"), rest.size());
  return {.command = SlashCommand{std::string(rest.substr(0, end)), std::string(trim(rest.substr(end)))},
          .message = {}};
}

CommandOutcome run_command(const SlashCommand& command, ChatSession& session) {
  const CommandSpec* spec = find_command(command.name);
  if (spec == nullptr) throw CommandError(unknown_command(command.name));
  if (spec->argument.empty() && !command.argument.empty())
    throw CommandError(fmt::format("/{} takes no argument (got '{}')", spec->name, command.argument));
  if (!spec->argument.empty() && command.argument.empty())
    throw CommandError(fmt::format("/{} needs a {}: /{} {}", spec->name, spec->argument, spec->name, spec->argument));
  return spec->run(command.argument, session);
}

std::string command_help() {
  std::string text = "skainet: commands (// at the start sends a message that starts with /):\n";
  for (const CommandSpec& c : kCommands) {
    const std::string usage = fmt::format("/{}{}{}", c.name, c.argument.empty() ? "" : " ", c.argument);
    text += fmt::format("  {:<12} {}\n", usage, c.help);
  }
  text += "  a line ending in \\ goes on onto the next line; Up and Down recall earlier lines at a terminal\n";
  return text;
}

void save_conversation(const std::filesystem::path& path, const nlohmann::ordered_json& messages) {
  // Bytes that are not UTF-8 (a reply cut inside a character by Ctrl-C or -n) become U+FFFD: JSON
  // holds only text, and a file /load cannot read back would be worse.
  const std::string text = messages.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
  try {
    base::AtomicFile file(path);
    file.write(text.data(), text.size());
    file.commit();
  } catch (const Error& e) {
    throw CommandError(fmt::format("/save: {}", e.what()));  // the message names the file
  }
}

nlohmann::ordered_json load_conversation(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::string text;
  try {
    text = base::read_text_file(path, "conversation file", kConversationFileMaxBytes);
  } catch (const Error& e) {
    throw CommandError(fmt::format("/load: {}", e.what()));  // the message names the file
  }
  Json messages;
  try {
    messages = Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw CommandError(fmt::format("/load {}: not JSON: {}", name, e.what()));
  }
  const auto bad = [&](std::string_view what) {
    return CommandError(
        fmt::format("/load {}: {} (a conversation file is a JSON array of "
                    "{{\"role\": \"system\"|\"user\"|\"assistant\", \"content\": \"...\"}})",
                    name, what));
  };
  if (!messages.is_array()) throw bad(fmt::format("the JSON is {}, not an array", a_json(messages)));
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    if (!m.is_object()) throw bad(fmt::format("message {} is {}, not an object", i + 1, a_json(m)));
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) throw bad(fmt::format("message {} has no string \"role\"", i + 1));
    if (std::find(std::begin(kRoles), std::end(kRoles), role->get<std::string>()) == std::end(kRoles))
      throw bad(fmt::format("message {} has the role '{}'", i + 1, role->get<std::string>()));
    const auto content = m.find("content");
    if (content == m.end() || !content->is_string())
      throw bad(fmt::format("message {} has no string \"content\"", i + 1));
  }
  // Only role and content are kept: they are what a turn renders and what /save writes back.
  Json kept = Json::array();
  for (const Json& m : messages) kept.push_back({{"role", m["role"]}, {"content", m["content"]}});
  return kept;
}

}  // namespace skainet::cli
