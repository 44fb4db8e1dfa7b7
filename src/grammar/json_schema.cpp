// JSON Schema → GBNF, in the shape llama.cpp's json-schema-to-grammar gives: properties in their
// declared order (required ones first, then any subset of the optional ones, in order), whitespace
// between tokens bounded (`space`), numbers of at most 16 digits per part. The output of the grammar
// always parses as JSON and validates against the schema; a keyword that would narrow the values and
// that the grammar cannot express here is refused by name, never ignored.
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "skainet/text/grammar.hpp"

namespace skainet::grammar {

namespace {

using Json = nlohmann::ordered_json;

// The building blocks, each a rule added to the grammar when a schema first needs it.
const std::map<std::string, std::string, std::less<>>& primitive_rules() {
  static const std::map<std::string, std::string, std::less<>> rules{
      {"space", R"(| " " | "\n"{1,2} [ \t]{0,20})"},
      {"boolean", R"(("true" | "false") space)"},
      {"null", R"("null" space)"},
      {"integral-part", R"([0] | [1-9] [0-9]{0,15})"},
      {"decimal-part", R"([0-9]{1,16})"},
      {"number", R"(("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space)"},
      {"integer", R"(("-"? integral-part) space)"},
      {"char", R"([^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4}))"},
      {"string", R"("\"" char* "\"" space)"},
      {"value", R"(object | array | string | number | boolean | null)"},
      {"object", R"("{" space ( string ":" space value ("," space string ":" space value)* )? "}" space)"},
      {"array", R"("[" space ( value ("," space value)* )? "]" space)"},
      {"date", R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] ))"},
      {"time",
       R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))"},
      {"date-time", R"(date "T" time)"},
      {"date-string", R"("\"" date "\"" space)"},
      {"time-string", R"("\"" time "\"" space)"},
      {"date-time-string", R"("\"" date-time "\"" space)"},
      {"uuid",
       R"("\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"" space)"},
  };
  return rules;
}

// Which primitive rules each primitive uses.
const std::map<std::string, std::vector<std::string>, std::less<>>& primitive_deps() {
  static const std::map<std::string, std::vector<std::string>, std::less<>> deps{
      {"boolean", {"space"}},
      {"null", {"space"}},
      {"number", {"integral-part", "decimal-part", "space"}},
      {"integer", {"integral-part", "space"}},
      {"string", {"char", "space"}},
      {"value", {"object", "array", "string", "number", "boolean", "null"}},
      {"object", {"string", "value", "space"}},
      {"array", {"value", "space"}},
      {"date-time", {"date", "time"}},
      {"date-string", {"date", "space"}},
      {"time-string", {"time", "space"}},
      {"date-time-string", {"date-time", "space"}},
      {"uuid", {"space"}},
  };
  return deps;
}

// Keywords that only describe: they narrow nothing, so they are read past.
const std::set<std::string, std::less<>> kAnnotations{
    "$schema",    "$id",      "$comment",  "title", "description", "default",          "examples",
    "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "contentMediaType", "contentEncoding"};
const std::set<std::string, std::less<>> kSupported{"type",  "properties",  "required",  "additionalProperties",
                                                    "items", "prefixItems", "minItems",  "maxItems",
                                                    "enum",  "const",       "anyOf",     "oneOf",
                                                    "allOf", "$ref",        "minLength", "maxLength",
                                                    "format"};

}  // namespace

std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\')
      out += '\\', out += c;
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (u < 0x20 || u == 0x7F)
      out += "\\x" + std::string(1, "0123456789ABCDEF"[u >> 4]) + "0123456789ABCDEF"[u & 15];
    else
      out += c;
  }
  return out + "\"";
}

namespace {

// `item` between min and max times (max < 0: unbounded), separated by `separator`.
std::string repetition(const std::string& item, int64_t min, int64_t max, const std::string& separator) {
  const auto count = [](int64_t lo, int64_t hi) {
    if (hi < 0) return lo == 0 ? std::string("*") : lo == 1 ? std::string("+") : "{" + std::to_string(lo) + ",}";
    if (lo == hi) return "{" + std::to_string(lo) + "}";
    return "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
  };
  if (max == 0) return "";
  if (separator.empty()) return "(" + item + ")" + count(min, max);
  const std::string rest = "(" + separator + " " + item + ")";
  if (min == 0) return "(" + item + " " + rest + count(0, max < 0 ? -1 : max - 1) + ")?";
  return item + " " + rest + count(min - 1, max < 0 ? -1 : max - 1);
}

class Converter {
 public:
  // `root`: the document local $refs resolve in; `reserved`: rule names the caller writes itself.
  Converter(const Json& root, std::set<std::string> reserved) : root_(&root), reserved_(std::move(reserved)) {}

