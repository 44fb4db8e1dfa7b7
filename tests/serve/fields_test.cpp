// The request-field table (fields.cpp): its shape, that parse_request obeys it for every field, and
// that docs/serving.md shows it as it is.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "skainet/app/serve.hpp"

namespace skainet::serve {
namespace {

using json = nlohmann::json;

// A completion body asking for `value` of `name`.
std::string with(std::string_view name, const json& value) {
  json body{{"prompt", "p"}};
  body[std::string(name)] = value;
  return body.dump();
}

TEST(ServeFields, SortedUniqueAndWellFormed) {
  const auto fields = request_fields();
  ASSERT_FALSE(fields.empty());
  for (size_t i = 1; i < fields.size(); ++i) EXPECT_LT(fields[i - 1].name, fields[i].name);
  for (const RequestField& f : fields) {
    EXPECT_FALSE(f.why.empty()) << f.name;
    EXPECT_EQ(find_request_field(f.name), &f);
    if (f.status != FieldStatus::Refused) {
      EXPECT_TRUE(f.off.empty()) << f.name << ": only a refused field lists values that ask for nothing";
    } else if (!f.off.empty()) {
      EXPECT_TRUE(json::parse(f.off).is_array()) << f.name;
    }
  }
  EXPECT_EQ(find_request_field("no_such_field"), nullptr);
}

// Every refused field: a value that asks for something is a 400 naming it; its "off" values and null pass.
TEST(ServeFields, RefusedFieldsAre400UnlessTheyAskForNothing) {
  for (const RequestField& f : request_fields()) {
    if (f.status != FieldStatus::Refused) continue;
    try {
      parse_request(Endpoint::Completions, with(f.name, "something"));
      ADD_FAILURE() << f.name << " was accepted";
    } catch (const RequestError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.type(), "invalid_request_error");
      EXPECT_NE(e.message().find("'" + std::string(f.name) + "' is not implemented"), std::string::npos) << e.message();
    }
    EXPECT_NO_THROW(parse_request(Endpoint::Completions, with(f.name, nullptr))) << f.name;
    if (f.off.empty()) continue;
    for (const json& off : json::parse(f.off))
      EXPECT_NO_THROW(parse_request(Endpoint::Completions, with(f.name, off))) << f.name << " = " << off.dump();
  }
}

TEST(ServeFields, NoEffectFieldsTakeAnyValue) {
  for (const RequestField& f : request_fields()) {
    if (f.status != FieldStatus::NoEffect || f.name == "model") continue;  // model must still be a string
    EXPECT_NO_THROW(parse_request(Endpoint::Completions, with(f.name, json{{"any", 1}}))) << f.name;
  }
}

TEST(ServeFields, ClientDefaultsAskForNothing) {
  EXPECT_NO_THROW(parse_request(Endpoint::ChatCompletions, R"({"messages":[{"role":"user","content":"x"}],
      "response_format":{"type":"text"},"logprobs":false,"top_logprobs":0,"tools":[],"tool_choice":"none",
      "n":1,"presence_penalty":0,"frequency_penalty":0.0,"logit_bias":{},"user":"u","metadata":{"k":"v"},
      "store":false,"parallel_tool_calls":true})"));
  EXPECT_NO_THROW(
      parse_request(Endpoint::Completions, R"({"prompt":"p","logprobs":0,"echo":false,"best_of":1,"suffix":null})"));
}

TEST(ServeFields, ImplementedSamplingFieldsAreRead) {
  const Request r = parse_request(Endpoint::Completions,
                                  R"({"prompt":[1,2,3],"repeat_penalty":1.3,"repeat_last_n":-1,"ignore_eos":true,
                                      "presence_penalty":-0.5,"frequency_penalty":2})");
  EXPECT_TRUE(r.prompt.empty());
  EXPECT_EQ(r.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FLOAT_EQ(*r.repeat_penalty, 1.3f);
  EXPECT_EQ(*r.repeat_last_n, -1);
  EXPECT_TRUE(*r.ignore_eos);
  EXPECT_FLOAT_EQ(*r.presence_penalty, -0.5f);
  EXPECT_FLOAT_EQ(*r.frequency_penalty, 2.0f);
  const Request d = parse_request(Endpoint::Completions, R"({"prompt":"p"})");
  EXPECT_FALSE(d.repeat_penalty || d.repeat_last_n || d.ignore_eos || d.presence_penalty || d.frequency_penalty);
}

// One home for the fact: the docs show the table as the code has it.
TEST(ServeFields, DocsShowTheTable) {
  std::ifstream in(SKAINET_DOCS_DIR "/serving.md");
  ASSERT_TRUE(in) << SKAINET_DOCS_DIR "/serving.md";
  std::stringstream docs;
  docs << in.rdbuf();
  EXPECT_NE(docs.str().find(request_fields_markdown()), std::string::npos)
      << "docs/serving.md's field table differs from fields.cpp; it should read:\n"
      << request_fields_markdown();
}

}  // namespace
}  // namespace skainet::serve
