// Request parsing and validation (skainet::serve::parse_request): what is accepted, with which
// values, and that every refusal is a 400 naming the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "skainet/app/serve.hpp"

namespace skainet::serve {
namespace {

Request chat(std::string_view body) { return parse_request(Endpoint::ChatCompletions, body); }
Request completion(std::string_view body) { return parse_request(Endpoint::Completions, body); }

// The refusal's status and message, for a body that must be refused.
RequestError refusal(Endpoint e, std::string_view body) {
  try {
    parse_request(e, body);
  } catch (const RequestError& err) {
    return err;
  }
  ADD_FAILURE() << "accepted: " << body;
  return RequestError(0, "", "");
}

TEST(ServeRequest, LogprobsAndChoicesAreRead) {
  const Endpoint kChat = Endpoint::ChatCompletions, kText = Endpoint::Completions;
  EXPECT_EQ(parse_request(kText, R"({"prompt":"p","logprobs":3,"n":2})").top_logprobs, 3);
  EXPECT_EQ(parse_request(kText, R"({"prompt":"p","logprobs":3,"n":2})").n, 2);
  EXPECT_FALSE(parse_request(kText, R"({"prompt":"p","logprobs":0})").top_logprobs) << "llama-server: 0 asks for none";
  EXPECT_EQ(parse_request(kText, R"({"prompt":"p","n_probs":5})").top_logprobs, 5);
  const std::string chat = R"({"messages":[{"role":"user","content":"x"}],)";
  EXPECT_EQ(parse_request(kChat, chat + R"("logprobs":true})").top_logprobs, 0);
  EXPECT_EQ(parse_request(kChat, chat + R"("logprobs":true,"top_logprobs":4})").top_logprobs, 4);
  EXPECT_FALSE(parse_request(kChat, chat + R"("logprobs":false,"top_logprobs":0})").top_logprobs);
}

TEST(ServeRequest, ChatWithEveryField) {
  const Request r = chat(R"({"model":"m","messages":[{"role":"system","content":"Be brief."},
      {"role":"user","content":[{"type":"text","text":"Hi "},{"type":"text","text":"there"}]}],
      "stream":true,"stream_options":{"include_usage":true},"temperature":0.5,"top_p":0.9,"top_k":40,"min_p":0.05,
      "seed":7,"max_tokens":12,"stop":["\n","END"],"n":1,"user":"ignored","presence_penalty":0})");
  EXPECT_EQ(r.endpoint, Endpoint::ChatCompletions);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "Be brief.");
  EXPECT_EQ(r.messages[1].role, "user");
  EXPECT_EQ(r.messages[1].content, "Hi there");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_FLOAT_EQ(*r.temperature, 0.5f);
  EXPECT_FLOAT_EQ(*r.top_p, 0.9f);
  EXPECT_EQ(*r.top_k, 40);
  EXPECT_FLOAT_EQ(*r.min_p, 0.05f);
  EXPECT_EQ(*r.seed, 7u);
  EXPECT_EQ(*r.max_tokens, 12);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n", "END"}));
}

TEST(ServeRequest, CompletionDefaultsAreAbsent) {
  const Request r = completion(R"({"prompt":"Once upon a time"})");
  EXPECT_EQ(r.prompt, "Once upon a time");
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.cache_prompt) << "llama-server's default: reuse a slot's cached prefix";
  EXPECT_FALSE(r.temperature || r.top_p || r.top_k || r.min_p || r.seed || r.max_tokens);
  EXPECT_FALSE(completion(R"({"prompt":"p","cache_prompt":false})").cache_prompt);
  EXPECT_TRUE(completion(R"({"prompt":"p","cache_prompt":null})").cache_prompt);
  EXPECT_TRUE(r.stop.empty());
}

