// Tools on /v1/chat/completions: the template context the server builds from an OpenAI request (the
// one tests/chat/conversations.json's "served_tool_call" holds, which chat.jinja2_reference renders
// with every real template against Jinja2), which requests are refused, the reply's calls, the
// streamed reply held back where a call may begin, and the response shapes.
#include <fstream>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "serve/tool_reply.hpp"

namespace skainet::serve {
namespace {

using Json = nlohmann::ordered_json;

const generate::ToolCallFormat& hermes() {
  for (const generate::ToolCallFormat& f : generate::tool_call_formats())
    if (f.name == "hermes") return f;
  throw std::runtime_error("no hermes format");
}

constexpr std::string_view kRequest = R"({"messages":[
  {"role":"system","content":"You can call tools."},
  {"role":"user","content":"What's the weather in Paris?"},
  {"role":"assistant","content":null,"tool_calls":[{"id":"a1b2c3d4e","type":"function",
    "function":{"name":"get_weather","arguments":"{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]},
  {"role":"tool","tool_call_id":"a1b2c3d4e","name":"get_weather","content":"{\"temp\": 18, \"sky\": \"cloudy\"}"}],
  "tools":[{"type":"function","function":{"name":"get_weather","description":"Get the current weather for a city.",
    "parameters":{"type":"object","properties":{"city":{"type":"string","description":"City name"},
    "unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}}}]})";

TEST(ToolReply, TheServedContextIsTheOneCheckedAgainstJinja2) {
  std::ifstream in(SKAINET_SOURCE_DIR "/tests/chat/conversations.json");
  ASSERT_TRUE(in);
  const Json all = Json::parse(in);
  const Json* served = nullptr;
  for (const Json& c : all.at("conversations"))
    if (c.at("name") == "served_tool_call") served = &c.at("context");
  ASSERT_NE(served, nullptr);
  const Request r = parse_request(Endpoint::ChatCompletions, kRequest);
  EXPECT_EQ(template_messages(r.messages), served->at("messages"));
  EXPECT_EQ(Json::parse(r.tools), served->at("tools"));
}

TEST(ToolReply, FormatForARequest) {
  const Request with_tools = parse_request(Endpoint::ChatCompletions, kRequest);
  EXPECT_EQ(reply_format(with_tools, &hermes(), true), &hermes());
  Request none = with_tools;
  none.tool_choice = ToolChoice::None;
  EXPECT_EQ(reply_format(none, nullptr, false), nullptr);
  Request no_tools = with_tools;
  no_tools.tools.clear();
  EXPECT_EQ(reply_format(no_tools, nullptr, false), nullptr);
  try {
    reply_format(with_tools, nullptr, false);
    ADD_FAILURE() << "tools accepted for a template without them";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(e.message().find("chat template has no tool-call format"), std::string::npos) << e.message();
  }
  try {
    reply_format(with_tools, nullptr, true);
    ADD_FAILURE() << "tools accepted for a format not parsed";
  } catch (const RequestError& e) {
    EXPECT_NE(e.message().find("does not parse (known: "), std::string::npos) << e.message();
  }
}

TEST(ToolReply, CallsGetIdsAndParallelFalseKeepsTheFirst) {
  const std::string text =
      "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>"
      "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>";
  const ToolReply both = tool_reply(hermes(), text, true);
  ASSERT_EQ(both.calls.size(), 2u);
  EXPECT_EQ(both.calls[0].id.size(), 9u);
  EXPECT_NE(both.calls[0].id, both.calls[1].id);
  const ToolReply first = tool_reply(hermes(), text, false);
  ASSERT_EQ(first.calls.size(), 1u);
  EXPECT_EQ(first.calls[0].name, "a");
}

TEST(ToolReply, StreamHoldsBackWhereACallMayBegin) {
  HeldReply held(&hermes());
  EXPECT_EQ(held.next("Let me "), "Let me ");
  EXPECT_EQ(held.next("check. <tool"), "check. ");
  EXPECT_EQ(held.next("_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>"), "");
  const ToolReply end = held.finish(true);
  EXPECT_EQ(end.content, "");  // "Let me check." went out already
  ASSERT_EQ(end.calls.size(), 1u);
  EXPECT_EQ(end.calls[0].arguments, R"({"x":1})");

  HeldReply prose(&hermes());
  EXPECT_EQ(prose.next("a <"), "a ");
  EXPECT_EQ(prose.next("b"), "<b");
  EXPECT_EQ(prose.next(" <tool_call>{oops"), " ");
  const ToolReply bad = prose.finish(true);
  EXPECT_TRUE(bad.calls.empty());
  EXPECT_EQ(bad.content, "<tool_call>{oops");  // not a call: sent as text at the end

  HeldReply plain(nullptr);
  EXPECT_EQ(plain.next("<tool_call>"), "<tool_call>");
  EXPECT_TRUE(plain.finish(true).content.empty());
}

TEST(ToolReply, ResponseShapes) {
  const ResponseHead head{Endpoint::ChatCompletions, "chatcmpl-1", 1, "m"};
  const std::vector<ToolCall> calls{{"a1b2c3d4e", "get_weather", R"({"city":"Paris"})"}};
  const Json j = Json::parse(completion_json(head, "", FinishReason::ToolCalls, Usage{}, Timings{}, calls));
  const Json& choice = j.at("choices").at(0);
  EXPECT_EQ(choice.at("finish_reason"), "tool_calls");
  EXPECT_TRUE(choice.at("message").at("content").is_null());
  EXPECT_EQ(
      choice.at("message").at("tool_calls").dump(),
      R"([{"id":"a1b2c3d4e","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}])");
  const Json chunk = Json::parse(tool_calls_chunk_json(head, calls, false));
  EXPECT_EQ(
      chunk.at("choices").at(0).at("delta").dump(),
      R"({"tool_calls":[{"index":0,"id":"a1b2c3d4e","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]})");
  EXPECT_EQ(Json::parse(completion_json(head, "hi", FinishReason::Stop, Usage{}))
                .at("choices")
                .at(0)
                .at("message")
                .at("content"),
            "hi");
}

}  // namespace
}  // namespace skainet::serve