  // The rule `name ::= ...` for `schema`, its helper rules collected for rules().
  std::string convert(const std::string& name, const Json& schema) {
    root_ = &schema;
    refs_.clear();  // a $ref names a place in its own document
    return name + " ::= " + visit(schema, name, "") + "\n";
  }

  std::string rules() const {
    std::string out;
    for (const auto& [name, rule] : rules_) out += name + " ::= " + rule + "\n";
    return out;
  }

 private:
  const Json* root_;
  std::set<std::string> reserved_;
  std::map<std::string, std::string> rules_;
  std::map<std::string, std::string> refs_;  // "$ref" → its rule's name

  [[noreturn]] static void refuse(const std::string& path, const std::string& what) {
    throw GrammarError("json schema at '" + (path.empty() ? std::string("/") : path) + "': " + what);
  }

  std::string primitive(std::string_view name) {
    const auto it = primitive_rules().find(name);
    if (rules_.emplace(std::string(name), it->second).second)
      if (const auto d = primitive_deps().find(name); d != primitive_deps().end())
        for (const std::string& dep : d->second) primitive(dep);
    return std::string(name);
  }

  // A new rule named after where it is in the schema (letters, digits and '-' only).
  std::string add_rule(const std::string& hint, const std::string& body) {
    std::string name;
    for (const char c : hint) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
    if (name.empty() || reserved_.count(name) || primitive_rules().count(name)) name = "r-" + name;
    std::string unique = name;
    for (int i = 1; rules_.count(unique) && rules_[unique] != body; ++i) unique = name + "-" + std::to_string(i);
    rules_[unique] = body;
    return unique;
  }

  void check_keywords(const Json& schema, const std::string& path) const {
    for (const auto& [key, value] : schema.items())
      if (!kSupported.count(key) && !kAnnotations.count(key))
        refuse(path, "'" + key + "' is not supported by the grammar converter");
  }

  // A composition keyword with other constraints beside it would need both applied; only its own
  // schemas are turned into grammar, so such a schema is refused rather than half-followed.
  static void check_composition_alone(const Json& schema, const std::string& path) {
    for (const char* composition : {"$ref", "anyOf", "oneOf", "allOf"}) {
      if (!schema.contains(composition)) continue;
      for (const auto& [key, value] : schema.items())
        if (key != composition && key != "type" && !kAnnotations.count(key))
          refuse(path, "'" + std::string(composition) + "' beside '" + key + "' is not supported");
    }
  }

