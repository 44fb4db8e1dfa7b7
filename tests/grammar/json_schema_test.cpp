// JSON Schema → GBNF: the grammar accepts values of the schema and refuses others; what the converter
// cannot express is refused by name and place.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "skainet/text/grammar.hpp"

namespace skainet::grammar {
namespace {

using Json = nlohmann::ordered_json;

std::shared_ptr<const Vocabulary> vocabulary() {
  static const auto v = std::make_shared<const Vocabulary>(
      text::Tokenizer::from_file(std::string(SKAINET_SHARED_MODELS) + "/stories260K.gguf"));
  return v;
}

bool accepts(const Json& schema, std::string_view text) {
  Matcher m(std::make_shared<const Grammar>(Grammar::parse(json_schema_gbnf(schema))), vocabulary());
  return m.accept_text(text) && m.complete();
}

std::string error_of(const Json& schema) {
  try {
    Grammar::parse(json_schema_gbnf(schema));
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "";
}

TEST(JsonSchema, ObjectsKeepTheirDeclaredOrder) {
  const Json s = Json::parse(R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"string"}},
                               "required":["zeta","alpha"]})");
  EXPECT_TRUE(accepts(s, R"({"zeta": 3, "alpha": "x"})"));
  EXPECT_TRUE(accepts(s, "{\n  \"zeta\":-12,\"alpha\":\"a\\n\\u00e9\"}\n"));
  EXPECT_FALSE(accepts(s, R"({"alpha": "x", "zeta": 3})"));
  EXPECT_FALSE(accepts(s, R"({"zeta": 3})"));
  EXPECT_FALSE(accepts(s, R"({"zeta": 3.5, "alpha": "x"})"));
  EXPECT_FALSE(accepts(s, R"({"zeta": 03, "alpha": "x"})"));
}

TEST(JsonSchema, OptionalPropertiesAnySubsetInOrder) {
  const Json s = Json::parse(R"({"properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"type":"number"}},
                               "required":["b"]})");
  EXPECT_TRUE(accepts(s, R"({"b":null})"));
  EXPECT_TRUE(accepts(s, R"({"b":null,"a":true,"c":1e5})"));
  EXPECT_TRUE(accepts(s, R"({"b":null,"c":-0.25})"));
  EXPECT_FALSE(accepts(s, R"({"b":null,"c":1,"a":true})"));
  EXPECT_FALSE(accepts(s, R"({})"));
  const Json none = Json::parse(R"({"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"}}})");
  EXPECT_TRUE(accepts(none, "{}"));
  EXPECT_TRUE(accepts(none, R"({"y": 2})"));
  EXPECT_FALSE(accepts(none, R"({,"y": 2})"));
}

TEST(JsonSchema, ArraysEnumsConstsAndUnions) {
  EXPECT_TRUE(
      accepts(Json::parse(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})"), "[1, 2]"));
  EXPECT_FALSE(accepts(Json::parse(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})"), "[]"));
  EXPECT_FALSE(accepts(Json::parse(R"({"type":"array","items":{"type":"integer"},"maxItems":3})"), "[1,2,3,4]"));
  EXPECT_TRUE(accepts(Json::parse(R"({"prefixItems":[{"type":"string"},{"type":"boolean"}]})"), R"(["a", false])"));
  EXPECT_TRUE(accepts(Json::parse(R"({"enum":["red", 7, null, {"k":[1]}]})"), R"({"k":[1]})"));
  EXPECT_FALSE(accepts(Json::parse(R"({"enum":["red", 7]})"), R"("blue")"));
  EXPECT_TRUE(accepts(Json::parse(R"({"const":"say \"hi\""})"), R"("say \"hi\"")"));
  EXPECT_TRUE(accepts(Json::parse(R"({"type":["integer","null"]})"), "null"));
  EXPECT_TRUE(accepts(Json::parse(R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":2}]})"), R"("ab")"));
  EXPECT_FALSE(accepts(Json::parse(R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":2}]})"), R"("abc")"));
  EXPECT_TRUE(accepts(Json::parse(R"({"type":"string","format":"date"})"), R"("2026-12-06")"));
  EXPECT_FALSE(accepts(Json::parse(R"({"type":"string","format":"date"})"), R"("2026-13-06")"));
  EXPECT_TRUE(
      accepts(Json::parse(R"({"type":"string","format":"uuid"})"), R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_TRUE(accepts(Json::parse(R"({"type":"object"})"), R"({"any": [1, {"x": null}]})"));
  EXPECT_TRUE(
      accepts(Json::parse(R"({"type":"object","additionalProperties":{"type":"integer"}})"), R"({"a": 1, "b": 2})"));
  EXPECT_FALSE(accepts(Json::parse(R"({"type":"object","additionalProperties":{"type":"integer"}})"), R"({"a": "x"})"));
}

TEST(JsonSchema, ReferencesAndAllOf) {
  const Json tree = Json::parse(R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object",
      "properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}}})");
  EXPECT_TRUE(accepts(tree, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]})"));
  EXPECT_FALSE(accepts(tree, R"({"v":1,"kids":[{"kids":[]}]})"));
  const Json both = Json::parse(R"({"allOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},
                                           {"properties":{"b":{"type":"string"}},"required":["b"]}]})");
  EXPECT_TRUE(accepts(both, R"({"a":1,"b":"x"})"));
  EXPECT_FALSE(accepts(both, R"({"a":1})"));
}

TEST(JsonSchema, WhatCannotBeExpressedIsRefusedByName) {
  EXPECT_NE(error_of(Json::parse(R"({"properties":{"age":{"type":"integer","minimum":0}}})"))
                .find("'/properties/age': 'minimum' is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(Json::parse(R"({"type":"string","pattern":"^a+$"})")).find("'pattern' is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(Json::parse(R"({"$ref":"https://example.com/s.json"})")).find("only references inside the schema"),
            std::string::npos);
  EXPECT_NE(error_of(Json::parse(R"({"$ref":"#/$defs/missing"})")).find("points at nothing"), std::string::npos);
  EXPECT_NE(error_of(Json::parse(R"({"type":"decimal"})")).find("unknown type 'decimal'"), std::string::npos);
  EXPECT_NE(error_of(Json::parse(R"({"anyOf":[{"type":"string"}],"maxLength":3})")).find("'anyOf' beside 'maxLength'"),
            std::string::npos);
  EXPECT_NE(error_of(Json::parse(R"({"type":"array","minItems":"two"})")).find("json schema"), std::string::npos);
  EXPECT_NE(error_of(Json::parse(R"({"$ref":"#"})")).find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of(Json(false)).find("allows no value"), std::string::npos);
}

}  // namespace
}  // namespace skainet::grammar
