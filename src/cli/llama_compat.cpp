#include "llama_compat.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include <fmt/format.h>

namespace skainet::cli {
namespace {

bool is_multi_letter_short(std::string_view w) {
  if (w.size() < 3 || w[0] != '-' || w[1] == '-') return false;
  return std::all_of(w.begin() + 1, w.end(),
                     [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '-'; });
}

std::string_view long_name(const LlamaFlag& flag) {
  for (std::string_view name : llama_flag_names(flag))
    if (name.starts_with("--")) return name;
  return llama_flag_names(flag).front();
}

}  // namespace

std::string_view llama_long_name(std::string_view word) {
  const auto alias = std::find_if(std::begin(kLlamaAliases), std::end(kLlamaAliases),
                                  [&](const LlamaAlias& a) { return a.llama == word; });
  if (alias != std::end(kLlamaAliases)) return alias->ours;
  const LlamaFlag* flag = find_llama_flag(word);
  if (flag && flag->answer == LlamaAnswer::Note && is_multi_letter_short(word)) return long_name(*flag);
  return {};
}

bool is_switch_value(std::string_view word) {
  if (word.empty()) return false;
  for (std::string_view rest = word; !rest.empty();) {  // llama-bench takes a list: -fa 0,1
    const size_t comma = std::min(rest.find(','), rest.size());
    if (std::find(std::begin(kSwitchValues), std::end(kSwitchValues), rest.substr(0, comma)) == std::end(kSwitchValues))
      return false;
    rest.remove_prefix(std::min(comma + 1, rest.size()));
  }
  return true;
}

const LlamaFlag* find_llama_flag(std::string_view word) {
  for (const LlamaFlag& flag : kLlamaFlags)
    for (std::string_view name : llama_flag_names(flag))
      if (name == word) return &flag;
  return nullptr;
}

void add_placement_compat(CLI::App* cmd, CompatFlags& f) {
  cmd->add_flag("--no-mmap", f.no_mmap, "read every weight into memory instead of mapping the file (residency heap)");
  for (const LlamaFlag& flag : kLlamaFlags) {
    if (flag.answer != LlamaAnswer::Note) continue;
    // CLI11 spells a short name with one letter (the multi-letter ones were rewritten to the long
    // name); a name the command has an option of its own for keeps that meaning.
    std::string names;
    for (std::string_view name : llama_flag_names(flag)) {
      if (is_multi_letter_short(name) || cmd->get_option_no_throw(std::string(name))) continue;
      names += (names.empty() ? "" : ",") + std::string(name);
    }
    if (names.empty()) continue;
    CLI::Option* option = flag.value == LlamaValue::One ? cmd->add_option(names) : cmd->add_flag(names);
    option->description(fmt::format("llama.cpp's {}: {}", flag.names, flag.meaning))
        ->group("llama.cpp's flags that change nothing here (a note on stderr)");
    f.noted.push_back({&flag, option});
  }
}

void apply_placement_compat(const CompatFlags& f, PlacementArgs& p) {
  if (f.no_mmap) {
    if (p.weight_form.find("mapped") != std::string::npos)
      throw CLI::ValidationError("--no-mmap", fmt::format("contradicts --weight-form {}", p.weight_form));
    if (p.weight_form.empty())
      p.weight_form = "keep,heap";
    else if (p.weight_form.find("heap") == std::string::npos)
      p.weight_form += ",heap";
  }
  for (const auto& [flag, option] : f.noted) {
    if (option->count() == 0) continue;
    const std::string_view name = llama_flag_names(*flag).front();
    std::string value = option->results().empty() ? std::string() : option->results().back();
    if (flag->value == LlamaValue::None || value == "true") value.clear();  // CLI11's text for a bare flag
    if (flag->value == LlamaValue::Switch && !value.empty() && !is_switch_value(value))
      throw CLI::ValidationError(std::string(name), fmt::format("'{}' is not one of {} (or a list of them)", value,
                                                                fmt::join(kSwitchValues, ", ")));
    fmt::print(stderr, "skainet: {}{}{}: {}\n", name, value.empty() ? "" : " ", value, flag->meaning);
  }
}

void add_model_option(CLI::App* cmd, std::string& model, std::string_view help) {
  CLI::Option* flag = cmd->add_option("-m,--model", model, std::string(help));
  CLI::Option* positional = cmd->add_option("MODEL", model, std::string(help) + " (the same as -m)");
  flag->excludes(positional);
}

void require_model(const std::string& model) {
  if (model.empty()) throw CLI::RequiredError("a model: -m FILE (or FILE as the first positional)");
}

void ModelAndPrompt::add_to(CLI::App* cmd, std::string_view prompt_help) {
  flag = cmd->add_option("-m,--model", flag_model, "GGUF model");
  first_option = cmd->add_option("MODEL", first, "GGUF model (the same as -m; with -m: the prompt)");
  second_option = cmd->add_option("PROMPT", second, fmt::format("{} (the same as -p)", prompt_help));
}

bool ModelAndPrompt::resolve(std::string& model, std::string& prompt, bool prompt_given) const {
  std::vector<std::string> words;
  if (first_option->count()) words.push_back(first);
  if (second_option->count()) words.push_back(second);
  if (flag->count()) {
    model = flag_model;
    if (words.size() > 1)
      throw CLI::ValidationError("MODEL PROMPT", fmt::format("'{}' and '{}' beside -m {}: one positional, the "
                                                             "prompt, at most",
                                                             words[0], words[1], flag_model));
  } else if (!words.empty()) {
    model = words.front();
    words.erase(words.begin());
  }
  if (words.empty()) return false;
  if (prompt_given)
    throw CLI::ValidationError(
        "PROMPT", fmt::format("'{}': the prompt is given twice, by -p/-f and as a positional", words.front()));
  prompt = words.front();
  return true;
}

std::string process_escapes(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    switch (c) {
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case '?': out += '?'; break;
      case 'x':
        if (i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
          out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
          i += 2;
          break;
        }
        [[fallthrough]];
      default: out += '\\'; out += c;
    }
  }
  return out;
}

}  // namespace skainet::cli
