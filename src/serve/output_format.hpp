// The request fields that constrain what is generated to a grammar: OpenAI's `response_format`
// (json_object, json_schema) and llama-server's `grammar` (GBNF) and `json_schema`. At most one of
// them; each is compiled here, so a grammar or schema that cannot be used is a 400 naming why.
#pragma once

#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "skainet/text/grammar.hpp"

namespace skainet::serve {

// nullptr: the output is free text. `body` is the request's text, read again where a schema is given
// so that its properties keep the order the client wrote them in (the generated JSON follows it).
std::shared_ptr<const grammar::Grammar> output_grammar(const nlohmann::json& request, std::string_view body);

}  // namespace skainet::serve
