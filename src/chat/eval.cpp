#include "chat/eval.hpp"

#include <cmath>
#include <cstdio>

#include "chat/builtins.hpp"

namespace skainet::chat {
namespace {

// Restores the evaluator's scope pointer on every exit path.
struct ScopeSwap {
  ScopeSwap(Frame*& slot, Frame* next) : slot(slot), saved(slot) { slot = next; }
  ~ScopeSwap() { slot = saved; }
  Frame*& slot;
  Frame* saved;
};

// Binds `value` to the statement's targets in `f`: to the one name, or its items one to each name
// (`{% set a, b = pair %}`, `{% for k, v in items %}`); `what` names the targets in the error.
void bind_targets(Frame& f, const Stmt& s, Value value, const char* what) {
  if (s.targets.size() == 1) {
    f.vars[s.targets[0]] = std::move(value);
    return;
  }
  std::vector<Value> items;
  try {
    items = iterate(value);
  } catch (const ValueError& e) {
    throw TemplateError(e.message, s.line, s.column);
  }
  if (items.size() != s.targets.size())
    throw TemplateError("cannot unpack " + std::to_string(items.size()) + " values into " +
                            std::to_string(s.targets.size()) + " " + what,
                        s.line, s.column);
  for (size_t i = 0; i < items.size(); ++i) f.vars[s.targets[i]] = std::move(items[i]);
}

int64_t checked(bool overflow, int64_t r, const char* op) {
  if (overflow) fail(std::string("integer overflow in '") + op + "'");
  return r;
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) fail("integer division or modulo by zero");
  if (a == INT64_MIN && b == -1) fail("integer overflow in '//'");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t py_mod(int64_t a, int64_t b) {
  if (b == 0) fail("integer division or modulo by zero");
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// Python's '%d' % d for a float: int(d) in decimal, exactly, however large (Python's ints grow; glibc
// prints a double's exact value with "%.0f"); NaN and infinity fail as Python raises.
std::string int_digits(double d) {
  if (std::isnan(d)) fail("%d format: cannot convert float NaN to integer");
  if (std::isinf(d)) fail("%d format: cannot convert float infinity to integer");
  double t = std::trunc(d);
  if (t == 0) return "0";  // not "-0" for -0.5
  char buf[400];           // the largest double has 309 digits
  int n = std::snprintf(buf, sizeof buf, "%.0f", t);
  if (n < 0 || static_cast<size_t>(n) >= sizeof buf) fail("%d format: cannot format " + float_repr(d));
  return std::string(buf, static_cast<size_t>(n));
}

// Python's printf-style `str % args` for %s, %r, %d, %i and %%.
std::string percent_format(const std::string& fmt, const Value& r) {
  std::vector<Value> args;
  if (r.is_list() && r.list().tuple)
    args = r.list().items;
  else
    args.push_back(r);
  StringBuilder out("output of '%'");
  size_t next = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) fail("incomplete format");
    char c = fmt[i];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (c != 's' && c != 'r' && c != 'd' && c != 'i') fail(std::string("'%") + c + "' in a % format is not supported");
    if (next >= args.size()) fail("not enough arguments for format string");
    const Value& a = args[next++];
    if (c == 's')
      out += to_str(a);
    else if (c == 'r')
      out += repr(a);
    else if (a.is_float())
      out += int_digits(a.as_double());
    else if (a.is_int() || a.is_bool())
      out += std::to_string(a.as_int());
    else
      fail("%d format: a real number is required, not " + type_name(a));
  }
  // Python lets a mapping or list argument go unused (it could feed %(name)s); anything else must be used.
  bool mapping = r.is_dict() || (r.is_list() && !r.list().tuple);
  if (next < args.size() && !(mapping && next == 0)) fail("not all arguments converted during string formatting");
  return out.take();
}

[[noreturn]] void operand_type_error(const std::string& op, const Value& l, const Value& r) {
  fail("unsupported operand type(s) for " + op + ": '" + type_name(l) + "' and '" + type_name(r) + "'");
}

// One link of a comparison chain; ordering an undefined operand fails, equality and `in` do not.
bool comparison_holds(const std::string& op, const Value& l, const Value& r) {
  if (op == "==") return equal(l, r);
  if (op == "!=") return !equal(l, r);
  if (op == "in") return contains(r, l);
  if (op == "notin") return !contains(r, l);
  if (l.is_undefined()) fail(l.undefined_name());
  if (r.is_undefined()) fail(r.undefined_name());
  int c = compare(l, r);
  return op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
}

// str + str; Markup + str escapes the str, and the sum stays Markup.
Value add_strings(const Value& l, const Value& r) {
  StringBuilder sum("string built by '+'");
  sum += !l.markup && r.markup ? html_escape(l.str()) : l.str();
  sum += l.markup && !r.markup ? html_escape(r.str()) : r.str();
  Value v(sum.take());
  v.markup = l.markup || r.markup;
  return v;
}

// list + list or tuple + tuple.
Value add_lists(const Value& l, const Value& r) {
  // Checked before the copy: doubling a list in a loop reached gigabytes when only items counted.
  check_value_bytes(kObjectOverhead + (l.list().items.size() + r.list().items.size()) * sizeof(Value),
                    "list built by '+'");
  std::vector<Value> items = l.list().items;
  items.insert(items.end(), r.list().items.begin(), r.list().items.end());
  return make_list(std::move(items), l.list().tuple);
}

bool is_count(const Value& v) { return v.is_int() || v.is_bool(); }

// `*` of a string or list and an int, in either order.
bool is_repetition(const Value& l, const Value& r) {
  return ((l.is_string() || l.is_list()) && is_count(r)) || ((r.is_string() || r.is_list()) && is_count(l));
}

Value repeat_sequence(const Value& l, const Value& r) {
  const Value& seq = is_count(l) ? r : l;
  const uint64_t n = static_cast<uint64_t>(std::max<int64_t>(0, (is_count(l) ? l : r).as_int()));
  // Bytes, not items, before anything is allocated: [0] * 16000000 is 16M values of 48 bytes.
  const uint64_t unit = seq.is_string() ? seq.str().size() : seq.list().items.size() * sizeof(Value);
  if (unit == 0 || n == 0) return seq.is_string() ? Value(std::string()) : make_list({}, seq.list().tuple);
  const uint64_t bytes = n > (UINT64_MAX >> 1) / unit ? (UINT64_MAX >> 1) : n * unit;
  check_value_bytes(seq.is_string() ? bytes : kObjectOverhead + bytes,
                    seq.is_string() ? "string built by '*'" : "list built by '*'");
  if (seq.is_string()) {
    StringBuilder s("string built by '*'");
    for (uint64_t i = 0; i < n; ++i) s += seq.str();
    return Value(s.take());
  }
  std::vector<Value> items;
  for (uint64_t i = 0; i < n; ++i) items.insert(items.end(), seq.list().items.begin(), seq.list().items.end());
  return make_list(std::move(items), seq.list().tuple);
}

// + - * ** // % when either operand is a float (Python's floor and modulo signs).
Value float_arith(const std::string& op, double a, double b) {
  if (op == "+") return Value(a + b);
  if (op == "-") return Value(a - b);
  if (op == "*") return Value(a * b);
  if (op == "**") return Value(std::pow(a, b));
  if (b == 0) fail("float modulo or division by zero");
  if (op == "//") return Value(std::floor(a / b));
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return Value(m);
}

// int ** int: exact while it fits in 64 bits, a float for a negative exponent.
Value int_power(int64_t a, int64_t b) {
  if (b < 0) return Value(std::pow(static_cast<double>(a), static_cast<double>(b)));
  if (a == 0 || a == 1) return Value(b == 0 ? int64_t{1} : a);
  if (a == -1) return Value(b % 2 ? int64_t{-1} : int64_t{1});
  int64_t res = 1;  // |a| >= 2 overflows within 63 steps
  for (int64_t i = 0; i < b; ++i)
    if (__builtin_mul_overflow(res, a, &res)) fail("integer overflow in '**'");
  return Value(res);
}

// + - * // % ** of two ints (bools count as ints); overflow fails instead of wrapping.
Value int_arith(const std::string& op, const Value& l, const Value& r) {
  int64_t a = l.as_int(), b = r.as_int(), out = 0;
  bool overflow = false;
  if (op == "+") overflow = __builtin_add_overflow(a, b, &out);
  if (op == "-") overflow = __builtin_sub_overflow(a, b, &out);
  if (op == "*") overflow = __builtin_mul_overflow(a, b, &out);
  if (op == "+" || op == "-" || op == "*") return Value(checked(overflow, out, op.c_str()));
  if (op == "//") return Value(floor_div(a, b));
  if (op == "%") return Value(py_mod(a, b));
  if (op == "**") return int_power(a, b);
  operand_type_error(op, l, r);
}

Value binary_op(const std::string& op, const Value& l, const Value& r) {
  if (l.is_undefined()) fail(l.undefined_name());
  if (r.is_undefined()) fail(r.undefined_name());
  if (op == "+" && l.is_string() && r.is_string()) return add_strings(l, r);
  if (op == "+" && l.is_list() && r.is_list() && l.list().tuple == r.list().tuple) return add_lists(l, r);
  if (op == "*" && is_repetition(l, r)) return repeat_sequence(l, r);
  if (op == "%" && l.is_string()) return Value(percent_format(l.str(), r));
  if (!l.is_number() || !r.is_number()) operand_type_error(op, l, r);
  if (op == "/") {
    if (r.as_double() == 0) fail("division by zero");
    return Value(l.as_double() / r.as_double());
  }
  if (l.is_float() || r.is_float()) return float_arith(op, l.as_double(), r.as_double());
  return int_arith(op, l, r);
}

}  // namespace

