// skainet::generate — tool calls in a chat template's own format: which format a template's model
// writes its calls in (read from the template's source), the calls parsed back out of the generated
// text, and the OpenAI tool-call shapes a template is given.
//
//   const generate::ToolCallFormat* format = generate::detect_tool_call_format(template_source);
//   if (!format) ...                        // the template shows no tools, or writes calls in a format not known here
//   generate::ParsedReply reply = generate::parse_tool_calls(*format, generated_text);
//   reply.calls[0].name, reply.calls[0].arguments   // "get_weather", "{\"city\":\"Paris\"}"
//   reply.content                                   // the text outside the calls
//
// The formats are one table (tool_calls.cpp), each row saying how the template is recognized and how
// a call is written; the facts are those of llama.cpp's common/chat.cpp and of the templates
// themselves. A call that does not parse (malformed JSON, no name) stays text in `content`.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "skainet/text/text.hpp"

namespace skainet::generate {

// How the calls of one format are written (each syntax is one parser in tool_calls.cpp).
enum class CallSyntax : uint8_t {
  JsonInTags,    // open {"name": ..., "arguments": {...}} close, once per call (Hermes, Qwen 2.5/3)
  JsonList,      // open, then one JSON list of calls or several JSON objects, then close if any (Mistral Nemo)
  JsonTail,      // the text ends with one or more JSON calls, each maybe after `open` (Llama 3.x)
  NameThenJson,  // open NAME [CALL_ID]ID separator {...}, once per call (Mistral Small 3.2, Devstral)
  FunctionTags,  // <function=NAME>{...} or <parameter=K>V</parameter>... </function>, maybe inside open/close
  ArgKeyValue,   // open NAME <arg_key>K</arg_key><arg_value>V</arg_value>... close (GLM 4.5+)
};

struct ToolCallFormat {
  std::string_view name;  // "hermes", "llama3_json", ...: shown in logs and errors
  // Every one of these occurs in a template's source that writes calls this way (an empty one: none).
  std::string_view recognized_by[2];
  CallSyntax syntax;
  std::string_view open, close;        // the text around a call or the calls (close may be empty)
  std::string_view name_key;           // JSON syntaxes: the key of the function's name
  std::string_view arguments_keys[2];  // JSON syntaxes: the key of its arguments, the first found
  std::string_view separator;          // NameThenJson: between the name and the arguments
  // Where a call may begin in the text, as the model writes it: streamed text is held back from the
  // first of these on (and while the text's end could be the start of one).
  std::string_view starts[2];
};

// Every known format, in the order detection tries them (a more specific marker first).
std::span<const ToolCallFormat> tool_call_formats() noexcept;

// Whether the template reads the `tools` variable at all (a template without it cannot show tools).
bool template_uses_tools(std::string_view template_source) noexcept;

// The format `template_source` writes calls in; nullptr when it uses no tools or its format is not
// one of tool_call_formats().
const ToolCallFormat* detect_tool_call_format(std::string_view template_source) noexcept;

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object's text, as OpenAI's function.arguments
};

struct ParsedReply {
  std::string content;  // the text outside the calls (and every call that did not parse)
  std::vector<ToolCall> calls;
};

ParsedReply parse_tool_calls(const ToolCallFormat& format, std::string_view text);

// How much of `text` (a reply so far) may be sent as content while more is generated: all of it up
// to where a call could begin.
size_t streamable_prefix(const ToolCallFormat& format, std::string_view text) noexcept;

// The control tokens among the format's markers in this vocabulary ("[TOOL_CALLS]" is one in
// Mistral's, "<|python_tag|>" in Llama 3's): a control token's text is not shown in generated text
// unless asked (generate::Options::shown_control_tokens), and the calls are parsed by it.
std::vector<int32_t> tool_call_marker_tokens(const ToolCallFormat& format, const text::Tokenizer& tokenizer);

// An assistant message's tool call as a template reads it: {"id", "type": "function", "function":
// {"name", "arguments"}}. `arguments` (OpenAI's JSON text) becomes the JSON object it holds: the
// templates write it with `| tojson` (Llama 3.x, Qwen 2.5, Mistral), and those that also take a string
// (Qwen3's `is string`) render the object the same; text that is not a JSON object stays a string.
nlohmann::ordered_json template_tool_call(std::string_view id, std::string_view name, std::string_view arguments);

// tool_choice "required" or a named function (`only`): a GBNF grammar admitting only calls in the
// format, one or (parallel) more, each naming one of `tools` (OpenAI's list) and with arguments valid
// against its parameters schema; InvalidArgument where the format's arguments are not JSON
// (can_force_tool_call false) or `only` names no tool. grammar::GrammarError for a schema the
// converter cannot express.
bool can_force_tool_call(const ToolCallFormat& format) noexcept;
std::string forced_tool_call_gbnf(const ToolCallFormat& format, const nlohmann::ordered_json& tools,
                                  std::string_view only, bool parallel);

// A fresh tool-call id: 9 letters and digits, the shape Mistral's templates require of an id.
std::string new_tool_call_id();

}  // namespace skainet::generate