TEST(ServeRequest, NullMeansAbsentAndAliasesWork) {
  const Request r = completion(R"({"prompt":["one prompt"],"temperature":null,"stop":"x","n_predict":-1,"top_k":5.0})");
  EXPECT_EQ(r.prompt, "one prompt");
  EXPECT_FALSE(r.temperature);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(*r.max_tokens, -1);  // llama.cpp's n_predict: no limit
  EXPECT_EQ(*r.top_k, 5);
  EXPECT_EQ(*completion(R"({"prompt":"p","max_completion_tokens":3})").max_tokens, 3);
  EXPECT_EQ(*completion(R"({"prompt":"p","seed":-1})").seed, UINT64_MAX);
}

struct Bad {
  Endpoint endpoint;
  const char* body;
  const char* names;  // what the message must mention
};

class ServeRequestRefused : public ::testing::TestWithParam<Bad> {};

TEST_P(ServeRequestRefused, With400NamingTheField) {
  const Bad& b = GetParam();
  const RequestError e = refusal(b.endpoint, b.body);
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.type(), "invalid_request_error");
  EXPECT_NE(e.message().find(b.names), std::string::npos) << e.message();
}

constexpr Endpoint kChat = Endpoint::ChatCompletions;
constexpr Endpoint kText = Endpoint::Completions;

