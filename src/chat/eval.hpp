// Walks the parsed template: scopes as Jinja2 makes them (a for body and a macro call are new
// scopes, an if is not), loop controls, macros, and the render's budget (budget.hpp).
#pragma once

#include <string>
#include <unordered_map>

#include "chat/ast.hpp"
#include "chat/budget.hpp"
#include "skainet/text/chat.hpp"

namespace skainet::chat {

struct Frame {
  std::unordered_map<std::string, Value> vars;
  Frame* parent = nullptr;
};

class Evaluator {
 public:
  Evaluator(const Program& program, const Options& options)
      : budget_(options.limits), program_(program), options_(options) {}
  std::string render(const nlohmann::ordered_json& context);

 private:
  enum class Flow { Normal, Break, Continue };
  struct DepthGuard {
    DepthGuard(Evaluator& e, int line, int column);
    ~DepthGuard() { --e.depth_; }
    Evaluator& e;
  };

  Flow exec(const Body& body, StringBuilder& out);
  Flow exec(const Stmt& s, StringBuilder& out);
  Flow exec_inner(const Stmt& s, StringBuilder& out);
  Flow exec_for(const Stmt& s, StringBuilder& out);
  void exec_set(const Stmt& s, Value value);
  Value eval(const Expr& e);
  Value eval_inner(const Expr& e);
  Value eval_list(const Expr& e);
  Value eval_dict(const Expr& e);
  Value eval_slice(const Expr& e);
  Value eval_test(const Expr& e);
  Value eval_unary(const Expr& e);
  Value eval_compare(const Expr& e);
  Value eval_binary(const Expr& e);
  Value eval_call(const Expr& e);
  Value call_macro(const Stmt& macro, Args& args);
  Args eval_args(const Expr& e, size_t first);
  Value lookup(const std::string& name) const;
  void step(int line, int column);
  void append(StringBuilder& out, std::string_view text, int line, int column) const;

  // First, so it is destroyed last: every value the render built gives its bytes back to it.
  Budget budget_;
  const Program& program_;
  const Options& options_;
  Frame globals_;
  Frame* root_ = nullptr;   // the template's top-level scope; macros resolve free names from it
  Frame* frame_ = nullptr;  // innermost scope
  int depth_ = 0;
};

}  // namespace skainet::chat
