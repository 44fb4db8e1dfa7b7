#include "chat/parser.hpp"

#include <string>
#include <utility>
#include <vector>

#include "chat/scopes.hpp"
#include "skainet/text/chat.hpp"

namespace skainet::chat {
namespace {

constexpr int kMaxNesting = 200;  // bounds the parser's own recursion on hostile input

class Parser {
 public:
  explicit Parser(const std::vector<Token>& t) : t_(t) {}

  void run(Program& out) {
    std::string end;
    out.body = body({}, end);
    if (cur().kind != Tok::Eof) error("unexpected token");
  }

 private:
  struct Guard {
    explicit Guard(Parser& p) : p(p) {
      if (++p.depth_ > kMaxNesting) p.error("template nests deeper than " + std::to_string(kMaxNesting) + " levels");
    }
    ~Guard() { --p.depth_; }
    Parser& p;
  };

  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return t;
  }
  bool is_op(const char* op) const { return cur().kind == Tok::Op && cur().text == op; }
  bool is_name(const char* n) const { return cur().kind == Tok::Name && cur().text == n; }
  bool accept_op(const char* op) {
    if (is_op(op)) {
      next();
      return true;
    }
    return false;
  }
  bool accept_name(const char* n) {
    if (is_name(n)) {
      next();
      return true;
    }
    return false;
  }

  [[noreturn]] void error(const std::string& msg, const Token* at = nullptr) const {
    const Token& t = at ? *at : cur();
    std::string found = t.kind == Tok::Eof        ? "end of template"
                        : t.kind == Tok::BlockEnd ? "end of tag '%}'"
                        : t.kind == Tok::VarEnd   ? "end of expression '}}'"
                                                  : "'" + t.text + "'";
    throw TemplateError(msg + " (found " + found + ")", t.line, t.column);
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) error(std::string("expected '") + op + "'");
  }
  std::string expect_name() {
    if (cur().kind != Tok::Name) error("expected a name");
    return next().text;
  }
  void expect_block_end() {
    if (cur().kind != Tok::BlockEnd) error("expected end of tag '%}'");
    next();
  }

