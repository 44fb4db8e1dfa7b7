#include "chat/scopes.hpp"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat/builtins.hpp"
#include "skainet/text/chat.hpp"

namespace skainet::chat {
namespace {

// Jinja2 resolves filters and tests when it compiles a template, except in a "soft" frame (inside
// an if, or an inline if) where an unknown name only fails if evaluated. A for, macro, block set or
// filter block body is a fresh, hard frame again.
void check_names(const Expr* e, bool soft) {
  if (!e) return;
  if (e->kind == EK::Cond) soft = true;
  if (!soft && e->kind == EK::Filter && !known_filter(e->name))
    throw TemplateError(jinja2_builtin_filter(e->name) ? "the Jinja2 filter '" + e->name + "' is not supported"
                                                       : "no filter named '" + e->name + "'",
                        e->line, e->column);
  if (!soft && e->kind == EK::Test && !known_test(e->name))
    throw TemplateError("no test named '" + e->name + "'", e->line, e->column);
  for (const auto& a : e->args) check_names(a.get(), soft);
  for (const auto& [k, v] : e->kwargs) check_names(v.get(), soft);
}

void check_names(const Body& body, bool soft) {
  for (const auto& s : body) {
    switch (s->kind) {
      case SK::If:
        check_names(s->expr.get(), true);
        check_names(s->body, true);
        check_names(s->else_body, true);
        break;
      case SK::For:
        check_names(s->expr.get(), soft);
        check_names(s->cond.get(), false);
        check_names(s->body, false);
        check_names(s->else_body, false);
        break;
      case SK::Macro:
        for (const auto& [n, def] : s->params) check_names(def.get(), false);
        check_names(s->body, false);
        break;
      case SK::SetBlock:
      case SK::FilterBlock:
        check_names(s->expr.get(), soft);
        check_names(s->body, false);
        break;
      case SK::Body: check_names(s->body, soft); break;
      default: check_names(s->expr.get(), soft);
    }
  }
}

// Jinja2's symbol tracking, as far as it shows in output: in a scope (for body, macro body, block
// set/filter body), a name the body's own statements assign before they read it starts Undefined
// unless an enclosing scope mentions it; reads in nested scopes see that Undefined too. `if` makes
// no scope; a nested scope contributes only its header (the for's iterable, the assigned name).
struct Refs {
  std::unordered_map<std::string, bool> first_is_store;  // name -> its first mention assigns it
  void load(const std::string& n) { first_is_store.emplace(n, false); }
  void store(const std::string& n) { first_is_store.emplace(n, true); }
};

void collect(const Expr* e, Refs& r) {
  if (!e) return;
  if (e->kind == EK::Name) r.load(e->name);
  for (const auto& a : e->args) collect(a.get(), r);
  for (const auto& [k, v] : e->kwargs) collect(v.get(), r);
}

void collect(const Body& body, Refs& r) {
  for (const auto& s : body) {
    switch (s->kind) {
      case SK::If: {
        // A name assigned inside an if is read from the context until assigned (Jinja2's
        // branch_update), so a branch counts its assignments as mere mentions.
        collect(s->expr.get(), r);
        Refs branch;
        collect(s->body, branch);
        collect(s->else_body, branch);
        for (const auto& [name, store_first] : branch.first_is_store) r.load(name);
        break;
      }
      case SK::For: collect(s->expr.get(), r); break;
      case SK::Set:
        collect(s->expr.get(), r);
        if (!s->attr.empty())
          r.load(s->targets[0]);
        else
          for (const auto& t : s->targets) r.store(t);
        break;
      case SK::SetBlock: r.store(s->targets[0]); break;
      case SK::FilterBlock: collect(s->expr.get(), r); break;
      case SK::Macro: r.store(s->text); break;
      case SK::Body: collect(s->body, r); break;
      default: collect(s->expr.get(), r);
    }
  }
}

using ScopeStack = std::vector<const Refs*>;

void analyze(const Body& body, ScopeStack& stack);

void analyze_scope(std::vector<std::string>& local_names, const Body& body, ScopeStack& stack,
                   const std::vector<std::string>& declared) {
  Refs r;
  for (const auto& d : declared) r.load(d);  // parameters and loop targets are bound on entry
  collect(body, r);
  for (const auto& [name, store_first] : r.first_is_store) {
    if (!store_first) continue;
    bool outer = false;
    for (const Refs* o : stack) outer = outer || o->first_is_store.count(name) != 0;
    if (!outer) local_names.push_back(name);
  }
  std::sort(local_names.begin(), local_names.end());
  stack.push_back(&r);
  analyze(body, stack);
  stack.pop_back();
}

void analyze(const Body& body, ScopeStack& stack) {
  for (const auto& sp : body) {
    Stmt& s = *sp;
    switch (s.kind) {
      case SK::If:
      case SK::Body:
        analyze(s.body, stack);
        analyze(s.else_body, stack);
        break;
      case SK::For: {
        std::vector<std::string> declared = s.targets;
        declared.push_back("loop");
        analyze_scope(s.local_names, s.body, stack, declared);
        analyze(s.else_body, stack);
        break;
      }
      case SK::Macro: {
        std::vector<std::string> declared = {"varargs", "kwargs", "caller"};
        for (const auto& [p, def] : s.params) declared.push_back(p);
        analyze_scope(s.local_names, s.body, stack, declared);
        break;
      }
      case SK::SetBlock:
      case SK::FilterBlock: analyze_scope(s.local_names, s.body, stack, {}); break;
      default: break;
    }
  }
}

}  // namespace

void check_names(const Program& program) { check_names(program.body, false); }

void analyze_scopes(Program& program) {
  ScopeStack stack;
  analyze_scope(program.local_names, program.body, stack, {});
}

}  // namespace skainet::chat
