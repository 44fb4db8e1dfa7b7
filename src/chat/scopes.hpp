// Static passes over a parsed template that reproduce what Jinja2 decides when it compiles one:
// which filter and test names must exist, and which names start Undefined in which scope.
#pragma once

#include "chat/ast.hpp"

namespace skainet::chat {

// Throws TemplateError for an unknown filter or test outside a "soft" frame (an if, an inline if).
void check_names(const Program& program);

// Fills Program::local_names and Stmt::local_names.
void analyze_scopes(Program& program);

}  // namespace skainet::chat
