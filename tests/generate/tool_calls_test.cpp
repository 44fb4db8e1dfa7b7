// generate::detect_tool_call_format on every real template in ../shared/models/templates that shows
// tools, and parse_tool_calls on each format: good calls, several calls, malformed JSON staying text,
// arguments as an object or as a string.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "skainet/model/generate.hpp"
#include "skainet/model/tool_calls.hpp"

namespace fs = std::filesystem;
using namespace skainet;
using generate::ParsedReply;
using generate::ToolCallFormat;

namespace {

const fs::path kTemplates = fs::path(SKAINET_SHARED_MODELS) / "templates";

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const ToolCallFormat& format(std::string_view name) {
  for (const ToolCallFormat& f : generate::tool_call_formats())
    if (f.name == name) return f;
  throw std::runtime_error("no format " + std::string(name));
}

// What each real template that reads `tools` is detected as; "" where its format is not one this
// engine parses (the server refuses tools for those with a 400 naming it).
const std::map<std::string, std::string> kExpected = {
    {"Apertus-8B-Instruct", ""},
    {"Apriel-1.6-15b-Thinker-fixed", "tool_calls_block"},
    {"Bielik-11B-v3.0-Instruct", "hermes"},
    {"ByteDance-Seed-OSS", "seed_oss"},
    {"Cohere2MoE", "command_r7b"},
    {"CohereForAI-c4ai-command-r-plus-tool_use", ""},
    {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", "command_r7b"},
    {"GLM-4.6", "glm_arg_key"},
    {"GLM-4.7-Flash", "glm_arg_key"},
    {"GigaChat3-10B-A1.8B", ""},
    {"GigaChat3.1-10B-A1.8B", ""},
    {"Kimi-K2-Instruct", ""},
    {"Kimi-K2-Thinking", ""},
    {"Kimi-K3", ""},
    {"LFM2-8B-A1B", ""},
    {"LFM2.5-8B-A1B", ""},
    {"LFM2.5-Instruct", ""},
    {"MiMo-VL", "hermes"},
    {"MiniMax-M1", "tool_calls_block"},
    {"MiniMax-M2", ""},
    {"MiniMax-M3", ""},
    {"Mistral-Small-3.2-24B-Instruct-2506", "mistral_name_args"},
    {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "qwen3_coder_xml"},
    {"NVIDIA-Nemotron-Nano-v2", ""},
    {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", "hermes"},
    {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "hermes"},
    {"Qwen-QwQ-32B", "hermes"},
    {"Qwen-Qwen2.5-7B-Instruct", "hermes"},
    {"Qwen-Qwen3-0.6B", "hermes"},
    {"Qwen3-Coder", "qwen3_coder_xml"},
    {"Qwen3.5-4B", "qwen3_coder_xml"},
    {"Reka-Edge", "hermes"},
    {"Spark2.5", "glm_arg_key"},
    {"StepFun3.5-Flash", "qwen3_coder_xml"},
    {"deepseek-ai-DeepSeek-V3.2", ""},
    {"deepseek-ai-DeepSeek-V4-Flash-0731", ""},
    {"deepseek-ai-DeepSeek-V4", ""},
    {"google-gemma-4-31B-it-interleaved", ""},
    {"google-gemma-4-31B-it", ""},
    {"ibm-granite-granite-3.3-2B-Instruct", "granite"},
    {"ibm-granite-granite-4.0", "hermes"},
    {"ibm-granite-granite-4.1", "hermes"},
    {"inclusionai-ling-3.0-flash", "glm_arg_key"},
    {"llama-cpp-deepseek-r1", ""},
    {"meetkai-functionary-medium-v3.1", "functionary_v3_1"},
    {"meetkai-functionary-medium-v3.2", ""},
    {"meta-llama-Llama-3.1-8B-Instruct", "llama3_json"},
    {"meta-llama-Llama-3.2-3B-Instruct", "llama3_json"},
    {"meta-llama-Llama-3.3-70B-Instruct", "llama3_json"},
    {"mistralai-Ministral-3-14B-Reasoning-2512", "mistral_name_args"},
    {"mistralai-Mistral-Nemo-Instruct-2407", "mistral_nemo"},
    {"moonshotai-Kimi-K2", ""},
    {"muse-glimmer", ""},
    {"openai-gpt-oss-120b", ""},
    {"openbmb-MiniCPM5-1B", ""},
    {"poolside-Laguna-S-2.1", "glm_arg_key"},
    {"poolside-Laguna-XS-2.1", "glm_arg_key"},
    {"poolside-Laguna-XS.2", "glm_arg_key"},
    {"tencent-Hy3", ""},
    {"unsloth-Apriel-1.5", "tool_calls_block"},
    {"unsloth-mistral-Devstral-Small-2507", "mistral_name_args"},
    {"upstage-Solar-Open-100B", ""},
};

TEST(ToolCallFormat, EveryRealTemplateWithToolsIsDetectedAsExpected) {
  size_t with_tools = 0;
  for (const auto& entry : fs::directory_iterator(kTemplates)) {
    if (entry.path().extension() != ".jinja") continue;
    const std::string name = entry.path().stem().string(), source = read(entry.path());
    const ToolCallFormat* f = generate::detect_tool_call_format(source);
    if (!generate::template_uses_tools(source)) {
      EXPECT_EQ(f, nullptr) << name;
      EXPECT_FALSE(kExpected.contains(name)) << name << " reads no tools";
      continue;
    }
    ++with_tools;
    const auto expected = kExpected.find(name);
    ASSERT_NE(expected, kExpected.end()) << name << " reads tools: list what it is detected as";
    EXPECT_EQ(f ? std::string(f->name) : std::string(), expected->second) << name;
  }
  EXPECT_EQ(with_tools, kExpected.size());
}

TEST(ToolCallFormat, NamesAreUnique) {
  std::map<std::string_view, int> seen;
  for (const ToolCallFormat& f : generate::tool_call_formats()) EXPECT_EQ(++seen[f.name], 1) << f.name;
}

void expect_calls(const ParsedReply& r, std::string_view content,
                  std::vector<std::pair<std::string, std::string>> calls) {
  EXPECT_EQ(r.content, content);
  ASSERT_EQ(r.calls.size(), calls.size()) << r.content;
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(r.calls[i].name, calls[i].first);
    EXPECT_EQ(r.calls[i].arguments, calls[i].second);
  }
}

TEST(ParseToolCalls, HermesOneCallWithTextBefore) {
  expect_calls(generate::parse_tool_calls(format("hermes"),
                                          "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", "
                                          "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"),
               "Let me look.", {{"get_weather", R"({"city":"Paris"})"}});
}

TEST(ParseToolCalls, HermesSeveralCallsAndAMissingLastClose) {
  expect_calls(generate::parse_tool_calls(format("hermes"),
                                          "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n"
                                          "</tool_call>\n<tool_call>\n{\"name\": \"b\", "
                                          "\"arguments\": {\"x\": [1, 2]}}\n"),
               "", {{"a", "{}"}, {"b", R"({"x":[1,2]})"}});
}

TEST(ParseToolCalls, MalformedJsonStaysContent) {
  const std::string text = "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": }\n</tool_call>";
  expect_calls(generate::parse_tool_calls(format("hermes"), text), text, {});
  // A good call beside a bad one: the good one is a call, the bad one text.
  const std::string bad = "<tool_call>{\"arguments\": {}}</tool_call>";
  expect_calls(generate::parse_tool_calls(format("hermes"), bad + "<tool_call>{\"name\": \"b\"}</tool_call>"), bad,
               {{"b", "{}"}});
  expect_calls(generate::parse_tool_calls(format("llama3_json"), "{\"name\": \"a\", \"parameters\": {"),
               "{\"name\": "
               "\"a\", "
               "\"parameters\": {",
               {});
}

TEST(ParseToolCalls, ArgumentsAsAnObjectOrAString) {
  expect_calls(generate::parse_tool_calls(format("hermes"),
                                          R"(<tool_call>{"name": "f", "arguments": "{\"a\": 1}"}</tool_call>)"),
               "", {{"f", R"({"a": 1})"}});
  // A string that holds no JSON object is not a call's arguments.
  const std::string text = R"(<tool_call>{"name": "f", "arguments": "a=1"}</tool_call>)";
  expect_calls(generate::parse_tool_calls(format("hermes"), text), text, {});
}

TEST(ParseToolCalls, Llama3JsonWithAndWithoutPythonTag) {
  expect_calls(
      generate::parse_tool_calls(format("llama3_json"), R"({"name": "get_weather", "parameters": {"city": "Paris"}})"),
      "", {{"get_weather", R"({"city":"Paris"})"}});
  expect_calls(generate::parse_tool_calls(format("llama3_json"),
                                          "<|python_tag|>{\"type\": \"function\", \"name\": \"f\", \"parameters\": "
                                          "{}}; {\"name\": \"g\", \"parameters\": {\"n\": 2}}"),
               "", {{"f", "{}"}, {"g", R"({"n":2})"}});
  expect_calls(generate::parse_tool_calls(format("llama3_json"), "Sure.\n{\"name\": \"f\", \"parameters\": {}}"),
               "Sure.", {{"f", "{}"}});
  // Braces in prose are content.
  expect_calls(generate::parse_tool_calls(format("llama3_json"), "a set {1, 2}"), "a set {1, 2}", {});
}

TEST(ParseToolCalls, MistralNemoList) {
  expect_calls(generate::parse_tool_calls(format("mistral_nemo"),
                                          R"([TOOL_CALLS][{"name": "a", "arguments": {"q": "x"}, "id": "abcdefghi"}, )"
                                          R"({"name": "b", "arguments": {}}])"),
               "", {{"a", R"({"q":"x"})"}, {"b", "{}"}});
}

TEST(ParseToolCalls, MistralNameThenArgs) {
  expect_calls(generate::parse_tool_calls(format("mistral_name_args"),
                                          R"([TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]f[CALL_ID])"
                                          R"(abcdefghi[ARGS]{})"),
               "", {{"get_weather", R"({"city":"Paris"})"}, {"f", "{}"}});
}

TEST(ParseToolCalls, Qwen3CoderXmlParameters) {
  expect_calls(generate::parse_tool_calls(format("qwen3_coder_xml"),
                                          "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                                          "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"),
               "", {{"get_weather", R"({"city":"Paris","days":3})"}});
}

TEST(ParseToolCalls, GlmArgKeys) {
  expect_calls(generate::parse_tool_calls(format("glm_arg_key"),
                                          "ok<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</"
                                          "arg_value>\n</tool_call>"),
               "ok", {{"get_weather", R"({"city":"Paris"})"}});
}

TEST(ParseToolCalls, FunctionaryAndListFormats) {
  expect_calls(generate::parse_tool_calls(format("functionary_v3_1"), R"(<function=f>{"a": 1}</function>)"), "",
               {{"f", R"({"a":1})"}});
  expect_calls(generate::parse_tool_calls(format("granite"), R"(<|tool_call|>[{"name": "f", "arguments": {}}])"), "",
               {{"f", "{}"}});
  expect_calls(
      generate::parse_tool_calls(format("command_r7b"), R"(<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", )"
                                                        R"("parameters": {"a": 1}}]<|END_ACTION|>)"),
      "", {{"f", R"({"a":1})"}});
  expect_calls(generate::parse_tool_calls(format("tool_calls_block"),
                                          "<tool_calls>\n{\"name\": \"f\", \"arguments\": {}}\n{\"name\": \"g\", "
                                          "\"arguments\": {}}\n</tool_calls>"),
               "", {{"f", "{}"}, {"g", "{}"}});
}

TEST(ParseToolCalls, DeepNestingIsNotParsed) {
  std::string deep =
      "<tool_call>{\"name\": \"f\", \"arguments\": " + std::string(100, '[') + std::string(100, ']') + "}</tool_call>";
  expect_calls(generate::parse_tool_calls(format("hermes"), deep), deep, {});
}

TEST(StreamablePrefix, HoldsBackFromWhereACallMayBegin) {
  const ToolCallFormat& hermes = format("hermes");
  EXPECT_EQ(generate::streamable_prefix(hermes, "Hello"), 5u);
  EXPECT_EQ(generate::streamable_prefix(hermes, "Hello <tool"), 6u);
  EXPECT_EQ(generate::streamable_prefix(hermes, "Hello <tool_call>{"), 6u);
  EXPECT_EQ(generate::streamable_prefix(hermes, "a < b"), 5u);
  EXPECT_EQ(generate::streamable_prefix(format("llama3_json"), "x {"), 2u);
}

TEST(TemplateToolCall, ArgumentsBecomeTheObjectTheyHold) {
  const auto j = generate::template_tool_call("abcdefghi", "f", R"({"a": 1})");
  EXPECT_EQ(j.dump(), R"({"id":"abcdefghi","type":"function","function":{"name":"f","arguments":{"a":1}}})");
  EXPECT_EQ(generate::template_tool_call("x", "f", "not json")["function"]["arguments"], "not json");
  const std::string id = generate::new_tool_call_id();
  EXPECT_EQ(id.size(), 9u);
  EXPECT_TRUE(std::all_of(id.begin(), id.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); }));
}

}  // namespace

