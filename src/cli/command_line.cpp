#include "command_line.hpp"

#include <algorithm>
#include <cctype>
#include <optional>

#include <fmt/format.h>

#include "llama_compat.hpp"

namespace skainet::cli {
namespace {

constexpr int kUsageError = static_cast<int>(CLI::ExitCodes::ExtrasError);

// Other tools' command words. An empty answer: the word is `help`, turned into --help.
struct ForeignCommand {
  std::string_view word;
  std::string_view answer;
};
constexpr std::string_view kNoRegistry =
    "skainet has no model registry: a model is a GGUF file, given by its path (skainet run -m FILE.gguf -p TEXT, "
    "or skainet run FILE.gguf TEXT)";
constexpr ForeignCommand kForeignCommands[] = {
    {"help", ""},
    {"list", kNoRegistry},
    {"ls", kNoRegistry},
    {"pull", kNoRegistry},
    {"push", kNoRegistry},
    {"rm", kNoRegistry},
    {"show",
     "a model's metadata, tensors and totals: skainet inspect FILE.gguf (skainet plan FILE.gguf: where each "
     "tensor will live)"},
};

bool is_number(std::string_view w) {
  return !w.empty() && std::all_of(w.begin(), w.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == 'e' || c == '+';
  }) && std::isdigit(static_cast<unsigned char>(w.back()));
}

// A word CLI11 reads as an option: a dash and more, but not "-" (stdin) nor a negative number.
bool is_option_word(std::string_view w) { return w.size() > 1 && w[0] == '-' && !is_number(w); }

std::string_view without_dashes(std::string_view name) {
  while (name.starts_with('-')) name.remove_prefix(1);
  return name;
}

// The candidate nearest to `word` (dashes aside: `-ctx` finds `--ctx`) when it is close enough to be
// a typo: one edit in a name of up to four letters, two in a longer one. Any letter is one edit from
// any other, so a word of one or two letters only finds a name that holds its letters in order
// (`rn`: run; `-p` does not find `-a`).
std::optional<std::string> nearest(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string_view bare = without_dashes(word);
  const size_t allowed = bare.size() <= 4 ? 1 : 2;
  auto holds_in_order = [&](std::string_view name) {
    size_t at = 0;
    for (char c : name)
      if (at < bare.size() && bare[at] == c) ++at;
    return at == bare.size();
  };
  std::optional<std::string> best;
  size_t best_distance = allowed + 1;
  for (const std::string& candidate : candidates) {
    if (bare.size() <= 2 && !holds_in_order(without_dashes(candidate))) continue;
    const size_t d = edit_distance(bare, without_dashes(candidate));
    if (d < best_distance) best_distance = d, best = candidate;
  }
  return best;
}

// Every spelling of the command's options: CLI11's names and llama.cpp's multi-letter ones for them.
std::vector<std::string> option_names(const CLI::App& cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* option : cmd.get_options()) {
    for (const std::string& s : option->get_snames()) names.push_back("-" + s);
    for (const std::string& l : option->get_lnames()) names.push_back("--" + l);
  }
  for (const LlamaAlias& alias : kLlamaAliases)
    if (cmd.get_option_no_throw(std::string(alias.ours))) names.emplace_back(alias.llama);
  for (const LlamaFlag& flag : kLlamaFlags) {
    if (flag.answer != LlamaAnswer::Note) continue;
    const std::vector<std::string_view> spellings = llama_flag_names(flag);
    const bool offered = std::any_of(spellings.begin(), spellings.end(), [&](std::string_view s) {
      return s.starts_with("--") && cmd.get_option_no_throw(std::string(s));
    });
    if (offered)
      for (std::string_view s : spellings) names.emplace_back(s);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::vector<const CLI::App*> commands_of(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

const CLI::App* command_named(const CLI::App& app, std::string_view word) {
  for (const CLI::App* command : commands_of(app))
    if (command->get_name() == word) return command;
  return nullptr;
}

// `name` is the option's name as read (after rewriting), `typed` as the user wrote it.
[[noreturn]] void refuse_option(std::string_view name, std::string_view typed, const CLI::App& app,
                                const CLI::App& cmd) {
  if (const LlamaFlag* flag = find_llama_flag(typed); flag && flag->answer == LlamaAnswer::Refuse)
    throw CLI::ExtrasError(
        fmt::format("llama.cpp's '{}' is not implemented here, so it is refused rather than ignored: {}", typed,
                    flag->meaning),
        kUsageError);
  std::string message = &cmd == &app ? fmt::format("unknown option '{}'", typed)
                                     : fmt::format("unknown option '{}' for '{}'", typed, cmd.get_name());
  if (const auto near = nearest(typed, option_names(cmd))) {
    message += fmt::format("; did you mean '{}'?", *near);
  } else {
    // Another command's option given to this one (`inspect --explain`): say which has it.
    for (const CLI::App* other : commands_of(app))
      if (other != &cmd && other->get_option_no_throw(std::string(name))) {
        message += fmt::format(" (skainet {} has it)", other->get_name());
        break;
      }
  }
  throw CLI::ExtrasError(message, kUsageError);
}

[[noreturn]] void refuse_command(std::string_view word, const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* command : commands_of(app)) names.push_back(command->get_name());
  std::string message = fmt::format("unknown command '{}'", word);
  if (const auto near = nearest(word, names)) message += fmt::format("; did you mean '{}'?", *near);
  throw CLI::ExtrasError(message + fmt::format(" (commands: {})", fmt::join(names, ", ")), kUsageError);
}

}  // namespace

size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment over three rows of the table.
  std::vector<size_t> before(b.size() + 1), previous(b.size() + 1), row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) row[j] = std::min(row[j], before[j - 2] + 1);
    }
    std::swap(before, previous);
    std::swap(previous, row);
  }
  return previous[b.size()];
}

