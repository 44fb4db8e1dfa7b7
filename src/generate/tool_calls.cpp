// Tool-call formats as data: one row per format a chat template's model writes its calls in, how the
// template is recognized (markers in its source) and how a call is written. The facts are llama.cpp's
// (common/chat.cpp, which detects formats by the same markers) and the real templates' own. Parsing
// never throws: what does not parse as a call stays text.
#include <algorithm>
#include <optional>
#include <random>

#include "skainet/model/tool_calls.hpp"

namespace skainet::generate {
namespace {

using Json = nlohmann::ordered_json;
using enum CallSyntax;

// First match wins: a template holding a more specific marker (Qwen3-Coder's "<parameter=" beside
// "<tool_call>", Apriel's "<tool_calls>") is tried before the general one. Columns: name,
// recognized_by, syntax, open, close, name_key, arguments_keys, separator, starts.
// clang-format off
constexpr ToolCallFormat kFormats[] = {
    // ByteDance Seed-OSS: <seed:tool_call><function=NAME><parameter=K>V</parameter></function></seed:tool_call>
    {"seed_oss", {"<seed:tool_call>", "<function="}, FunctionTags, "<seed:tool_call>", "</seed:tool_call>",
     "", {}, "", {"<seed:tool_call>", "<function="}},
    // Qwen3-Coder, Qwen3.5, Nemotron 3, StepFun: <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>...
    {"qwen3_coder_xml", {"<function=", "<parameter="}, FunctionTags, "<tool_call>", "</tool_call>",
     "", {}, "", {"<tool_call>", "<function="}},
    // GLM 4.5+, Ling, Spark, Laguna: <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>
    {"glm_arg_key", {"<tool_call>", "<arg_key>"}, ArgKeyValue, "<tool_call>", "</tool_call>",
     "", {}, "", {"<tool_call>", ""}},
    // Apriel 1.5/1.6 (a list), MiniMax-M1 (one object per line) inside <tool_calls>...</tool_calls>
    {"tool_calls_block", {"<tool_calls>", ""}, JsonList, "<tool_calls>", "</tool_calls>",
     "name", {"arguments", "parameters"}, "", {"<tool_calls>", ""}},
    // Hermes 2 Pro/3, Qwen 2.5/3, QwQ, Granite 4, MiMo, Bielik: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
    // (a JSON call names its function under "name": MiniMax-M3's <tool_call> wraps XML instead)
    {"hermes", {"<tool_call>", "\"name\""}, JsonInTags, "<tool_call>", "</tool_call>",
     "name", {"arguments", "parameters"}, "", {"<tool_call>", ""}},
    // Mistral Small 3.2, Devstral, Ministral 3: [TOOL_CALLS]NAME[ARGS]{...} (a [CALL_ID]ID may precede [ARGS])
    {"mistral_name_args", {"[TOOL_CALLS]", "[ARGS]"}, NameThenJson, "[TOOL_CALLS]", "",
     "", {}, "[ARGS]", {"[TOOL_CALLS]", ""}},
    // Mistral Nemo: [TOOL_CALLS][{"name": ..., "arguments": {...}, "id": ...}]
    {"mistral_nemo", {"[TOOL_CALLS]", ""}, JsonList, "[TOOL_CALLS]", "",
     "name", {"arguments", "parameters"}, "", {"[TOOL_CALLS]", ""}},
    // Granite 3.x: <|tool_call|>[{"name": ..., "arguments": {...}}]
    {"granite", {"<|tool_call|>", ""}, JsonList, "<|tool_call|>", "",
     "name", {"arguments", "parameters"}, "", {"<|tool_call|>", ""}},
    // Command R7B: <|START_ACTION|>[{"tool_call_id": "0", "tool_name": ..., "parameters": {...}}]<|END_ACTION|>
    {"command_r7b", {"<|START_ACTION|>", ""}, JsonList, "<|START_ACTION|>", "<|END_ACTION|>",
     "tool_name", {"parameters", "arguments"}, "", {"<|START_ACTION|>", ""}},
    // Functionary v3.1 (Llama 3.1): <function=NAME>{...}</function>
    {"functionary_v3_1", {"<function=", ""}, FunctionTags, "<function=", "",
     "", {}, "", {"<function=", ""}},
    // Llama 3.1/3.2/3.3: {"name": ..., "parameters": {...}}, after <|python_tag|> or not; the tool's
    // answers come back as role ipython, which is how the template is known.
    {"llama3_json", {"ipython", ""}, JsonTail, "<|python_tag|>", "",
     "name", {"parameters", "arguments"}, "", {"<|python_tag|>", "{"}},
};
// clang-format on

constexpr std::string_view kSpace = " \t\r\n";
constexpr size_t kMaxJsonDepth = 64;  // model output nested deeper is not a call (and is not parsed)

size_t skip_space(std::string_view s, size_t at) {
  const size_t n = s.find_first_not_of(kSpace, at);
  return n == std::string_view::npos ? s.size() : n;
}

std::string_view trim(std::string_view s) {
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) + 1 - first);
}