Evaluator::DepthGuard::DepthGuard(Evaluator& e, int line, int column) : e(e) {
  if (++e.depth_ > e.options_.limits.max_depth) {
    --e.depth_;
    throw TemplateError("recursion deeper than " + std::to_string(e.options_.limits.max_depth) + " levels", line,
                        column);
  }
}

void Evaluator::step(int line, int column) {
  try {
    charge_work(1);
  } catch (const ValueError& e) {
    throw TemplateError(e.message, line, column);
  }
}

void Evaluator::append(StringBuilder& out, std::string_view text, int line, int column) const {
  try {
    out += text;
  } catch (const ValueError& e) {
    throw TemplateError(e.message, line, column);
  }
}

std::string Evaluator::render(const nlohmann::ordered_json& context) {
  if (!context.is_object() && !context.is_null()) throw TemplateError("the context must be a JSON object", 0, 0);
  BudgetScope budget(budget_);
  std::vector<std::pair<std::string, Value>> globals;
  add_globals(globals, options_);
  for (auto& [k, v] : globals) globals_.vars[k] = std::move(v);
  if (context.is_object()) {
    try {
      for (const auto& [k, v] : context.items()) globals_.vars[k] = from_json(v);
    } catch (const ValueError& e) {
      throw TemplateError("context: " + e.message, 0, 0);
    }
  }
  Frame root{{}, &globals_};
  for (const auto& n : program_.local_names) root.vars[n] = Value::undefined("'" + n + "' is undefined");
  root_ = &root;
  ScopeSwap s(frame_, &root);
  StringBuilder out("output", options_.limits.max_output_bytes);
  if (exec(program_.body, out) != Flow::Normal) throw TemplateError("'break' or 'continue' outside a loop", 0, 0);
  return out.take();
}

