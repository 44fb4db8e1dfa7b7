// What request.cpp asks of the field table (fields.cpp) with a parsed body in hand.
#pragma once

#include <nlohmann/json.hpp>

#include "skainet/app/serve.hpp"

namespace skainet::serve {

// Whether `value` of a refused field asks for nothing (null, or one of the field's `off` values).
bool asks_for_nothing(const RequestField& field, const nlohmann::json& value);
// Throws RequestError (400) naming the first field of `body` that is refused and asks for something.
void refuse_unimplemented(const nlohmann::json& body);

}  // namespace skainet::serve
