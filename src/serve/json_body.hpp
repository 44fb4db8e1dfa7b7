// The parts of request parsing (request.cpp) that the operations endpoints (ops.cpp) share: the
// bounded JSON parse, field reading, token-id lists. Every failure is a RequestError (400) naming what
// is wrong.
#pragma once

#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "skainet/app/serve.hpp"

namespace skainet::serve {

[[noreturn]] void bad_request(std::string message);
// A JSON object body, its nesting depth and number of values bounded while parsing.
nlohmann::json parse_json_object(std::string_view body, const RequestLimits& limits);
// A field present and not null (OpenAI's clients send null for "not given").
const nlohmann::json* field_of(const nlohmann::json& body, std::string_view key);
bool boolean_field(const nlohmann::json& body, std::string_view key, bool absent);
// A list of token ids, each an integer from 0 to `vocab_size` - 1 (0: not known here, any
// non-negative int32); `name` names the list in errors ("prompt[2] is -1 ...").
std::vector<int32_t> token_ids_of(const nlohmann::json& list, std::string_view name, int32_t vocab_size = 0);

}  // namespace skainet::serve