namespace {

// A reply as each format writes two calls, with text before.
std::string sample_reply(const ToolCallFormat& f) {
  const std::string args = R"({"city": "Paris", "days": [1, 2]})";
  switch (f.syntax) {
    case generate::CallSyntax::JsonInTags:
      return "ok " + std::string(f.open) + R"({"name": "a", "arguments": )" + args + "}" + std::string(f.close) +
             std::string(f.open) + R"({"name": "b", "arguments": {}})" + std::string(f.close);
    case generate::CallSyntax::JsonList:
      return "ok " + std::string(f.open) + "[{\"" + std::string(f.name_key) + "\": \"a\", \"" +
             std::string(f.arguments_keys[0]) + "\": " + args + "}]" + std::string(f.close);
    case generate::CallSyntax::JsonTail:
      return "ok\n" + std::string(f.open) + R"({"name": "a", "parameters": )" + args + "}";
    case generate::CallSyntax::NameThenJson: return "ok " + std::string(f.open) + "a" + std::string(f.separator) + args;
    case generate::CallSyntax::FunctionTags:
      return "ok " + std::string(f.open) + (f.open == "<function=" ? "" : "<function=") + "a>\n" +
             "<parameter=city>\nParis\n</parameter>\n</function>" + std::string(f.close);
    case generate::CallSyntax::ArgKeyValue:
      return "ok " + std::string(f.open) + "a<arg_key>city</arg_key><arg_value>Paris</arg_value>" +
             std::string(f.close);
  }
  return {};
}

}  // namespace

