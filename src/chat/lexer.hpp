// Splits a template into text and tag tokens, applying Jinja2's whitespace rules as HuggingFace
// configures them (trim_blocks, lstrip_blocks, `-`/`+` markers, a single trailing newline dropped).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace skainet::chat {

enum class Tok : uint8_t { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok kind;
  std::string text;  // text, name, operator, or the decoded string literal
  int64_t i = 0;
  double f = 0;
  int line = 1;
  int column = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws TemplateError (with line and column) on an unterminated tag, comment or string.
std::vector<Token> lex(std::string_view source, LexOptions options = {});

}  // namespace skainet::chat