Value Evaluator::lookup(const std::string& name) const {
  for (const Frame* f = frame_; f; f = f->parent) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  return Value::undefined("'" + name + "' is undefined");
}

Evaluator::Flow Evaluator::exec(const Body& body, StringBuilder& out) {
  for (const auto& s : body) {
    Flow f = exec(*s, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Evaluator::Flow Evaluator::exec(const Stmt& s, StringBuilder& out) {
  step(s.line, s.column);
  DepthGuard g(*this, s.line, s.column);
  try {
    return exec_inner(s, out);
  } catch (const ValueError& e) {  // a limit met outside any expression (an assignment, a loop's items)
    throw TemplateError(e.message, s.line, s.column);
  }
}

Evaluator::Flow Evaluator::exec_inner(const Stmt& s, StringBuilder& out) {
  switch (s.kind) {
    case SK::Text: append(out, s.text, s.line, s.column); return Flow::Normal;
    case SK::Output: {
      Value v = eval(*s.expr);
      append(out, to_str(v), s.line, s.column);
      return Flow::Normal;
    }
    case SK::If: return exec(truthy(eval(*s.expr)) ? s.body : s.else_body, out);
    case SK::For: return exec_for(s, out);
    case SK::Set: exec_set(s, eval(*s.expr)); return Flow::Normal;
    case SK::SetBlock:
    case SK::FilterBlock: {
      StringBuilder inner(s.kind == SK::SetBlock ? "text of a block set" : "text of a filter block");
      Flow f;
      {
        Frame block{{}, frame_};  // a block set or filter body is its own scope
        for (const auto& n : s.local_names) block.vars[n] = Value::undefined("'" + n + "' is undefined");
        ScopeSwap sw(frame_, &block);
        f = exec(s.body, inner);
      }
      if (f != Flow::Normal) return f;  // a break inside leaves the enclosing loop, nothing is assigned
      Value v(inner.take());
      if (s.expr) {
        // The filter chain's innermost operand is null: it stands for the block's text.
        std::vector<const Expr*> chain;
        for (const Expr* e = s.expr.get(); e; e = e->args[0].get()) chain.push_back(e);
        for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
          Args args = eval_args(**it, 1);
          try {
            v = apply_filter((*it)->name, v, args);
          } catch (const ValueError& e) {
            throw TemplateError(e.message, (*it)->line, (*it)->column);
          }
        }
      }
      if (s.kind == SK::SetBlock)
        exec_set(s, std::move(v));
      else
        append(out, to_str(v), s.line, s.column);
      return Flow::Normal;
    }
    case SK::Macro: {
      const Stmt* macro = &s;
      frame_->vars[s.text] = make_function(s.text, [this, macro](Args& a) { return call_macro(*macro, a); });
      return Flow::Normal;
    }
    case SK::Break: return Flow::Break;
    case SK::Continue: return Flow::Continue;
    case SK::Body: return exec(s.body, out);
  }
  return Flow::Normal;
}

void Evaluator::exec_set(const Stmt& s, Value value) {
  if (!s.attr.empty()) {
    Value target = lookup(s.targets[0]);
    if (!target.is_dict() || !target.dict().ns)
      throw TemplateError("cannot assign attribute '" + s.attr + "' on a non-namespace object '" + s.targets[0] + "'",
                          s.line, s.column);
    target.dict().set(Value(s.attr), std::move(value));
    return;
  }
  bind_targets(*frame_, s, std::move(value), "names");
}

Evaluator::Flow Evaluator::exec_for(const Stmt& s, StringBuilder& out) {
  Value seq = eval(*s.expr);
  Value all;  // a list value, not a copy of its items: nested loops over one big list hold it once
  try {
    all = as_list(seq);
  } catch (const ValueError& e) {
    throw TemplateError(e.message, s.expr->line, s.expr->column);
  }
  auto bind = [&](Frame& f, const Value& item) { bind_targets(f, s, item, "loop variables"); };
  if (s.cond) {
    std::vector<Value> kept;
    for (const Value& item : all.list().items) {
      step(s.line, s.column);
      Frame f{{}, frame_};
      bind(f, item);
      ScopeSwap sw(frame_, &f);
      if (truthy(eval(*s.cond))) kept.push_back(item);
    }
    all = make_list(std::move(kept));
  }
  const std::vector<Value>& items = all.list().items;
  // Jinja2 runs `else` unless some iteration reached the end of the body: a loop that breaks or
  // continues in every iteration it ran also gets its else.
  bool completed = false;
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    step(s.line, s.column);
    Frame f{{}, frame_};
    for (const auto& name : s.local_names) f.vars[name] = Value::undefined("'" + name + "' is undefined");
    bind(f, items[static_cast<size_t>(i)]);
    Value loop = make_dict();
    DictObj& d = loop.dict();
    d.loop = true;
    d.append("index0", Value(i));
    d.append("index", Value(i + 1));
    d.append("revindex", Value(n - i));
    d.append("revindex0", Value(n - i - 1));
    d.append("first", Value(i == 0));
    d.append("last", Value(i == n - 1));
    d.append("length", Value(n));
    d.append("depth", Value(1));
    d.append("depth0", Value(0));
    d.append("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item"));
    d.append("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item"));
    d.append("cycle", make_function("loop.cycle", [i](Args& a) -> Value {
               if (a.pos.empty()) fail("no items for cycling given");
               return a.pos[static_cast<size_t>(i) % a.pos.size()];
             }));
    f.vars["loop"] = std::move(loop);
    ScopeSwap sw(frame_, &f);
    Flow fl = exec(s.body, out);
    if (fl == Flow::Break) break;
    completed = completed || fl == Flow::Normal;
  }
  return completed ? Flow::Normal : exec(s.else_body, out);  // a break in else belongs to an outer loop
}