  std::string visit(const Json& schema, const std::string& name, const std::string& path) {
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) refuse(path, "the schema false allows no value");
      return primitive("value");
    }
    if (!schema.is_object()) refuse(path, "a schema must be an object or a boolean");
    check_keywords(schema, path);
    check_composition_alone(schema, path);
    if (schema.contains("$ref")) return reference(schema, path);
    if (schema.contains("const")) return gbnf_literal(schema["const"].dump()) + " " + primitive("space");
    if (schema.contains("enum")) return enumeration(schema["enum"], path);
    for (const char* key : {"anyOf", "oneOf"})
      if (schema.contains(key)) return alternatives(schema[key], name, path + "/" + key);
    if (schema.contains("allOf")) return all_of(schema, name, path);
    if (!schema.contains("type")) {
      if (schema.contains("properties") || schema.contains("additionalProperties")) return object(schema, name, path);
      if (schema.contains("items") || schema.contains("prefixItems")) return array(schema, name, path);
      return primitive("value");
    }
    const Json& type = schema["type"];
    if (type.is_string()) return typed(type.get<std::string>(), schema, name, path);
    if (!type.is_array() || type.empty()) refuse(path, "'type' must be a string or a non-empty list of strings");
    std::string out = "(";
    for (size_t i = 0; i < type.size(); ++i) {
      if (!type[i].is_string()) refuse(path, "'type' must be a string or a non-empty list of strings");
      out += (i ? " | " : "") + typed(type[i].get<std::string>(), schema, name, path);
    }
    return out + ")";
  }

  std::string typed(const std::string& type, const Json& schema, const std::string& name, const std::string& path) {
    if (type == "object") return object(schema, name, path);
    if (type == "array") return array(schema, name, path);
    if (type == "string") return string(schema, name, path);
    if (type == "number" || type == "integer" || type == "boolean" || type == "null") return primitive(type);
    refuse(path, "unknown type '" + type + "'");
  }

  std::string string(const Json& schema, const std::string& name, const std::string& path) {
    if (schema.contains("format")) {
      const std::string format = schema["format"].get<std::string>();
      if (format == "date" || format == "time" || format == "date-time") return primitive(format + "-string");
      if (format == "uuid") return primitive("uuid");
      // Other formats are annotations in JSON Schema (validators do not check them by default).
    }
    const int64_t min = schema.value("minLength", int64_t{0}), max = schema.value("maxLength", int64_t{-1});
    if (min < 0 || (max >= 0 && max < min)) refuse(path, "minLength/maxLength out of order");
    if (min > 4096 || max > 4096) refuse(path, "minLength/maxLength above 4096 is not supported");
    if (min == 0 && max < 0) return primitive("string");
    primitive("char");
    return add_rule(name, "\"\\\"\" " + repetition("char", min, max, "") + " \"\\\"\" " + primitive("space"));
  }

  std::string enumeration(const Json& values, const std::string& path) {
    if (!values.is_array() || values.empty()) refuse(path, "'enum' must be a non-empty list");
    std::string out = "(";
    for (size_t i = 0; i < values.size(); ++i) out += (i ? " | " : "") + gbnf_literal(values[i].dump());
    return out + ") " + primitive("space");
  }

  std::string alternatives(const Json& list, const std::string& name, const std::string& path) {
    if (!list.is_array() || list.empty()) refuse(path, "must be a non-empty list of schemas");
    std::string out = "(";
    for (size_t i = 0; i < list.size(); ++i)
      out += (i ? " | " : "") + visit(list[i], name + "-" + std::to_string(i), path + "/" + std::to_string(i));
    return out + ")";
  }

  const Json& resolve(const std::string& ref, const std::string& path) const {
    if (ref.empty() || ref[0] != '#')
      refuse(path, "'$ref' " + ref + ": only references inside the schema ('#...') are supported");
    try {
      return ref == "#" ? *root_ : root_->at(Json::json_pointer(ref.substr(1)));
    } catch (const nlohmann::json::exception&) {
      refuse(path, "'$ref' " + ref + " points at nothing in the schema");
    }
  }

  std::string reference(const Json& schema, const std::string& path) {
    const std::string ref = schema["$ref"].is_string() ? schema["$ref"].get<std::string>() : "";
    if (const auto it = refs_.find(ref); it != refs_.end()) return it->second;
    const Json& target = resolve(ref, path);
    const std::string hint = "ref" + ref.substr(ref.find_last_of('/') == std::string::npos ? 1 : ref.find_last_of('/'));
    const std::string rule = add_rule(hint, "\"\"");  // named first: the target may refer to itself
    refs_[ref] = rule;
    rules_[rule] = visit(target, rule, ref.substr(1));
    return rule;
  }

  // allOf of object schemas: one object with every component's properties and required keys.
  std::string all_of(const Json& schema, const std::string& name, const std::string& path) {
    Json merged = {{"type", "object"}, {"properties", Json::object()}, {"required", Json::array()}};
    for (const Json& part0 : schema["allOf"]) {
      const Json& part = part0.contains("$ref") ? resolve(part0["$ref"].get<std::string>(), path) : part0;
      for (const auto& [key, value] : part.items()) {
        if (key == "properties")
          merged["properties"].update(value);
        else if (key == "required")
          merged["required"].insert(merged["required"].end(), value.begin(), value.end());
        else if (!(key == "type" && value == "object") && !kAnnotations.count(key))
          refuse(path + "/allOf", "only objects' properties and required keys can be combined, not '" + key + "'");
      }
    }
    return object(merged, name, path);
  }

  std::string object(const Json& schema, const std::string& name, const std::string& path) {
    const Json properties = schema.value("properties", Json::object());
    std::set<std::string> required;
    for (const Json& r : schema.value("required", Json::array())) required.insert(r.get<std::string>());
    std::vector<std::pair<std::string, std::string>> req, opt;  // key, its "key": value rule
    const auto kv = [&](const std::string& key, const Json& sub) {
      const std::string value = visit(sub, name + "-" + key, path + "/properties/" + key);
      return add_rule(name + "-" + key + "-kv", gbnf_literal(Json(key).dump()) + " " + primitive("space") + " \":\" " +
                                                    primitive("space") + " " + value);
    };
    for (const auto& [key, sub] : properties.items()) (required.count(key) ? req : opt).push_back({key, kv(key, sub)});
    for (const std::string& key : required)
      if (!properties.contains(key)) req.push_back({key, kv(key, true)});
    std::string body = "\"{\" " + primitive("space");
    for (size_t i = 0; i < req.size(); ++i) body += (i ? " \",\" " + primitive("space") + " " : " ") + req[i].second;
    if (!opt.empty()) {
      const std::string chain = optional_chain(opt, name);
      body += req.empty() ? " (" + chain + ")?" : " (\",\" " + primitive("space") + " " + chain + ")?";
    } else if (req.empty() && schema.value("additionalProperties", Json(true)) != false) {
      // No properties named: a map. (With properties named, only those are written, which any
      // additionalProperties allows.)
      const Json extra = schema.value("additionalProperties", Json(true));
      if (extra == true) return primitive("object");
      const std::string value = visit(extra, name + "-additional", path + "/additionalProperties");
      const std::string item =
          add_rule(name + "-additional-kv", primitive("string") + " \":\" " + primitive("space") + " " + value);
      body += " " + repetition(item, 0, -1, "\",\" " + primitive("space"));
    }
    return add_rule(name, body + " \"}\" " + primitive("space"));
  }

  // Any subset of the optional properties, in order: c_i ::= kv_i ("," space c_{i+1})? | c_{i+1}.
  std::string optional_chain(const std::vector<std::pair<std::string, std::string>>& opt, const std::string& name) {
    std::string next;
    for (size_t i = opt.size(); i-- > 0;) {
      const std::string rest = next.empty() ? "" : " (\",\" " + primitive("space") + " " + next + ")?";
      const std::string body = opt[i].second + rest + (next.empty() ? "" : " | " + next);
      next = add_rule(name + "-rest-" + std::to_string(i), body);
    }
    return next;
  }

  std::string array(const Json& schema, const std::string& name, const std::string& path) {
    const std::string comma = "\",\" " + primitive("space");
    std::string body = "\"[\" " + primitive("space");
    if (schema.contains("prefixItems")) {
      if (schema.contains("items") && schema["items"] != false)
        refuse(path, "'items' beside 'prefixItems' is not supported");
      const Json& items = schema["prefixItems"];
      for (size_t i = 0; i < items.size(); ++i)
        body += (i ? " " + comma + " " : " ") +
                visit(items[i], name + "-" + std::to_string(i), path + "/prefixItems/" + std::to_string(i));
    } else {
      const int64_t min = schema.value("minItems", int64_t{0}), max = schema.value("maxItems", int64_t{-1});
      if (min < 0 || (max >= 0 && max < min)) refuse(path, "minItems/maxItems out of order");
      if (min > 1024 || max > 1024) refuse(path, "minItems/maxItems above 1024 is not supported");
      const std::string item =
          schema.contains("items") ? visit(schema["items"], name + "-item", path + "/items") : primitive("value");
      body += " " + repetition(item, min, max, comma);
    }
    return add_rule(name, body + " \"]\" " + primitive("space"));
  }
};

}  // namespace

std::string json_schemas_gbnf(std::span<const std::pair<std::string, nlohmann::ordered_json>> schemas) {
  std::set<std::string> reserved{"root"};
  for (const auto& [name, schema] : schemas) reserved.insert(name);
  try {
    Converter converter(schemas.empty() ? Json() : schemas.front().second, reserved);
    std::string out;
    for (const auto& [name, schema] : schemas) out += converter.convert(name, schema);
    return out + converter.rules();
  } catch (const nlohmann::json::exception& e) {  // a keyword's value of the wrong JSON type
    throw GrammarError(std::string("json schema: ") + e.what());
  }
}

std::string json_schema_gbnf(const nlohmann::ordered_json& schema) {
  const std::pair<std::string, nlohmann::ordered_json> root{"root", schema};
  return json_schemas_gbnf(std::span(&root, 1));
}

std::string json_object_gbnf() { return json_schema_gbnf(Json{{"type", "object"}}); }

}  // namespace skainet::grammar
