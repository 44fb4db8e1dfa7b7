#include "output_format.hpp"

#include <fmt/format.h>

#include "json_body.hpp"

namespace skainet::serve {

namespace {

using json = nlohmann::json;
using ordered = nlohmann::ordered_json;

// The schema at `path` in the request, with its keys in the order the client wrote them.
ordered schema_in_order(std::string_view body, const json::json_pointer& path) {
  return ordered::parse(body).at(ordered::json_pointer(path.to_string()));
}

std::string response_format_gbnf(const json& format, std::string_view body) {
  if (!format.is_object() || !format.contains("type") || !format["type"].is_string())
    bad_request("'response_format' must be an object with a 'type': \"text\", \"json_object\" or \"json_schema\"");
  const std::string type = format["type"].get<std::string>();
  if (type == "text") return "";
  if (type == "json_object") {
    // llama-server also reads a schema given beside json_object.
    if (format.contains("schema"))
      return grammar::json_schema_gbnf(schema_in_order(body, json::json_pointer("/response_format/schema")));
    return grammar::json_object_gbnf();
  }
  if (type != "json_schema")
    bad_request(
        fmt::format("'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", not \"{}\"", type));
  const json* spec = field_of(format, "json_schema");
  if (!spec || !spec->is_object()) bad_request("'response_format.json_schema' must be an object with a 'schema'");
  if (const json* strict = field_of(*spec, "strict"); strict && !strict->is_boolean())
    bad_request("'response_format.json_schema.strict' must be a boolean");
  if (!field_of(*spec, "schema")) bad_request("'response_format.json_schema.schema' is missing");
  return grammar::json_schema_gbnf(schema_in_order(body, json::json_pointer("/response_format/json_schema/schema")));
}

}  // namespace

std::shared_ptr<const grammar::Grammar> output_grammar(const json& request, std::string_view body) {
  const json* format = field_of(request, "response_format");
  const json* gbnf = field_of(request, "grammar");
  const json* schema = field_of(request, "json_schema");
  if ((format != nullptr) + (gbnf != nullptr) + (schema != nullptr) > 1)
    bad_request("'response_format', 'grammar' and 'json_schema' each constrain the output: send one of them");
  std::string text;
  try {
    if (format) {
      text = response_format_gbnf(*format, body);
    } else if (gbnf) {
      if (!gbnf->is_string()) bad_request("'grammar' must be a string of GBNF rules");
      text = gbnf->get<std::string>();
    } else if (schema) {
      text = grammar::json_schema_gbnf(schema_in_order(body, json::json_pointer("/json_schema")));
    }
    if (text.empty()) return nullptr;
    return std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(text));
  } catch (const grammar::GrammarError& e) {
    bad_request(fmt::format("'{}': {}", format ? "response_format" : gbnf ? "grammar" : "json_schema", e.what()));
  }
}

}  // namespace skainet::serve