INSTANTIATE_TEST_SUITE_P(
    Cases, ServeRequestRefused,
    ::testing::Values(
        Bad{kText, "", "not valid JSON"}, Bad{kText, "{\"prompt\":", "not valid JSON"},
        Bad{kText, "[1,2]", "must be a JSON object"}, Bad{kText, "{}", "'prompt' is required"},
        Bad{kText, R"({"prompt":5})", "'prompt' must be a string"}, Bad{kText, R"({"prompt":["a","b"]})", "one string"},
        Bad{kText, R"({"prompt":[[1,2],[3]]})", "one string"}, Bad{kText, R"({"prompt":[]})", "must not be empty"},
        Bad{kText, R"({"prompt":[1,"a"]})", "prompt[1] must be a token id"},
        Bad{kText, R"({"prompt":[1,-2]})", "prompt[1] is -2"},
        Bad{kText, R"({"prompt":[1.5]})", "prompt[0] must be a token id"},
        Bad{kText, R"({"prompt":[4294967296]})", "prompt[0] is 4294967296"},
        Bad{kText, R"({"prompt":"p","repeat_penalty":0})", "'repeat_penalty' must be above 0"},
        Bad{kText, R"({"prompt":"p","repeat_penalty":"x"})", "'repeat_penalty' must be a number"},
        Bad{kText, R"({"prompt":"p","repeat_last_n":-2})", "'repeat_last_n'"},
        Bad{kText, R"({"prompt":"p","presence_penalty":2.5})", "'presence_penalty' must be from -2 to 2"},
        Bad{kText, R"({"prompt":"p","frequency_penalty":"x"})", "'frequency_penalty' must be a number"},
        Bad{kText, R"({"prompt":"p","ignore_eos":1})", "'ignore_eos' must be true or false"},
        Bad{kChat, R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}})",
            "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", not \"xml\""},
        Bad{kChat,
            R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"a"}}})",
            "'response_format.json_schema.schema' is missing"},
        Bad{kChat,
            R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"string","pattern":"a+"}}}})",
            "'response_format': json schema at '/': 'pattern' is not supported"},
        Bad{kText, R"({"prompt":"p","grammar":"root ::= item"})",
            "'grammar': grammar rule 'item' is used but never defined"},
        Bad{kText, R"({"prompt":"p","grammar":7})", "'grammar' must be a string of GBNF rules"},
        Bad{kText, R"({"prompt":"p","json_schema":{"properties":{"n":{"type":"integer","minimum":1}}}})",
            "'json_schema': json schema at '/properties/n': 'minimum' is not supported"},
        Bad{kText, R"({"prompt":"p","grammar":"root ::= \"a\"","json_schema":{}})",
            "each constrain the output: send one"},
        Bad{kText, R"({"prompt":"p","logprobs":21})", "'logprobs' must be an integer from 0 to 20"},
        Bad{kText, R"({"prompt":"p","logprobs":true})", "'logprobs' must be an integer"},
        Bad{kChat, R"({"messages":[{"role":"user","content":"x"}],"logprobs":2})", "'logprobs' must be true or false"},
        Bad{kChat, R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":3})", "needs 'logprobs': true"},
        Bad{kChat, R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})",
            "'top_logprobs' must be an integer from 0 to 20"},
        Bad{kText, R"({"prompt":"p","n_probs":-1})", "'n_probs'"},
        Bad{kText, R"({"prompt":"p","post_sampling_probs":true})", "'post_sampling_probs' is not implemented"},
        Bad{kChat, R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})",
            "tools[0].function must be an object"},
        Bad{kChat, R"({"messages":[{"role":"user","content":"x"}],"tools":{}})", "'tools' must be a list"},
        Bad{kChat, R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"code","function":{"name":"f"}}]})",
            "tools[0].type must be \"function\""},
        Bad{kChat, R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{}}]})",
            "tools[0].function.name is required"},
        Bad{kChat,
            R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":[]}}]})",
            "tools[0].function.parameters must be an object"},
        Bad{kChat, R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required"})",
            "'tool_choice' asks for a tool call, but 'tools' gives none"},
        Bad{kChat,
            R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"g"}}],
                "tool_choice":{"type":"function","function":{"name":"f"}}})",
            "'tool_choice' names 'f', which is not among 'tools'"},
        Bad{kChat,
            R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"g"}}],
                "tool_choice":{"type":"function"}})",
            "'tool_choice' must be"},
        Bad{kChat, R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"sometimes"})",
            "'tool_choice' must be"},
        Bad{kChat, R"({"messages":[{"role":"assistant","tool_calls":[{"id":"a","function":{"arguments":"{}"}}]}]})",
            "messages[0].tool_calls[0].function.name is required"},
        Bad{kChat, R"({"messages":[{"role":"assistant","tool_calls":{}}]})", "messages[0].tool_calls must be a list"},
        Bad{kText, R"({"prompt":"p","tools":[{"type":"function","function":{"name":"f"}}]})",
            "'tools' are for /v1/chat/completions"},
        Bad{kChat, R"({"messages":[{"role":"user","content":"x"}],"functions":[{"name":"f"}]})",
            "'functions' is not implemented"},
        Bad{kText, R"({"prompt":""})", "'prompt' must not be empty"},
        Bad{kText, R"({"prompt":[""]})", "'prompt' must not be empty"},
        Bad{kText, R"({"prompt":"p","max_tokens":-1})", "'max_tokens'"},
        Bad{kText, R"({"prompt":"p","max_tokens":"12"})", "'max_tokens' must be an integer"},
        Bad{kText, R"({"prompt":"p","max_tokens":1.5})", "'max_tokens'"},
        Bad{kText, R"({"prompt":"p","max_tokens":1e30})", "'max_tokens'"},
        Bad{kText, R"({"prompt":"p","max_tokens":18446744073709551615})", "'max_tokens'"},
        Bad{kText, R"({"prompt":"p","n_predict":-2})", "'n_predict'"},
        Bad{kText, R"({"prompt":"p","temperature":"hot"})", "'temperature' must be a number"},
        Bad{kText, R"({"prompt":"p","temperature":-0.1})", "'temperature'"},
        Bad{kText, R"({"prompt":"p","top_p":1.5})", "'top_p'"}, Bad{kText, R"({"prompt":"p","min_p":true})", "'min_p'"},
        Bad{kText, R"({"prompt":"p","top_k":-3})", "'top_k'"},
        // Issue 24, finding 11: what has no meaning as a sampling value, named.
        Bad{kText, R"({"prompt":"p","temperature":1e400})", "number overflow parsing '1e400'"},
        Bad{kText, R"({"prompt":"p","temperature":-1e400})", "number overflow"},
        Bad{kText, R"({"prompt":"p","temperature":101})", "'temperature' must be from 0 to 100"},
        Bad{kText, R"({"prompt":"p","top_p":1e300})", "'top_p' must be from 0 to 1"},
        Bad{kText, R"({"prompt":"p","top_p":-0.5})", "'top_p' must be from 0 to 1"},
        Bad{kText, R"({"prompt":"p","min_p":2})", "'min_p' must be from 0 to 1"},
        Bad{kText, R"({"prompt":"p","top_k":-5})", "'top_k' must be an integer from 0"},
        Bad{kText, R"({"prompt":"p","top_k":-5.0})", "'top_k' must be an integer from 0"},
        Bad{kText, R"({"prompt":"p","top_k":1e300})", "'top_k' must be an integer from 0"},
        Bad{kText, R"({"prompt":"p","temperature":NaN})", "not valid JSON"},
        Bad{kChat, R"({"messages":[{"role":"user","content":"x"}],"top_p":"nan"})", "'top_p' must be a number"},
        Bad{kText, R"({"prompt":"p","seed":"x"})", "'seed'"}, Bad{kText, R"({"prompt":"p","seed":1.5})", "'seed'"},
        Bad{kText, R"({"prompt":"p","stream":"yes"})", "'stream' must be true or false"},
        Bad{kText, R"({"prompt":"p","stream_options":1})", "'stream_options'"},
        Bad{kText, R"({"prompt":"p","cache_prompt":1})", "'cache_prompt' must be true or false"},
        Bad{kText, R"({"prompt":"p","stop":5})", "'stop'"}, Bad{kText, R"({"prompt":"p","stop":["a",1]})", "stop[1]"},
        Bad{kText, R"({"prompt":"p","stop":["a","b","c","d","e"]})", "at most 4"},
        Bad{kText, R"({"prompt":"p","stop":""})", "empty"},
        Bad{kText, R"({"prompt":"p","n":0})", "'n' must be an integer from 1"},
        Bad{kText, R"({"prompt":"p","model":3})", "'model'"}, Bad{kChat, R"({"prompt":"p"})", "'messages' is required"},
        Bad{kChat, R"({"messages":{}})", "'messages' must be a list"}, Bad{kChat, R"({"messages":[]})", "at least one"},
        Bad{kChat, R"({"messages":["hi"]})", "messages[0] must be an object"},
        Bad{kChat, R"({"messages":[{"content":"hi"}]})", "messages[0].role"},
        Bad{kChat, R"({"messages":[{"role":"wizard","content":"hi"}]})", "'wizard'"},
        Bad{kChat, R"({"messages":[{"role":"user","content":7}]})", "messages[0].content"},
        Bad{kChat, R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})",
            "only parts of type \"text\""}));

