#include <stdexcept>
#include <variant>

#include "chat/eval.hpp"
#include "chat/lexer.hpp"
#include "chat/parser.hpp"
#include "skainet/text/chat.hpp"

namespace skainet::chat {

TemplateError::TemplateError(std::string message, int line, int column)
    : Error(line > 0
                ? "chat template line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + message
                : "chat template: " + message),
      line_(line),
      column_(column) {}

Template::Template(std::string_view source, Options options)
    : program_(std::make_unique<detail::Program>()), options_(std::move(options)) {
  std::vector<Token> tokens = lex(source);
  parse(tokens, *program_);
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const nlohmann::ordered_json& context) const {
  Evaluator ev(*program_, options_);
  try {
    return ev.render(context);
  } catch (const ValueError& e) {  // raised outside any expression: no position to give
    throw TemplateError(e.message, 0, 0);
  } catch (const std::logic_error& e) {  // a safety net: a standard-library refusal is still a TemplateError
    throw TemplateError(std::string("internal error: ") + e.what(), 0, 0);
  } catch (const std::bad_variant_access& e) {
    throw TemplateError(std::string("internal error: ") + e.what(), 0, 0);
  } catch (const std::runtime_error& e) {
    throw TemplateError(std::string("internal error: ") + e.what(), 0, 0);
  }
}

std::string render(std::string_view source, const nlohmann::ordered_json& context, const Options& options) {
  return Template(source, options).render(context);
}

}  // namespace skainet::chat
