// tool_choice "required" or a named function: a GBNF grammar that admits only calls in the template's
// format, each naming one of the tools and giving arguments valid against its parameters schema. The
// JSON parts come from grammar::json_schemas_gbnf; the format's markers are literals around them.
#include <fmt/format.h>

#include "skainet/model/tool_calls.hpp"
#include "skainet/text/grammar.hpp"

namespace skainet::generate {

namespace {

using Json = nlohmann::ordered_json;

struct Tool {
  std::string name;
  Json parameters;
};

std::vector<Tool> tools_to_call(const Json& tools, std::string_view only) {
  std::vector<Tool> out;
  for (const Json& t : tools) {
    const Json& f = t.at("function");
    const std::string name = f.at("name").get<std::string>();
    if (!only.empty() && name != only) continue;
    out.push_back({name, f.contains("parameters") ? f["parameters"] : Json{{"type", "object"}}});
  }
  if (out.empty()) throw InvalidArgument(fmt::format("no tool named '{}' among the request's tools", only));
  return out;
}

// One rule per tool: tool-I-args (the arguments) and, for the JSON syntaxes, tool-I-call (the call
// object: the name's key holding the name, the arguments' key holding the arguments).
std::string tool_rules(const ToolCallFormat& f, const std::vector<Tool>& tools, bool json_calls) {
  std::vector<std::pair<std::string, Json>> schemas;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string args_key(f.arguments_keys[0]);
    if (json_calls)
      schemas.emplace_back(
          fmt::format("tool-{}-call", i),
          Json{{"type", "object"},
               {"properties", {{std::string(f.name_key), {{"const", tools[i].name}}}, {args_key, tools[i].parameters}}},
               {"required", {std::string(f.name_key), args_key}}});
    else
      schemas.emplace_back(fmt::format("tool-{}-args", i), tools[i].parameters);
  }
  return grammar::json_schemas_gbnf(schemas);
}

// "tool-0-call | tool-1-call ..." or, per tool, `before NAME between tool-I-args`.
std::string any_tool(const std::vector<Tool>& tools, bool json_calls, std::string_view between) {
  std::string out = "(";
  for (size_t i = 0; i < tools.size(); ++i) {
    out += i ? " | " : "";
    out += json_calls ? fmt::format("tool-{}-call", i)
                      : fmt::format("{} {} tool-{}-args", grammar::gbnf_literal(tools[i].name),
                                    grammar::gbnf_literal(between), i);
  }
  return out + ")";
}

}  // namespace

bool can_force_tool_call(const ToolCallFormat& f) noexcept {
  switch (f.syntax) {
    case CallSyntax::JsonInTags:
    case CallSyntax::JsonList:
    case CallSyntax::JsonTail:
    case CallSyntax::NameThenJson: return true;
    case CallSyntax::FunctionTags: return f.close.empty();  // <function=NAME>{json}</function>, not XML parameters
    case CallSyntax::ArgKeyValue: return false;
  }
  return false;
}

std::string forced_tool_call_gbnf(const ToolCallFormat& f, const nlohmann::ordered_json& tools, std::string_view only,
                                  bool parallel) {
  if (!can_force_tool_call(f))
    throw InvalidArgument(
        fmt::format("a call cannot be forced in the '{}' tool-call format (its arguments are not JSON)", f.name));
  const std::vector<Tool> chosen = tools_to_call(tools, only);
  const bool json_calls = f.syntax != CallSyntax::NameThenJson && f.syntax != CallSyntax::FunctionTags;
  std::string root;
  switch (f.syntax) {
    case CallSyntax::JsonInTags:
      root = fmt::format("root ::= one{}\none ::= {} \"\\n\"? {} {}\n", parallel ? " (\"\\n\"? one)*" : "",
                         grammar::gbnf_literal(f.open), any_tool(chosen, true, ""), grammar::gbnf_literal(f.close));
      break;
    case CallSyntax::JsonList: {
      const std::string call = any_tool(chosen, true, "");
      root = fmt::format("root ::= {} \"[\" space {}{} \"]\" {}\n", grammar::gbnf_literal(f.open), call,
                         parallel ? " (\",\" space " + call + ")*" : "",
                         f.close.empty() ? "" : grammar::gbnf_literal(f.close));
      break;
    }
    case CallSyntax::JsonTail: root = fmt::format("root ::= {}\n", any_tool(chosen, true, "")); break;
    case CallSyntax::NameThenJson:
      root = fmt::format("root ::= one{}\none ::= {} {}\n", parallel ? "+" : "", grammar::gbnf_literal(f.open),
                         any_tool(chosen, false, f.separator));
      break;
    default:  // FunctionTags, JSON arguments
      root = fmt::format("root ::= one{}\none ::= {} {} \"</function>\"\n", parallel ? "+" : "",
                         grammar::gbnf_literal(f.open), any_tool(chosen, false, ">"));
  }
  return root + tool_rules(f, chosen, json_calls);
}

}  // namespace skainet::generate