Value Evaluator::call_macro(const Stmt& m, Args& args) {
  DepthGuard g(*this, m.line, m.column);
  Frame f{{}, root_};
  for (const auto& name : m.local_names) f.vars[name] = Value::undefined("'" + name + "' is undefined");
  size_t np = m.params.size();
  std::vector<Value> extra;
  for (size_t i = 0; i < args.pos.size(); ++i) {
    if (i < np)
      f.vars[m.params[i].first] = args.pos[i];
    else
      extra.push_back(args.pos[i]);
  }
  Value kwargs = make_dict();
  for (auto& [k, v] : args.kw) {
    bool known = false;
    for (size_t i = 0; i < np; ++i)
      if (m.params[i].first == k) {
        if (i < args.pos.size()) fail("macro '" + m.text + "' got multiple values for argument '" + k + "'");
        f.vars[k] = v;
        known = true;
      }
    if (!known) kwargs.dict().set(Value(k), v);
  }
  ScopeSwap sw(frame_, &f);
  for (size_t i = args.pos.size(); i < np; ++i) {
    const auto& [name, def] = m.params[i];
    if (f.vars.count(name)) continue;
    f.vars[name] = def ? eval(*def) : Value::undefined("parameter '" + name + "' was not provided");
  }
  // Jinja2 refuses surplus arguments unless the body mentions varargs / kwargs; we accept them.
  f.vars["varargs"] = make_list(std::move(extra), true);
  f.vars["kwargs"] = std::move(kwargs);
  StringBuilder out("output of a macro");
  if (exec(m.body, out) != Flow::Normal) fail("'break' or 'continue' outside a loop in macro '" + m.text + "'");
  return Value(out.take());
}