// The end of the JSON object or list beginning at `at`, by bracket depth outside strings; npos when it
// is unclosed or nested deeper than kMaxJsonDepth (so the parse after it is bounded too).
size_t json_end(std::string_view s, size_t at) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = at; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth) return std::string_view::npos;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return std::string_view::npos;
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

// The JSON object or list at `at` and where it ends.
std::optional<std::pair<Json, size_t>> json_at(std::string_view s, size_t at) {
  if (at >= s.size() || (s[at] != '{' && s[at] != '[')) return std::nullopt;
  const size_t end = json_end(s, at);
  if (end == std::string_view::npos) return std::nullopt;
  Json j = Json::parse(s.substr(at, end - at), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return std::make_pair(std::move(j), end);
}

// A parameter's value as the XML-like formats write it: JSON where it is JSON (numbers, lists,
// objects), else the text itself.
Json value_of(std::string_view text) {
  if (auto j = json_at(text, 0); j && j->second == text.size()) return j->first;
  Json scalar = Json::parse(text, nullptr, false);
  if (!scalar.is_discarded() && !scalar.is_structured() && !text.empty()) return scalar;
  return std::string(text);
}

// OpenAI's arguments text from what the model wrote: an object, or a string holding one.
std::optional<std::string> arguments_text(const Json& args) {
  if (args.is_object()) return args.dump();
  if (!args.is_string()) return std::nullopt;
  const std::string& s = args.get_ref<const std::string&>();
  if (auto j = json_at(s, skip_space(s, 0)); j && j->first.is_object() && skip_space(s, j->second) == s.size())
    return s;
  return std::nullopt;
}

std::optional<ToolCall> call_of(const ToolCallFormat& f, const Json& j) {
  if (!j.is_object()) return std::nullopt;
  const auto name = j.find(f.name_key);
  if (name == j.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) return std::nullopt;
  std::optional<std::string> args = "{}";  // a call with no arguments
  for (std::string_view key : f.arguments_keys) {
    if (key.empty()) continue;
    if (const auto a = j.find(key); a != j.end()) {
      args = arguments_text(*a);
      break;
    }
  }
  if (!args) return std::nullopt;
  return ToolCall{name->get<std::string>(), std::move(*args)};
}

// What one parser found: the calls and where they end in the text.
struct Found {
  std::vector<ToolCall> calls;
  size_t end = 0;
};
using Parsed = std::optional<Found>;

Parsed json_in_tags(const ToolCallFormat& f, std::string_view s, size_t at) {
  auto j = json_at(s, skip_space(s, at));
  if (!j) return std::nullopt;
  auto call = call_of(f, j->first);
  if (!call) return std::nullopt;
  return Found{{std::move(*call)}, j->second};
}

// One JSON list of calls, or JSON objects one after another (separated by space or commas).
Parsed json_list(const ToolCallFormat& f, std::string_view s, size_t at) {
  Found out;
  at = skip_space(s, at);
  if (at < s.size() && s[at] == '[') {
    auto j = json_at(s, at);
    if (!j || j->first.empty()) return std::nullopt;
    for (const Json& item : j->first) {
      auto call = call_of(f, item);
      if (!call) return std::nullopt;
      out.calls.push_back(std::move(*call));
    }
    out.end = j->second;
    return out;
  }
  while (auto j = json_at(s, at)) {
    auto call = call_of(f, j->first);
    if (!call) return std::nullopt;
    out.calls.push_back(std::move(*call));
    out.end = j->second;
    at = skip_space(s, j->second);
    if (at < s.size() && s[at] == ',') at = skip_space(s, at + 1);
  }
  if (out.calls.empty()) return std::nullopt;
  return out;
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
}

// NAME[CALL_ID]ID[ARGS]{...}: the id a model writes is dropped (the server gives each call its own).
Parsed name_then_json(const ToolCallFormat& f, std::string_view s, size_t at) {
  const size_t sep = s.find(f.separator, at);
  if (sep == std::string_view::npos) return std::nullopt;
  std::string_view name = s.substr(at, sep - at);
  if (const size_t id = name.find("[CALL_ID]"); id != std::string_view::npos) name = name.substr(0, id);
  name = trim(name);
  if (name.empty() || !std::all_of(name.begin(), name.end(), is_name_char)) return std::nullopt;
  auto j = json_at(s, skip_space(s, sep + f.separator.size()));
  if (!j) return std::nullopt;
  auto args = arguments_text(j->first);
  if (!args) return std::nullopt;
  return Found{{ToolCall{std::string(name), std::move(*args)}}, j->second};
}

// The text between `open` and `close` beginning at `at` (after skipping space), and where it ends.
std::optional<std::pair<std::string_view, size_t>> between(std::string_view s, size_t at, std::string_view open,
                                                           std::string_view close) {
  at = skip_space(s, at);
  if (s.compare(at, open.size(), open) != 0) return std::nullopt;
  const size_t from = at + open.size(), to = s.find(close, from);
  if (to == std::string_view::npos) return std::nullopt;
  return std::make_pair(s.substr(from, to - from), to + close.size());
}

// A value written on lines of its own ("<parameter=k>\nvalue\n</parameter>") is the text between.
std::string_view strip_newlines(std::string_view v) {
  if (v.starts_with('\n')) v.remove_prefix(1);
  if (v.ends_with('\n')) v.remove_suffix(1);
  return v;
}

// <parameter=K>V</parameter>... (Qwen3-Coder) or a JSON object (Functionary): the arguments as JSON text.
std::optional<std::string> function_body(std::string_view body) {
  const std::string_view t = trim(body);
  if (t.starts_with('{')) {
    auto j = json_at(t, 0);
    if (!j || !j->first.is_object() || j->second != t.size()) return std::nullopt;
    return j->first.dump();
  }
  Json args = Json::object();
  size_t at = 0;
  while (skip_space(body, at) < body.size()) {
    auto key = between(body, at, "<parameter=", ">");
    if (!key) return std::nullopt;
    const size_t close = body.find("</parameter>", key->second);
    if (close == std::string_view::npos || key->first.empty()) return std::nullopt;
    args[std::string(key->first)] = value_of(strip_newlines(body.substr(key->second, close - key->second)));
    at = close + std::string_view("</parameter>").size();
  }
  return args.dump();
}

Parsed function_tags(const ToolCallFormat& f, std::string_view s, size_t at) {
  // Functionary's rows open with "<function=" itself: the name follows at once.
  const bool opened = f.open.ends_with("<function=");
  if (!opened) {
    at = skip_space(s, at);
    if (s.compare(at, 10, "<function=") != 0) return std::nullopt;
    at += 10;
  }
  const size_t name_end = s.find('>', at), end = s.find("</function>", at);
  if (name_end == std::string_view::npos || end == std::string_view::npos || name_end > end) return std::nullopt;
  const std::string_view name = trim(s.substr(at, name_end - at));
  if (name.empty() || !std::all_of(name.begin(), name.end(), is_name_char)) return std::nullopt;
  auto args = function_body(s.substr(name_end + 1, end - name_end - 1));
  if (!args) return std::nullopt;
  return Found{{ToolCall{std::string(name), std::move(*args)}}, end + std::string_view("</function>").size()};
}

// NAME<arg_key>K</arg_key><arg_value>V</arg_value>... up to the format's close.
Parsed arg_key_value(const ToolCallFormat& f, std::string_view s, size_t at) {
  const size_t close = s.find(f.close, at);
  const std::string_view body = s.substr(at, close == std::string_view::npos ? std::string_view::npos : close - at);
  const size_t first_key = body.find("<arg_key>");
  const std::string_view name = trim(body.substr(0, first_key));
  if (name.empty() || !std::all_of(name.begin(), name.end(), is_name_char)) return std::nullopt;
  Json args = Json::object();
  size_t in = first_key == std::string_view::npos ? body.size() : first_key;
  while (skip_space(body, in) < body.size()) {
    auto key = between(body, in, "<arg_key>", "</arg_key>");
    if (!key) return std::nullopt;
    auto value = between(body, key->second, "<arg_value>", "</arg_value>");
    if (!value) return std::nullopt;
    args[std::string(trim(key->first))] = value_of(value->first);
    in = value->second;
  }
  return Found{{ToolCall{std::string(name), args.dump()}}, at + body.size()};
}

Parsed parse_body(const ToolCallFormat& f, std::string_view s, size_t at) {
  switch (f.syntax) {
    case JsonInTags: return json_in_tags(f, s, at);
    case JsonList: return json_list(f, s, at);
    case NameThenJson: return name_then_json(f, s, at);
    case FunctionTags: return function_tags(f, s, at);
    case ArgKeyValue: return arg_key_value(f, s, at);
    case JsonTail: return std::nullopt;  // parse_json_tail
  }
  return std::nullopt;
}

// Where a parsed block ends once its close is taken: npos when the close is missing. A reply cut off
// right after its last call (a stop string, max_tokens) may lack the close.
size_t block_end(const ToolCallFormat& f, std::string_view s, size_t body_end) {
  if (f.close.empty()) return body_end;
  const size_t at = skip_space(s, body_end);
  if (s.compare(at, f.close.size(), f.close) == 0) return at + f.close.size();
  return at == s.size() ? at : std::string_view::npos;
}

// Every format but JsonTail: blocks that begin with `open`, the text between them content.
ParsedReply parse_blocks(const ToolCallFormat& f, std::string_view s) {
  ParsedReply out;
  size_t pos = 0;
  for (;;) {
    const size_t at = s.find(f.open, pos);
    if (at == std::string_view::npos) break;
    out.content.append(s.substr(pos, at - pos));
    const size_t body = at + f.open.size();
    Parsed found = parse_body(f, s, body);
    const size_t end = found ? block_end(f, s, found->end) : std::string_view::npos;
    if (end == std::string_view::npos) {  // not a call: the marker stays text, the search goes on after it
      out.content.append(f.open);
      pos = body;
      continue;
    }
    for (ToolCall& c : found->calls) out.calls.push_back(std::move(c));
    pos = end;
  }
  out.content.append(s.substr(pos));
  return out;
}

// From `at` to the end: `open` maybe, then calls separated by space, ';' or ','.
Parsed calls_to_end(const ToolCallFormat& f, std::string_view s, size_t at) {
  Found out;
  at = skip_space(s, at);
  while (at < s.size()) {
    if (s.compare(at, f.open.size(), f.open) == 0) at = skip_space(s, at + f.open.size());
    auto j = json_at(s, at);
    if (!j) return std::nullopt;
    auto call = call_of(f, j->first);
    if (!call) return std::nullopt;
    out.calls.push_back(std::move(*call));
    at = skip_space(s, j->second);
    if (at < s.size() && (s[at] == ';' || s[at] == ',')) at = skip_space(s, at + 1);
  }
  if (out.calls.empty()) return std::nullopt;
  out.end = at;
  return out;
}

// Llama 3.x: the reply ends with its calls. Tried from each place a call may begin (the start of
// the text or of a line, or `open`), the first whose rest is all calls; the text before is content.
ParsedReply parse_json_tail(const ToolCallFormat& f, std::string_view s) {
  constexpr size_t kMaxTries = 256;  // bounds the work on a long reply full of braces
  size_t tries = 0;
  for (size_t at = 0; at < s.size() && tries < kMaxTries; ++at) {
    const bool line_start = at == 0 || s[at - 1] == '\n';
    const bool begins = s.compare(at, f.open.size(), f.open) == 0 || (s[at] == '{' && line_start);
    if (!begins) continue;
    ++tries;
    if (Parsed found = calls_to_end(f, s, at)) return {std::string(s.substr(0, at)), std::move(found->calls)};
  }
  return {std::string(s), {}};
}

}  // namespace

