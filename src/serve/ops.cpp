// The operations endpoints beside the completions, in llama-server's shapes so its clients and tools
// work unchanged: /tokenize and /detokenize (the model's own tokenizer, for counting and debugging
// prompts) and /props (what the server was started with). Parsing is pure, as request.cpp's is.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "json_body.hpp"

namespace skainet::serve {
namespace {

using json = nlohmann::ordered_json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Fields a llama-server client may send that change the answer and are not served here: refused, so
// the answer never silently lacks what was asked for.
void refuse_with_pieces(const nlohmann::json& body) {
  if (boolean_field(body, "with_pieces", false))
    bad_request("'with_pieces' is not implemented by this server: the token texts are not returned (accepted: false)");
}

}  // namespace

TokenizeRequest parse_tokenize(std::string_view body, const RequestLimits& limits) {
  const nlohmann::json j = parse_json_object(body, limits);
  refuse_with_pieces(j);
  const nlohmann::json* content = field_of(j, "content");
  if (!content) bad_request("'content' is required");
  if (!content->is_string()) bad_request("'content' must be a string");
  TokenizeRequest r;
  r.content = content->get<std::string>();
  r.add_special = boolean_field(j, "add_special", false);
  r.parse_special = boolean_field(j, "parse_special", true);
  return r;
}

std::vector<int32_t> parse_detokenize(std::string_view body, const RequestLimits& limits) {
  const nlohmann::json j = parse_json_object(body, limits);
  const nlohmann::json* tokens = field_of(j, "tokens");
  if (!tokens) bad_request("'tokens' is required");
  return token_ids_of(*tokens, "tokens", limits.vocab_size);
}

std::string tokens_json(std::span<const int32_t> ids) { return dump(json{{"tokens", ids}}); }

std::string content_json(std::string_view text) { return dump(json{{"content", std::string(text)}}); }

std::string props_json(const Props& p) {
  const text::SamplerConfig& s = p.sampling;
  // llama-server nests the defaults under default_generation_settings.params, n_ctx beside them.
  const json params{{"n_predict", p.n_predict},
                    {"temperature", s.temperature},
                    {"top_k", s.top_k},
                    {"top_p", s.top_p},
                    {"min_p", s.min_p},
                    {"repeat_penalty", s.repeat_penalty},
                    {"repeat_last_n", s.repeat_last_n},
                    {"presence_penalty", s.presence_penalty},
                    {"frequency_penalty", s.frequency_penalty},
                    {"ignore_eos", p.ignore_eos},
                    {"stop", p.stop}};
  return dump(json{{"default_generation_settings", json{{"n_ctx", p.n_ctx}, {"params", params}}},
                   {"total_slots", p.total_slots},
                   {"model_path", p.model_path},
                   {"chat_template", p.chat_template},
                   {"bos_token", p.bos_token},
                   {"eos_token", p.eos_token},
                   {"modalities", json{{"vision", false}, {"audio", false}}}});
}

}  // namespace skainet::serve
