// Recursive-descent parser for the Jinja2 subset chat templates use; mirrors Jinja2's grammar and
// operator precedence. Unsupported tags fail here, naming the tag and its line and column.
#pragma once

#include <string_view>

#include "chat/ast.hpp"
#include "chat/lexer.hpp"

namespace skainet::chat {

void parse(const std::vector<Token>& tokens, Program& out);

}  // namespace skainet::chat