// Each way of asking for constrained output gives a compiled grammar; text asks for none.
TEST(ServeRequest, OutputFormatsCompileToAGrammar) {
  EXPECT_EQ(chat(R"({"messages":[{"role":"user","content":"x"}]})").grammar, nullptr);
  EXPECT_EQ(chat(R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"text"}})").grammar, nullptr);
  for (const char* format : {R"({"type":"json_object"})", R"({"type":"json_object","schema":{"type":"integer"}})",
                             R"({"type":"json_schema","json_schema":{"name":"n","strict":true,"schema":{"type":"object",
                                 "properties":{"b":{"type":"string"},"a":{"type":"integer"}},"required":["b","a"]}}})"}) {
    const Request r =
        chat(std::string(R"({"messages":[{"role":"user","content":"x"}],"response_format":)") + format + "}");
    EXPECT_NE(r.grammar, nullptr) << format;
  }
  EXPECT_NE(completion(R"({"prompt":"p","grammar":"root ::= [0-9]+"})").grammar, nullptr);
  EXPECT_NE(completion(R"({"prompt":"p","json_schema":{"enum":[1,2]}})").grammar, nullptr);
}

TEST(ServeRequest, MessageCountIsBounded) {
  std::string body = R"({"messages":[)";
  for (int i = 0; i < 5; ++i) body += std::string(i ? "," : "") + R"({"role":"user","content":"x"})";
  body += "]}";
  EXPECT_EQ(parse_request(kChat, body, {.max_messages = 5}).messages.size(), 5u);
  try {
    parse_request(kChat, body, {.max_messages = 4});
    FAIL() << "five messages accepted with a limit of four";
  } catch (const RequestError& e) {
    EXPECT_NE(e.message().find("at most 4"), std::string::npos) << e.message();
  }
}

