// The parsed template: expression and statement nodes, each with the line and column it came from.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/value.hpp"

namespace skainet::chat {

enum class EK : uint8_t {
  Literal,
  Name,
  List,
  Tuple,
  Dict,
  Attr,    // args[0].name
  Item,    // args[0][args[1]]
  Slice,   // args[0][args[1]:args[2]:args[3]], absent parts null
  Call,    // args[0](args[1..], kwargs)
  Filter,  // args[0] | name(args[1..], kwargs); args[0] null inside {% filter %} / {% set x | f %}
  Test,    // args[0] is [not] name(args[1..], kwargs)
  Not,
  Neg,
  Pos,
  Binary,  // args[0] op args[1]: + - * / // % **
  And,
  Or,
  Compare,  // args[0] ops[0] args[1] ops[1] args[2] ...: == != < <= > >= in notin
  Concat,   // args joined with ~
  Cond,     // args[0] if args[1] else args[2] (args[2] may be null)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  EK kind;
  int line = 0, column = 0;
  std::string name;
  Value literal;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negate = false;

  Expr() = default;
  Expr(const Expr&) = delete;
  Expr& operator=(const Expr&) = delete;
  // Iterative: a left-associative chain (`1 + 1 + ...`, `x|f|f...`) is a tree as deep as it is long,
  // and a template refused for its depth (or for anything else mid-parse) must not overflow the
  // stack while it is freed.
  ~Expr() {
    std::vector<ExprPtr> stack;
    auto take = [&stack](Expr& e) {
      for (auto& a : e.args)
        if (a) stack.push_back(std::move(a));
      for (auto& kv : e.kwargs)
        if (kv.second) stack.push_back(std::move(kv.second));
    };
    take(*this);
    while (!stack.empty()) {
      ExprPtr p = std::move(stack.back());
      stack.pop_back();
      take(*p);  // p is then freed with no children
    }
  }
};

enum class SK : uint8_t { Text, Output, If, For, Set, SetBlock, Macro, FilterBlock, Break, Continue, Body };

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  SK kind;
  int line = 0, column = 0;
  std::string text;                  // Text; Macro name
  ExprPtr expr;                      // Output; If cond; For iterable; Set value; FilterBlock/SetBlock filter
  ExprPtr cond;                      // For ... if cond
  std::vector<std::string> targets;  // For/Set names (several: tuple unpacking)
  std::string attr;                  // Set ns.attr = ...
  Body body, else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro parameters, default or null
  // For/Macro/SetBlock/FilterBlock: names the body assigns before reading them and that no enclosing
  // scope mentions; Jinja2 starts them Undefined in the body's scope instead of reading the context.
  std::vector<std::string> local_names;
};

struct Program {
  Body body;
  std::vector<std::string> local_names;  // as Stmt::local_names, for the template's top level
};

}  // namespace skainet::chat

namespace skainet::chat::detail {
struct Program : chat::Program {};
}  // namespace skainet::chat::detail