std::vector<std::string> read_command_line(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const CLI::App* cmd = &app;  // before the command word: the program's own options (--version, --help)
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") break;  // everything after it is positional
    const std::string typed = args[i];
    if (const std::string_view ours = llama_long_name(typed); !ours.empty()) args[i] = std::string(ours);
    if (const LlamaFlag* flag = find_llama_flag(args[i]);
        flag && flag->value == LlamaValue::Switch && i + 1 < args.size() && is_switch_value(args[i + 1])) {
      args[i] += "=" + args[i + 1];
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i + 1));
    }
    const std::string& word = args[i];
    if (!is_option_word(word)) {
      if (cmd != &app) continue;  // a positional: CLI11 counts those
      if (const CLI::App* command = command_named(app, word)) {
        cmd = command;
        continue;
      }
      const auto foreign = std::find_if(std::begin(kForeignCommands), std::end(kForeignCommands),
                                        [&](const ForeignCommand& f) { return f.word == word; });
      if (foreign == std::end(kForeignCommands)) refuse_command(word, app);
      if (!foreign->answer.empty()) throw CLI::ExtrasError(std::string(foreign->answer), kUsageError);
      // help [COMMAND]: that command's --help, or the program's.
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i));
      const bool of_command = i < args.size() && command_named(app, args[i]) != nullptr;
      args.insert(args.begin() + static_cast<std::ptrdiff_t>(i + (of_command ? 1 : 0)), "--help");
      return args;
    }
    // The option's name: `--temp=0.5` names --temp; `-n16` names -n (a value joined to a short name),
    // but `-ngx`, letters only, is a word CLI11 would split (-n gx) and so is refused whole.
    std::string_view name = word;
    bool value_joined = false;
    if (name.starts_with("--")) {
      value_joined = name.find('=') != std::string_view::npos;
      name = name.substr(0, name.find('='));
    } else if (name.size() > 2) {
      const bool letters = std::all_of(name.begin() + 1, name.end(),
                                       [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '-'; });
      if (letters) refuse_option(name, typed, app, *cmd);
      name = name.substr(0, 2);
      value_joined = true;
    }
    const CLI::Option* option = cmd->get_option_no_throw(std::string(name));
    // Named as typed when it was rewritten (`inspect -fa`, not --flash-attn).
    if (!option) refuse_option(name, typed == word ? name : std::string_view(typed), app, *cmd);
    if (option->get_expected_max() > 0 && !value_joined) ++i;  // its value, whatever it looks like
  }
  return args;
}

}  // namespace skainet::cli