std::span<const ToolCallFormat> tool_call_formats() noexcept { return kFormats; }

// `tools` as a word of its own: FireFunction's "functools" marker is not the variable (that template
// takes its functions in a variable of its own, `functions`, which no client sends).
bool template_uses_tools(std::string_view source) noexcept {
  constexpr std::string_view kWord = "tools";
  const auto part_of_name = [](char c) { return is_name_char(c) && c != '.' && c != '-'; };
  for (size_t at = source.find(kWord); at != std::string_view::npos; at = source.find(kWord, at + 1)) {
    const size_t end = at + kWord.size();
    if ((at == 0 || !part_of_name(source[at - 1])) && (end == source.size() || !part_of_name(source[end]))) return true;
  }
  return false;
}

const ToolCallFormat* detect_tool_call_format(std::string_view source) noexcept {
  if (!template_uses_tools(source)) return nullptr;
  for (const ToolCallFormat& f : kFormats) {
    const bool all = std::all_of(std::begin(f.recognized_by), std::end(f.recognized_by), [&](std::string_view m) {
      return m.empty() || source.find(m) != std::string_view::npos;
    });
    if (all) return &f;
  }
  return nullptr;
}

ParsedReply parse_tool_calls(const ToolCallFormat& format, std::string_view text) {
  ParsedReply out = format.syntax == JsonTail ? parse_json_tail(format, text) : parse_blocks(format, text);
  // Beside calls, the space a model writes around them is not content.
  if (!out.calls.empty()) out.content = std::string(trim(out.content));
  return out;
}

