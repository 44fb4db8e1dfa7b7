// The operations endpoints' parsing and shapes (ops.cpp): /tokenize, /detokenize, /props as
// llama-server names them; every refusal a 400 naming what is wrong.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "skainet/app/serve.hpp"

namespace skainet::serve {
namespace {

using json = nlohmann::json;

template <class F>
std::string refusal_of(F&& parse) {
  try {
    parse();
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.type(), "invalid_request_error");
    return e.message();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

TEST(ServeOps, TokenizeDefaultsAreLlamaServers) {
  const TokenizeRequest r = parse_tokenize(R"({"content":"Hi <s>"})");
  EXPECT_EQ(r.content, "Hi <s>");
  EXPECT_FALSE(r.add_special);
  EXPECT_TRUE(r.parse_special);
  const TokenizeRequest s =
      parse_tokenize(R"({"content":"","add_special":true,"parse_special":false,"with_pieces":false})");
  EXPECT_TRUE(s.add_special);
  EXPECT_FALSE(s.parse_special);
}

TEST(ServeOps, TokenizeRefusals) {
  EXPECT_NE(refusal_of([] { parse_tokenize("{}"); }).find("'content' is required"), std::string::npos);
  EXPECT_NE(refusal_of([] { parse_tokenize(R"({"content":5})"); }).find("'content' must be a string"),
            std::string::npos);
  EXPECT_NE(refusal_of([] { parse_tokenize(R"({"content":"x","add_special":"yes"})"); }).find("'add_special'"),
            std::string::npos);
  EXPECT_NE(refusal_of([] {
              parse_tokenize(R"({"content":"x","with_pieces":true})");
            }).find("'with_pieces' is not implemented"),
            std::string::npos);
  EXPECT_NE(refusal_of([] { parse_tokenize("[1]"); }).find("must be a JSON object"), std::string::npos);
}

TEST(ServeOps, DetokenizeChecksEveryIdAgainstTheVocabulary) {
  EXPECT_EQ(parse_detokenize(R"({"tokens":[0,5,511]})", {.vocab_size = 512}), (std::vector<int32_t>{0, 5, 511}));
  EXPECT_TRUE(parse_detokenize(R"({"tokens":[]})", {.vocab_size = 512}).empty());
  EXPECT_NE(refusal_of([] {
              parse_detokenize(R"({"tokens":[1,512]})", {.vocab_size = 512});
            }).find("tokens[1] is token id 512, but the vocabulary holds 512 tokens"),
            std::string::npos);
  EXPECT_NE(refusal_of([] { parse_detokenize(R"({"tokens":[-1]})", {.vocab_size = 512}); }).find("tokens[0]"),
            std::string::npos);
  EXPECT_NE(refusal_of([] { parse_detokenize(R"({"tokens":["a"]})"); }).find("tokens[0] must be a token id"),
            std::string::npos);
  EXPECT_NE(refusal_of([] { parse_detokenize(R"({"tokens":"a"})"); }).find("'tokens' must be a list"),
            std::string::npos);
  EXPECT_NE(refusal_of([] { parse_detokenize("{}"); }).find("'tokens' is required"), std::string::npos);
}

TEST(ServeOps, CompletionPromptIdsAreCheckedAgainstTheVocabulary) {
  EXPECT_EQ(parse_request(Endpoint::Completions, R"({"prompt":[1,511]})", {.vocab_size = 512}).prompt_ids,
            (std::vector<int32_t>{1, 511}));
  EXPECT_NE(refusal_of([] {
              parse_request(Endpoint::Completions, R"({"prompt":[1,600]})", {.vocab_size = 512});
            }).find("prompt[1] is token id 600, but the vocabulary holds 512 tokens"),
            std::string::npos);
}

TEST(ServeOps, Shapes) {
  EXPECT_EQ(json::parse(tokens_json(std::vector<int32_t>{1, 2})), json::parse(R"({"tokens":[1,2]})"));
  EXPECT_EQ(json::parse(content_json("Once")), json::parse(R"({"content":"Once"})"));
  const json p = json::parse(props_json({.model_path = "m.gguf",
                                         .chat_template = "{{ x }}",
                                         .bos_token = "<s>",
                                         .eos_token = "</s>",
                                         .n_ctx = 256,
                                         .total_slots = 2,
                                         .n_predict = 16,
                                         .sampling = {.temperature = 0.5f, .top_k = 7, .repeat_penalty = 1.5f},
                                         .ignore_eos = true,
                                         .stop = {"\n"}}));
  EXPECT_EQ(p["default_generation_settings"]["n_ctx"], 256);
  const json& params = p["default_generation_settings"]["params"];
  EXPECT_EQ(params["n_predict"], 16);
  EXPECT_EQ(params["temperature"], 0.5);
  EXPECT_EQ(params["top_k"], 7);
  EXPECT_EQ(params["repeat_penalty"], 1.5);
  EXPECT_EQ(params["ignore_eos"], true);
  EXPECT_EQ(params["stop"], json::array({"\n"}));
  EXPECT_EQ(p["total_slots"], 2);
  EXPECT_EQ(p["model_path"], "m.gguf");
  EXPECT_EQ(p["chat_template"], "{{ x }}");
  EXPECT_EQ(p["bos_token"], "<s>");
  EXPECT_EQ(p["eos_token"], "</s>");
}

TEST(ServeOps, ErrorCarriesItsCode) {
  const json e = json::parse(error_json("no key", "invalid_request_error", "invalid_api_key"));
  EXPECT_EQ(e["error"]["code"], "invalid_api_key");
  EXPECT_TRUE(json::parse(error_json("x", "t"))["error"]["code"].is_null());
}

}  // namespace
}  // namespace skainet::serve