// Issue 24 #3: an 8 MiB body of brackets parsed to ~330 MB. The parse is refused at the depth or
// value limit, before building more than the limit allows.
TEST(ServeRequest, JsonDepthAndValueCountAreBounded) {
  const auto refusal = [](const std::string& body) {
    try {
      parse_request(Endpoint::Completions, body);
    } catch (const RequestError& e) {
      EXPECT_EQ(e.status(), 400);
      return e.message();
    }
    return std::string("accepted");
  };
  const std::string deep = R"({"prompt":"x","n":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_NE(refusal(deep).find("deeper than 64 levels"), std::string::npos) << refusal(deep);
  std::string wide = R"({"prompt":"x","n":[)";
  for (int i = 0; i < 2'000'000; ++i) wide += i ? ",[]" : "[]";
  wide += "]}";
  EXPECT_NE(refusal(wide).find("more than 65536 JSON values"), std::string::npos) << refusal(wide);
  // Within the limits the same shapes parse as before (and are refused for their meaning only).
  const std::string ok = R"({"prompt":"x","n":)" + std::string(60, '[') + std::string(60, ']') + "}";
  EXPECT_NE(refusal(ok).find("'n' must be an integer"), std::string::npos) << refusal(ok);
}

TEST(ServeResponse, ShapesAreOpenAIs) {
  using nlohmann::json;
  const ResponseHead chat_head{Endpoint::ChatCompletions, "chatcmpl-1", 1700000000, "stories260K"};
  const json c = json::parse(completion_json(chat_head, "Hello", FinishReason::Stop, {5, 2}));
  EXPECT_EQ(c["id"], "chatcmpl-1");
  EXPECT_EQ(c["object"], "chat.completion");
  EXPECT_EQ(c["created"], 1700000000);
  EXPECT_EQ(c["model"], "stories260K");
  EXPECT_EQ(c["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(c["choices"][0]["message"]["content"], "Hello");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(c["usage"], (json{{"prompt_tokens", 5},
                              {"completion_tokens", 2},
                              {"total_tokens", 7},
                              {"prompt_tokens_details", {{"cached_tokens", 0}}}}));

  const ResponseHead text_head{Endpoint::Completions, "cmpl-1", 1, "m"};
  const json t = json::parse(completion_json(text_head, "x", FinishReason::Length, {1, 1}));
  EXPECT_EQ(t["object"], "text_completion");
  EXPECT_EQ(t["choices"][0]["text"], "x");
  EXPECT_EQ(t["choices"][0]["finish_reason"], "length");

  const json first = json::parse(chunk_json(chat_head, "", true, std::nullopt));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  const json last = json::parse(chunk_json(chat_head, "", false, FinishReason::Length));
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  const json usage = json::parse(usage_chunk_json(chat_head, {3, 4, 2}));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 7);
  EXPECT_EQ(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 2) << "of the 3 prompt tokens, 2 reused";

  const json err = json::parse(error_json("bad field", "invalid_request_error"));
  EXPECT_EQ(err["error"]["message"], "bad field");
  EXPECT_EQ(err["error"]["type"], "invalid_request_error");
  const json models = json::parse(models_json("m", 5));
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "m");
}

TEST(ServeResponse, InvalidUtf8InGeneratedTextIsReplacedNotThrown) {
  const ResponseHead head{Endpoint::Completions, "cmpl-1", 1, "m"};
  const std::string cut = "caf\xC3";  // a model may stop inside a character
  const nlohmann::json j = nlohmann::json::parse(completion_json(head, cut, FinishReason::Length, {}));
  EXPECT_EQ(j["choices"][0]["text"], "caf\xEF\xBF\xBD");
}