Args Evaluator::eval_args(const Expr& e, size_t first) {
  Args a;
  for (size_t i = first; i < e.args.size(); ++i) a.pos.push_back(eval(*e.args[i]));
  for (const auto& [k, v] : e.kwargs) a.kw.emplace_back(k, eval(*v));
  return a;
}

Value Evaluator::eval(const Expr& e) {
  step(e.line, e.column);
  DepthGuard g(*this, e.line, e.column);
  try {
    return eval_inner(e);
  } catch (const ValueError& err) {
    throw TemplateError(err.message, e.line, e.column);
  }
}

Value Evaluator::eval_call(const Expr& e) {
  Value callee = eval(*e.args[0]);
  Args a = eval_args(e, 1);
  if (callee.is_undefined()) {
    const std::string& hint = callee.undefined_name();
    fail(hint.empty() ? "call of an undefined value" : hint);
  }
  if (!callee.is_function()) fail("'" + type_name(callee) + "' object is not callable");
  return callee.function().call(a);
}

Value Evaluator::eval_inner(const Expr& e) {
  switch (e.kind) {
    case EK::Literal: return e.literal;
    case EK::Name: return lookup(e.name);
    case EK::List:
    case EK::Tuple: return eval_list(e);
    case EK::Dict: return eval_dict(e);
    case EK::Attr: return get_attr(eval(*e.args[0]), e.name);
    case EK::Item: {
      Value obj = eval(*e.args[0]);
      return get_item(obj, eval(*e.args[1]));
    }
    case EK::Slice: return eval_slice(e);
    case EK::Call: return eval_call(e);
    case EK::Filter: {
      Value v = e.args[0] ? eval(*e.args[0]) : Value(std::string());
      Args a = eval_args(e, 1);
      return apply_filter(e.name, v, a);
    }
    case EK::Test: return eval_test(e);
    case EK::Not: return Value(!truthy(eval(*e.args[0])));
    case EK::Neg:
    case EK::Pos: return eval_unary(e);
    case EK::Binary: return eval_binary(e);
    case EK::And: {
      Value l = eval(*e.args[0]);
      return truthy(l) ? eval(*e.args[1]) : l;
    }
    case EK::Or: {
      Value l = eval(*e.args[0]);
      return truthy(l) ? l : eval(*e.args[1]);
    }
    case EK::Compare: return eval_compare(e);
    case EK::Concat: {
      StringBuilder s("string built by '~'");
      for (const auto& a : e.args) s += to_str(eval(*a));
      return Value(s.take());
    }
    case EK::Cond: {
      if (truthy(eval(*e.args[1]))) return eval(*e.args[0]);
      if (e.args[2]) return eval(*e.args[2]);
      return Value::undefined("the inline if expression evaluated to false and no else section was defined");
    }
  }
  fail("unknown expression");
}

