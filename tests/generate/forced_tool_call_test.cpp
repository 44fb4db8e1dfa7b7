// tool_choice "required" / a named function: for every format whose arguments are JSON, text drawn
// under forced_tool_call_gbnf's grammar from random logits parses back (parse_tool_calls) into one
// call of a given tool, its arguments holding the parameters' required keys; the other formats are
// refused by name.
#include <gtest/gtest.h>

#include "skainet/model/tool_calls.hpp"
#include "skainet/text/grammar.hpp"

using namespace skainet;

namespace {

const nlohmann::ordered_json kTools = nlohmann::ordered_json::parse(R"([
  {"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
    "properties":{"city":{"type":"string","maxLength":12},"unit":{"enum":["c","f"]}},"required":["city","unit"]}}},
  {"type":"function","function":{"name":"get_time","parameters":{"type":"object",
    "properties":{"zone":{"type":"integer"}},"required":["zone"]}}}])");

// Text drawn under the grammar from random logits (tokens that close a value favoured, so it ends).
std::string draw(const text::Tokenizer& tok, const std::string& gbnf, uint64_t seed) {
  const auto vocab = std::make_shared<const grammar::Vocabulary>(tok);
  text::Sampler s(tok.vocab_size(), {.temperature = 1.0f, .seed = seed});
  s.constrain(std::make_unique<grammar::Matcher>(
      std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(gbnf)), vocab));
  text::Rng rng(seed);
  std::vector<float> logits(static_cast<size_t>(tok.vocab_size()));
  std::vector<int32_t> ids;
  for (int i = 0; i < 3000; ++i) {
    for (int32_t id = 0; id < tok.vocab_size(); ++id)
      logits[static_cast<size_t>(id)] =
          static_cast<float>(rng.uniform() * 2.0) +
          (vocab->bytes(id).find_first_of("\"]}>") != std::string_view::npos ? 3.0f : 0.0f);
    const int32_t id = s.sample(logits);
    if (tok.is_eog(id)) return tok.decode(ids, {.strip_leading_space = false});
    ids.push_back(id);
  }
  ADD_FAILURE() << "no end after 3000 tokens";
  return {};
}

TEST(ForcedToolCall, EveryJsonFormatParsesBackIntoOneCall) {
  const text::Tokenizer tok = text::Tokenizer::from_file(std::string(SKAINET_SHARED_MODELS) + "/stories260K.gguf");
  for (const generate::ToolCallFormat& f : generate::tool_call_formats()) {
    SCOPED_TRACE(std::string(f.name));
    if (!generate::can_force_tool_call(f)) {
      EXPECT_THROW(generate::forced_tool_call_gbnf(f, kTools, "", false), InvalidArgument);
      continue;
    }
    for (const std::string_view only : {std::string_view(""), std::string_view("get_time")}) {
      const std::string text = draw(tok, generate::forced_tool_call_gbnf(f, kTools, only, false), only.size() + 1);
      const generate::ParsedReply reply = generate::parse_tool_calls(f, text);
      ASSERT_EQ(reply.calls.size(), 1u) << text;
      const auto args = nlohmann::json::parse(reply.calls[0].arguments);
      if (reply.calls[0].name == "get_weather") {
        EXPECT_TRUE(only.empty());
        EXPECT_TRUE(args["city"].is_string() && (args["unit"] == "c" || args["unit"] == "f")) << text;
      } else {
        EXPECT_EQ(reply.calls[0].name, "get_time") << text;
        EXPECT_TRUE(args["zone"].is_number_integer()) << text;
      }
    }
  }
  EXPECT_THROW(generate::forced_tool_call_gbnf(generate::tool_call_formats()[4], kTools, "nope", false),
               InvalidArgument);
}

}  // namespace