TEST(ServeResponse, LogprobsInBothShapes) {
  using nlohmann::json;
  const ResponseHead chat{Endpoint::ChatCompletions, "chatcmpl-1", 1, "m"},
      text{Endpoint::Completions, "cmpl-1", 1, "m"};
  const std::vector<TokenLogprobs> tokens = {
      {.sampled = {5, " a", -0.5f}, .top = {{5, " a", -0.5f}, {7, "b", -1.5f}}, .text_offset = 0},
      {.sampled = {9, "c", -0.25f}, .top = {}, .text_offset = 2}};
  const Choice choice{.index = 1, .text = " ac", .finish = FinishReason::Length, .logprobs = tokens};
  const json c = json::parse(completion_json(chat, std::span(&choice, 1), {3, 2}))["choices"][0];
  EXPECT_EQ(c["index"], 1);
  const json& first = c["logprobs"]["content"][0];
  EXPECT_EQ(first["token"], " a");
  EXPECT_EQ(first["logprob"], -0.5);
  EXPECT_EQ(first["bytes"], json::array({32, 97}));
  EXPECT_EQ(first["top_logprobs"][1]["token"], "b");
  EXPECT_EQ(c["logprobs"]["content"][1]["top_logprobs"], json::array());
  const json t = json::parse(completion_json(text, std::span(&choice, 1), {3, 2}))["choices"][0]["logprobs"];
  EXPECT_EQ(t["tokens"], json::array({" a", "c"}));
  EXPECT_EQ(t["token_logprobs"], json::array({-0.5, -0.25}));
  EXPECT_EQ(t["top_logprobs"][0]["b"], -1.5);
  EXPECT_EQ(t["text_offset"], json::array({0, 2}));
  EXPECT_TRUE(json::parse(completion_json(text, "x", FinishReason::Stop, {}))["choices"][0]["logprobs"].is_null());
  const json chunk = json::parse(chunk_json(chat, "c", false, std::nullopt, {}, 2, tokens));
  EXPECT_EQ(chunk["choices"][0]["index"], 2);
  EXPECT_EQ(chunk["choices"][0]["logprobs"]["content"].size(), 2u);
}

TEST(ParseRequest, ToolsKeepTheClientsKeyOrderAndMessagesCarryCalls) {
  const Request r = parse_request(kChat, R"({"messages":[{"role":"user","content":"weather?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"abcdefghi","type":"function",
        "function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
      {"role":"tool","tool_call_id":"abcdefghi","name":"get_weather","content":"sunny"}],
    "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"},"description":"d"}}],
    "tool_choice":"auto","parallel_tool_calls":false})");
  EXPECT_EQ(
      r.tools,
      R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"},"description":"d"}}])");
  EXPECT_EQ(r.tool_choice, ToolChoice::Auto);
  EXPECT_FALSE(r.parallel_tool_calls);
  ASSERT_EQ(r.messages.size(), 3u);
  ASSERT_EQ(r.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[1].tool_calls[0], (ToolCall{"abcdefghi", "get_weather", R"({"city": "Paris"})"}));
  EXPECT_EQ(r.messages[1].content, "");
  EXPECT_EQ(r.messages[2].tool_call_id, "abcdefghi");
  EXPECT_EQ(r.messages[2].name, "get_weather");
  const Request named = parse_request(kChat, R"({"messages":[{"role":"user","content":"x"}],
      "tools":[{"type":"function","function":{"name":"g"}}],"tool_choice":{"type":"function","function":{"name":"g"}}})");
  EXPECT_EQ(named.tool_choice, ToolChoice::Named);
  EXPECT_EQ(named.tool_choice_name, "g");
  EXPECT_EQ(parse_request(kChat, R"({"messages":[{"role":"user","content":"x"}],
      "tools":[{"type":"function","function":{"name":"g"}}],"tool_choice":"required"})")
                .tool_choice,
            ToolChoice::Required);
  EXPECT_EQ(parse_request(kChat, R"({"messages":[{"role":"user","content":"x"}],"tools":[],"tool_choice":"none"})")
                .tool_choice,
            ToolChoice::None);
  EXPECT_TRUE(parse_request(kChat, R"({"messages":[{"role":"user","content":"x"}],"tools":[]})").tools.empty());
}

}  // namespace
}  // namespace skainet::serve