Value Evaluator::eval_list(const Expr& e) {
  std::vector<Value> items;
  for (const auto& a : e.args) items.push_back(eval(*a));
  return make_list(std::move(items), e.kind == EK::Tuple);
}

Value Evaluator::eval_dict(const Expr& e) {
  Value d = make_dict();
  for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
    Value k = eval(*e.args[i]);
    if (k.is_list() && !k.list().tuple) fail("unhashable type: 'list'");
    if (k.is_dict()) fail("unhashable type: 'dict'");
    d.dict().set(std::move(k), eval(*e.args[i + 1]));
  }
  return d;
}

Value Evaluator::eval_slice(const Expr& e) {
  Value obj = eval(*e.args[0]);
  Value parts[3];
  for (int i = 0; i < 3; ++i) parts[i] = e.args[1 + i] ? eval(*e.args[1 + i]) : Value(None{});
  return slice(obj, parts[0], parts[1], parts[2]);
}

Value Evaluator::eval_test(const Expr& e) {
  // `x is defined` must not fail on an undefined name; an undefined attribute of a defined
  // object is fine too; only attribute-of-undefined fails, inside eval.
  Value v = eval(*e.args[0]);
  Args a = eval_args(e, 1);
  bool r = apply_test(e.name, v, a);
  return Value(e.negate ? !r : r);
}

Value Evaluator::eval_unary(const Expr& e) {
  Value v = eval(*e.args[0]);
  if (v.is_undefined()) fail(v.undefined_name());
  const bool neg = e.kind == EK::Neg;
  if (!v.is_number()) fail("bad operand type for unary " + std::string(neg ? "-" : "+") + ": '" + type_name(v) + "'");
  if (!neg) return v.is_bool() ? Value(v.as_int()) : v;
  if (v.is_float()) return Value(-v.as_double());
  return Value(checked(v.as_int() == INT64_MIN, -v.as_int(), "-"));
}

// A chain `a < b <= c` evaluates each operand once, left to right, and stops at the first false link.
Value Evaluator::eval_compare(const Expr& e) {
  Value l = eval(*e.args[0]);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value r = eval(*e.args[i + 1]);
    if (!comparison_holds(e.ops[i], l, r)) return Value(false);
    l = std::move(r);
  }
  return Value(true);
}

Value Evaluator::eval_binary(const Expr& e) {
  Value l = eval(*e.args[0]);
  Value r = eval(*e.args[1]);
  return binary_op(e.name, l, r);
}

}  // namespace skainet::chat