  ExprPtr node(EK k, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = at.line;
    e->column = at.column;
    return e;
  }
  std::unique_ptr<Stmt> stmt(SK k, const Token& at) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->line = at.line;
    s->column = at.column;
    return s;
  }

  // Parses statements until one of `ends` opens a tag; leaves the stream after that name, `end` set.
  Body body(const std::vector<std::string>& ends, std::string& end) {
    Guard g(*this);
    Body out;
    for (;;) {
      const Token& t = cur();
      if (t.kind == Tok::Eof) {
        if (!ends.empty()) error("missing '{% " + ends.front() + " %}'");
        return out;
      }
      if (t.kind == Tok::Text) {
        auto s = stmt(SK::Text, t);
        s->text = t.text;
        out.push_back(std::move(s));
        next();
      } else if (t.kind == Tok::VarBegin) {
        next();
        auto s = stmt(SK::Output, t);
        s->expr = tuple(true);
        if (cur().kind != Tok::VarEnd) error("expected end of expression '}}'");
        next();
        out.push_back(std::move(s));
      } else if (t.kind == Tok::BlockBegin) {
        next();
        if (cur().kind != Tok::Name) error("expected a tag name");
        for (const auto& e : ends)
          if (cur().text == e) {
            end = e;
            next();
            return out;
          }
        out.push_back(statement());
      } else {
        error("unexpected token");
      }
    }
  }

  std::unique_ptr<Stmt> statement() {
    const Token& t = cur();
    const std::string kw = next().text;
    if (kw == "if") return if_statement(t);
    if (kw == "for") return for_statement(t);
    if (kw == "set") return set_statement(t);
    if (kw == "macro") return macro_statement(t);
    if (kw == "filter") {
      auto s = stmt(SK::FilterBlock, t);
      s->expr = filters(nullptr, true);
      closed_body(*s, "endfilter");
      return s;
    }
    if (kw == "break" || kw == "continue") {
      if (loop_depth_ == 0) throw TemplateError("'{% " + kw + " %}' outside a loop", t.line, t.column);
      auto s = stmt(kw == "break" ? SK::Break : SK::Continue, t);
      expect_block_end();
      return s;
    }
    if (kw == "generation") {  // HuggingFace's AssistantTracker: the body renders as it is
      auto s = stmt(SK::Body, t);
      closed_body(*s, "endgeneration");
      return s;
    }
    throw TemplateError("unsupported or unknown tag '{% " + kw + " %}'", t.line, t.column);
  }

  // `%}`, the body up to {% END %}, and that tag's `%}`.
  void closed_body(Stmt& s, const char* end_tag) {
    std::string end;
    expect_block_end();
    s.body = body({end_tag}, end);
    expect_block_end();
  }

  std::unique_ptr<Stmt> if_statement(const Token& t) {
    std::string end;
    auto s = stmt(SK::If, t);
    s->expr = tuple(false);
    expect_block_end();
    s->body = body({"elif", "else", "endif"}, end);
    Stmt* tail = s.get();
    while (end == "elif") {
      const Token& et = cur();
      auto e = stmt(SK::If, et);
      e->expr = tuple(false);
      expect_block_end();
      e->body = body({"elif", "else", "endif"}, end);
      Stmt* ep = e.get();
      tail->else_body.push_back(std::move(e));
      tail = ep;
    }
    if (end == "else") {
      expect_block_end();
      tail->else_body = body({"endif"}, end);
    }
    expect_block_end();
    return s;
  }

  std::unique_ptr<Stmt> for_statement(const Token& t) {
    std::string end;
    auto s = stmt(SK::For, t);
    s->targets = assign_targets();
    if (!accept_name("in")) error("expected 'in' in for loop");
    s->expr = tuple(false, true);
    if (accept_name("if")) s->cond = expression();
    if (is_name("recursive")) error("'for ... recursive' is not supported");
    expect_block_end();
    ++loop_depth_;
    s->body = body({"else", "endfor"}, end);
    --loop_depth_;
    if (end == "else") {  // runs after the loop, so a break here belongs to an outer loop
      expect_block_end();
      s->else_body = body({"endfor"}, end);
    }
    expect_block_end();
    return s;
  }

  // {% set a = … %}, {% set ns.x = … %}, {% set a, b = … %} or the block form {% set a %}…{% endset %}.
  std::unique_ptr<Stmt> set_statement(const Token& t) {
    const Token& target = cur();
    std::vector<std::string> names = assign_targets();
    std::string attr;
    if (names.size() == 1 && is_op(".")) {
      next();
      attr = expect_name();
    }
    if (accept_op("=")) {
      auto s = stmt(SK::Set, t);
      s->targets = std::move(names);
      s->attr = std::move(attr);
      s->expr = tuple(true);
      expect_block_end();
      return s;
    }
    if (!attr.empty() || names.size() != 1) error("a block set needs one plain name", &target);
    auto s = stmt(SK::SetBlock, t);
    s->targets = std::move(names);
    if (is_op("|")) s->expr = filters(nullptr);
    closed_body(*s, "endset");
    return s;
  }

  std::unique_ptr<Stmt> macro_statement(const Token& t) {
    std::string end;
    auto s = stmt(SK::Macro, t);
    s->text = expect_name();
    expect_op("(");
    while (!is_op(")")) {
      if (!s->params.empty()) expect_op(",");
      if (is_op(")")) break;
      std::string p = expect_name();
      ExprPtr def;
      if (accept_op("=")) def = expression();
      s->params.emplace_back(std::move(p), std::move(def));
    }
    expect_op(")");
    expect_block_end();
    int outer_loops = std::exchange(loop_depth_, 0);  // a macro body is a function: no loop around it
    s->body = body({"endmacro"}, end);
    loop_depth_ = outer_loops;
    if (cur().kind == Tok::Name) next();  // {% endmacro name %}
    expect_block_end();
    return s;
  }

  std::vector<std::string> assign_targets() {
    std::vector<std::string> names;
    bool paren = accept_op("(");
    do {
      if (cur().kind != Tok::Name) error("expected a variable name to assign to");
      names.push_back(next().text);
    } while (accept_op(",") && cur().kind == Tok::Name);
    if (paren) expect_op(")");
    return names;
  }

  bool tuple_ends(bool stop_at_recursive) const {
    if (cur().kind == Tok::VarEnd || cur().kind == Tok::BlockEnd || cur().kind == Tok::Eof) return true;
    if (is_op(")") || is_op("]") || is_op("}")) return true;
    if (stop_at_recursive && (is_name("recursive") || is_name("if"))) return true;
    return false;
  }

  // parse_tuple: a, b, c without parentheses.
  ExprPtr tuple(bool with_condexpr, bool in_for = false) {
    const Token& t = cur();
    std::vector<ExprPtr> items;
    bool comma = false;
    for (;;) {
      if (!items.empty()) {
        if (!accept_op(",")) break;
        comma = true;
        if (tuple_ends(in_for)) break;
      }
      items.push_back(with_condexpr ? expression() : or_expr());
    }
    if (!comma) return std::move(items[0]);
    auto e = node(EK::Tuple, t);
    e->args = std::move(items);
    return e;
  }

  ExprPtr expression() {
    Guard g(*this);
    ExprPtr e = or_expr();
    while (is_name("if")) {
      const Token& t = next();
      auto c = node(EK::Cond, t);
      c->args.push_back(std::move(e));
      c->args.push_back(or_expr());
      c->args.push_back(accept_name("else") ? expression() : nullptr);
      e = std::move(c);
    }
    return e;
  }

  // The items of a list or dict display up to `close`, comma-separated, a trailing comma allowed; each
  // parsed by `item` into e.args.
  template <class ParseItem>
  void display_items(Expr& e, const char* close, ParseItem item) {
    while (!is_op(close)) {
      if (!e.args.empty()) expect_op(",");
      if (is_op(close)) break;
      item();
    }
    expect_op(close);
  }

  // `a or b or c`, `a and b`: a left-associative chain of one keyword over the next tighter level.
  ExprPtr keyword_chain(EK kind, const char* keyword, ExprPtr (Parser::*operand)()) {
    ExprPtr l = (this->*operand)();
    while (is_name(keyword)) {
      auto e = node(kind, next());
      e->args.push_back(std::move(l));
      e->args.push_back((this->*operand)());
      l = std::move(e);
    }
    return l;
  }
  ExprPtr or_expr() { return keyword_chain(EK::Or, "or", &Parser::and_expr); }
  ExprPtr and_expr() { return keyword_chain(EK::And, "and", &Parser::not_expr); }
  ExprPtr not_expr() {
    if (is_name("not")) {
      Guard g(*this);
      auto e = node(EK::Not, next());
      e->args.push_back(not_expr());
      return e;
    }
    return compare();
  }
  ExprPtr compare() {
    const Token& t = cur();
    ExprPtr first = math1();
    ExprPtr cmp;
    for (;;) {
      std::string op;
      if (cur().kind == Tok::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                    cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && peek().kind == Tok::Name && peek().text == "in") {
        next();
        next();
        op = "notin";
      } else {
        break;
      }
      if (!cmp) {
        cmp = node(EK::Compare, t);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }
  ExprPtr binary_chain(ExprPtr (Parser::*sub)(), std::initializer_list<const char*> ops) {
    ExprPtr l = (this->*sub)();
    for (;;) {
      const char* hit = nullptr;
      for (const char* op : ops)
        if (is_op(op)) hit = op;
      if (!hit) return l;
      auto e = node(EK::Binary, next());
      e->name = hit;
      e->args.push_back(std::move(l));
      e->args.push_back((this->*sub)());
      l = std::move(e);
    }
  }
  ExprPtr math1() { return binary_chain(&Parser::concat, {"+", "-"}); }
  ExprPtr concat() {
    const Token& t = cur();
    ExprPtr first = math2();
    if (!is_op("~")) return first;
    auto e = node(EK::Concat, t);
    e->args.push_back(std::move(first));
    while (accept_op("~")) e->args.push_back(math2());
    return e;
  }
  ExprPtr math2() { return binary_chain(&Parser::pow, {"*", "/", "//", "%"}); }
  ExprPtr pow() { return binary_chain(&Parser::unary_filtered, {"**"}); }
  ExprPtr unary_filtered() { return unary(true); }

  ExprPtr unary(bool with_filter) {
    Guard g(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      EK kind = is_op("-") ? EK::Neg : EK::Pos;
      auto u = node(kind, next());
      u->args.push_back(unary(false));
      e = std::move(u);
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    if (with_filter) e = filter_expr(std::move(e));
    return e;
  }

  ExprPtr primary() {
    const Token& t = cur();
    switch (t.kind) {
      case Tok::Name: {
        next();
        auto e = node(EK::Literal, t);
        if (t.text == "true" || t.text == "True")
          e->literal = Value(true);
        else if (t.text == "false" || t.text == "False")
          e->literal = Value(false);
        else if (t.text == "none" || t.text == "None")
          e->literal = Value(None{});
        else {
          e->kind = EK::Name;
          e->name = t.text;
        }
        return e;
      }
      case Tok::String: {
        std::string s;
        while (cur().kind == Tok::String) s += next().text;
        auto e = node(EK::Literal, t);
        e->literal = Value(std::move(s));
        return e;
      }
      case Tok::Int: {
        next();
        auto e = node(EK::Literal, t);
        e->literal = Value(t.i);
        return e;
      }
      case Tok::Float: {
        next();
        auto e = node(EK::Literal, t);
        e->literal = Value(t.f);
        return e;
      }
      default: break;
    }
    if (accept_op("(")) {
      if (accept_op(")")) {
        auto e = node(EK::Tuple, t);
        return e;
      }
      std::vector<ExprPtr> items;
      bool comma = false;
      items.push_back(expression());
      while (accept_op(",")) {
        comma = true;
        if (is_op(")")) break;
        items.push_back(expression());
      }
      expect_op(")");
      if (!comma) return std::move(items[0]);
      auto e = node(EK::Tuple, t);
      e->args = std::move(items);
      return e;
    }
    if (accept_op("[")) {
      auto e = node(EK::List, t);
      display_items(*e, "]", [&] { e->args.push_back(expression()); });
      return e;
    }
    if (accept_op("{")) {
      auto e = node(EK::Dict, t);
      display_items(*e, "}", [&] {
        e->args.push_back(expression());
        expect_op(":");
        e->args.push_back(expression());
      });
      return e;
    }
    error("unexpected token in expression");
  }

  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      const Token& t = cur();
      if (accept_op(".")) {
        if (cur().kind == Tok::Name) {
          auto a = node(EK::Attr, t);
          a->name = next().text;
          a->args.push_back(std::move(e));
          e = std::move(a);
        } else if (cur().kind == Tok::Int) {
          auto a = node(EK::Item, t);
          a->args.push_back(std::move(e));
          auto idx = node(EK::Literal, cur());
          idx->literal = Value(next().i);
          a->args.push_back(std::move(idx));
          e = std::move(a);
        } else {
          error("expected an attribute name after '.'");
        }
      } else if (accept_op("[")) {
        e = subscript(std::move(e), t);
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr target, const Token& t) {
    auto part = [&]() -> ExprPtr { return (is_op(":") || is_op("]")) ? nullptr : expression(); };
    ExprPtr a = part();
    if (!is_op(":")) {
      if (!a) error("empty subscript");
      if (is_op(",")) error("tuple subscripts are not supported");
      expect_op("]");
      auto e = node(EK::Item, t);
      e->args.push_back(std::move(target));
      e->args.push_back(std::move(a));
      return e;
    }
    next();
    ExprPtr b = part();
    ExprPtr c;
    if (accept_op(":")) c = part();
    expect_op("]");
    auto e = node(EK::Slice, t);
    e->args.push_back(std::move(target));
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    e->args.push_back(std::move(c));
    return e;
  }

  // Parses "(args)" into e->args (after any already there) and e->kwargs.
  void call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) error("'*args' / '**kwargs' in calls are not supported");
      if (cur().kind == Tok::Name && peek().kind == Tok::Op && peek().text == "=") {
        std::string k = next().text;
        next();
        e.kwargs.emplace_back(std::move(k), expression());
      } else {
        if (!e.kwargs.empty()) error("positional argument after keyword argument");
        e.args.push_back(expression());
      }
    }
    expect_op(")");
  }

  ExprPtr call(ExprPtr callee) {
    auto e = node(EK::Call, cur());
    e->args.push_back(std::move(callee));
    call_args(*e);
    return e;
  }

  std::string dotted_name() {
    std::string n = expect_name();
    while (is_op(".") && peek().kind == Tok::Name) {
      next();
      n += "." + next().text;
    }
    return n;
  }

  // "| f(a) | g" applied to `operand` (null for block filters); start_inline: no leading '|'.
  ExprPtr filters(ExprPtr operand, bool start_inline = false) {
    while (start_inline || is_op("|")) {
      const Token& t = start_inline ? cur() : next();
      start_inline = false;
      auto f = node(EK::Filter, cur());
      f->line = t.line;
      f->column = t.column;
      f->name = dotted_name();
      f->args.push_back(std::move(operand));
      if (is_op("(")) call_args(*f);
      operand = std::move(f);
    }
    return operand;
  }

  ExprPtr filter_expr(ExprPtr e) {
    for (;;) {
      if (is_op("|")) {
        e = filters(std::move(e));
      } else if (is_name("is")) {
        const Token& t = next();
        auto test = node(EK::Test, t);
        test->negate = accept_name("not");
        test->name = dotted_name();
        test->args.push_back(std::move(e));
        if (is_op("(")) {
          call_args(*test);
        } else if ((cur().kind == Tok::Name || cur().kind == Tok::String || cur().kind == Tok::Int ||
                    cur().kind == Tok::Float || is_op("(") || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) error("tests cannot be chained with 'is'");
          test->args.push_back(postfix(primary()));
        }
        e = std::move(test);
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

// The parser bounds its own recursion, but a left-associative chain (`1 + 1 + ...`, `x|f|f...`,
// `a[0][0]...`, `a.x.x...`) is built by a loop into a tree as deep as the chain is long. Every later
// pass (check_names, analyze_scopes, the evaluator) recurses over the tree, so its depth, statements
// and expressions together, is bounded here, without recursion, before any of them runs.
void check_depth(const Program& program) {
  struct Item {
    const Stmt* s;
    const Expr* e;
    int depth;
  };
  std::vector<Item> stack;
  for (const auto& s : program.body) stack.push_back({s.get(), nullptr, 1});
  while (!stack.empty()) {
    Item it = stack.back();
    stack.pop_back();
    int line = it.s ? it.s->line : it.e->line, column = it.s ? it.s->column : it.e->column;
    if (it.depth > kMaxNesting)
      throw TemplateError("template nests deeper than " + std::to_string(kMaxNesting) + " levels", line, column);
    auto expr = [&](const ExprPtr& e) {
      if (e) stack.push_back({nullptr, e.get(), it.depth + 1});
    };
    if (it.s) {
      const Stmt& s = *it.s;
      expr(s.expr);
      expr(s.cond);
      for (const auto& [name, def] : s.params) expr(def);
      for (const auto& c : s.body) stack.push_back({c.get(), nullptr, it.depth + 1});
      for (const auto& c : s.else_body) stack.push_back({c.get(), nullptr, it.depth + 1});
    } else {
      for (const auto& a : it.e->args) expr(a);
      for (const auto& [name, a] : it.e->kwargs) expr(a);
    }
  }
}

}  // namespace

void parse(const std::vector<Token>& tokens, Program& out) {
  Parser(tokens).run(out);
  check_depth(out);
  check_names(out);
  analyze_scopes(out);
}

}  // namespace skainet::chat