// Every format on its own sample: the calls parse with the text before as content, and every prefix
// of the reply (a stream cut anywhere, a reply cut by max_tokens) parses without throwing, never
// yields content beyond the text, and what may be streamed of it never shrinks as it grows.
TEST(ParseToolCalls, EveryFormatsSampleAndEveryPrefixOfIt) {
  for (const ToolCallFormat& f : generate::tool_call_formats()) {
    const std::string reply = sample_reply(f);
    const ParsedReply whole = generate::parse_tool_calls(f, reply);
    EXPECT_EQ(whole.content, "ok") << f.name;
    ASSERT_FALSE(whole.calls.empty()) << f.name << ": " << reply;
    EXPECT_EQ(whole.calls[0].name, "a") << f.name;
    size_t streamable = 0;
    for (size_t n = 0; n <= reply.size(); ++n) {
      const std::string_view prefix = std::string_view(reply).substr(0, n);
      const ParsedReply r = generate::parse_tool_calls(f, prefix);
      EXPECT_LE(r.content.size(), n) << f.name;
      const size_t now = generate::streamable_prefix(f, prefix);
      EXPECT_LE(now, n) << f.name;
      EXPECT_GE(now, streamable) << f.name << " at " << n;
      streamable = now;
    }
    EXPECT_LE(streamable, 3u) << f.name << ": the call itself is never streamed as text";
  }
}