size_t streamable_prefix(const ToolCallFormat& format, std::string_view text) noexcept {
  size_t limit = text.size();
  for (std::string_view start : format.starts) {
    if (start.empty()) continue;
    limit = std::min(limit, text.find(start));
    // The text's end may be the first bytes of a start not yet complete.
    for (size_t k = std::min(start.size() - 1, text.size()); k > 0; --k)
      if (text.ends_with(start.substr(0, k))) {
        limit = std::min(limit, text.size() - k);
        break;
      }
  }
  return limit;
}

std::vector<int32_t> tool_call_marker_tokens(const ToolCallFormat& format, const text::Tokenizer& tokenizer) {
  // Beside each format's own, the markers the parsers read inside a call.
  constexpr std::string_view kInner[] = {"[CALL_ID]",  "<function=",  "</function>", "<arg_key>",
                                         "</arg_key>", "<arg_value>", "</arg_value>"};
  std::vector<std::string_view> markers = {format.open, format.close, format.separator, format.starts[0],
                                           format.starts[1]};
  markers.insert(markers.end(), std::begin(kInner), std::end(kInner));
  std::vector<int32_t> ids;
  for (std::string_view marker : markers) {
    if (marker.empty()) continue;
    const auto found = tokenizer.find_special_text(marker);
    if (!found || found->offset != 0 || tokenizer.token_to_piece(found->id, true) != marker) continue;
    if (std::find(ids.begin(), ids.end(), found->id) == ids.end()) ids.push_back(found->id);
  }
  return ids;
}

nlohmann::ordered_json template_tool_call(std::string_view id, std::string_view name, std::string_view arguments) {
  Json args = std::string(arguments);
  if (auto j = json_at(arguments, skip_space(arguments, 0));
      j && j->first.is_object() && skip_space(arguments, j->second) == arguments.size())
    args = std::move(j->first);
  return Json{{"id", std::string(id)},
              {"type", "function"},
              {"function", Json{{"name", std::string(name)}, {"arguments", std::move(args)}}}};
}

std::string new_tool_call_id() {
  constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string id(9, ' ');
  for (char& c : id) c = kAlphabet[pick(random)];
  return id;
}

}  // namespace skainet::generate