// A format's marker that is a control token in the vocabulary (Llama 3.1's "<|python_tag|>",
// Mistral's "[TOOL_CALLS]") is shown in generated text only when asked, and the markers ask for it
// (llama.cpp's preserved tokens). The vocabulary here is Llama 3.0's, where Llama 3.1's python tag
// (id 128010) is still a reserved control token: a row like llama3_json's opens with its text.
TEST(ToolCallMarkerTokens, ControlTokenMarkersAreShownInTheGeneratedText) {
  const text::Tokenizer tok =
      text::Tokenizer::from_file(fs::path(SKAINET_SHARED_MODELS) / "vocab" / "ggml-vocab-llama-bpe.gguf");
  const std::string marker = tok.token_to_piece(128010, /*render_special=*/true);
  ASSERT_TRUE(tok.token_to_piece(128010).empty()) << marker << " is not a control token";
  ToolCallFormat f = format("llama3_json");
  f.open = f.starts[0] = marker;
  const auto python_tag = tok.find_special_text(marker);
  ASSERT_TRUE(python_tag);
  const std::vector<int32_t> markers = generate::tool_call_marker_tokens(f, tok);
  EXPECT_EQ(markers, (std::vector<int32_t>{128010}));
  EXPECT_TRUE(generate::tool_call_marker_tokens(format("hermes"), tok).empty());  // no such token here

  std::vector<int32_t> reply = {python_tag->id};
  for (int32_t id : tok.encode(R"({"name": "f", "parameters": {}})", false)) reply.push_back(id);
  for (const bool shown : {false, true}) {
    std::string text;
    const generate::TokenCallback collect = [&](std::string_view piece, int32_t) {
      text.append(piece);
      return true;
    };
    generate::TextStream stream(tok, {}, {}, collect,
                                shown ? std::span<const int32_t>(markers) : std::span<const int32_t>());
    for (int32_t id : reply) stream.push(id);
    stream.finish();
    EXPECT_EQ(text.starts_with(marker), shown) << text;
    EXPECT_EQ(generate::parse_tool_calls(f, text).calls.size(), 1u) << text;
  }
}
