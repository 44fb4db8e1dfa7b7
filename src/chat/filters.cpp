// Jinja2's built-in filters and tests, with HuggingFace's tojson (Python's json.dumps, no HTML
// escaping, ensure_ascii off by default).
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <unordered_map>

#include "chat/builtins.hpp"

namespace skainet::chat {
namespace {

// Positional-or-keyword parameter lookup: f(value, a, b=...) as Python would bind it.
const Value* param(const Args& a, size_t i, std::string_view name) {
  if (i < a.pos.size()) return &a.pos[i];
  return a.kwarg(name);
}

bool param_bool(const Args& a, size_t i, std::string_view name, bool def) {
  const Value* v = param(a, i, name);
  return v ? truthy(*v) : def;
}

// Jinja2's make_attrgetter: "a.b.0" walks attributes/items, a part of digits being an int index;
// Undefined where missing.
Value attr_path(const Value& item, const Value& attr) {
  if (!attr.is_string()) return get_item(item, attr);
  Value v = item;
  const std::string& path = attr.str();
  size_t i = 0;
  for (;;) {
    size_t j = path.find('.', i);
    std::string_view part = std::string_view(path).substr(i, j == std::string::npos ? std::string::npos : j - i);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) {
      int64_t index = 0;
      // Python's int(part) has no upper bound; past int64 it indexes nothing (and no key of ours equals it).
      if (std::from_chars(part.data(), part.data() + part.size(), index).ec != std::errc())
        return Value::undefined(type_name(v) + " object has no element " + std::string(part));
      v = get_item(v, Value(index));
    } else {
      v = get_item(v, Value(std::string(part)));
    }
    if (j == std::string::npos) return v;
    i = j + 1;
  }
}

// Sort key with Jinja2's case folding of strings when case_sensitive is false.
Value fold(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(ascii_lower(v.str()));
  return v;
}

std::vector<Value> select_items(const Value& seq, Args& a, bool attr_mode, bool keep) {
  size_t first = 0;
  Value attr;
  if (attr_mode) {
    if (a.pos.empty()) fail("selectattr/rejectattr need an attribute name");
    attr = a.pos[0];
    first = 1;
  }
  std::string test;
  Args targs;
  if (a.pos.size() > first) {
    if (!a.pos[first].is_string()) fail("the test name must be a string");
    test = a.pos[first].str();
    targs.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(first + 1), a.pos.end());
    targs.kw = a.kw;
  }
  std::vector<Value> out;
  if (!truthy(seq)) return out;  // Jinja2's select_or_reject starts with `if value:`
  for (const Value& item : iterate(seq)) {
    Value v = attr_mode ? attr_path(item, attr) : item;
    bool r = test.empty() ? truthy(v) : apply_test(test, v, targs);
    if (r == keep) out.push_back(item);
  }
  return out;
}

Value tojson(const Value& v, const Args& a) {
  bool ensure_ascii = param_bool(a, 0, "ensure_ascii", false);
  const Value* ind = param(a, 1, "indent");
  const Value* seps = param(a, 2, "separators");
  bool sort_keys = param_bool(a, 3, "sort_keys", false);
  int indent = -1;
  if (ind && !ind->is_none()) {
    if (!ind->is_int()) fail("tojson: indent must be an integer");
    indent = static_cast<int>(std::clamp<int64_t>(ind->as_int(), 0, 64));
  }
  std::string item_sep = indent >= 0 ? "," : ", ", key_sep = ": ";
  if (seps && !seps->is_none()) {
    if (!seps->is_list() || seps->list().items.size() != 2 || !seps->list().items[0].is_string() ||
        !seps->list().items[1].is_string())
      fail("tojson: separators must be a pair of strings");
    item_sep = seps->list().items[0].str();
    key_sep = seps->list().items[1].str();
  }
  return Value(to_json(v, indent, ensure_ascii, item_sep, key_sep, sort_keys));
}

Value indent_filter(const Value& v, const Args& a) {
  const Value* w = param(a, 0, "width");
  StringBuilder ind("indent string of 'indent'");
  if (!w)
    ind += "    ";
  else if (w->is_string())
    ind += w->str();
  else
    ind.append(static_cast<size_t>(std::max<int64_t>(w->as_int(), 0)), ' ');  // checked before it is allocated
  bool first = param_bool(a, 1, "first", false);
  bool blank = param_bool(a, 2, "blank", false);
  if (!v.is_string()) fail("indent: expected a string, got '" + type_name(v) + "'");
  // Jinja2 splits value + "\n" into lines and joins them with "\n" + indent (blank lines unindented
  // unless `blank`); each piece is checked as the result grows.
  StringBuilder text("text of 'indent'");
  text += v.str();
  text += '\n';
  StringBuilder rv("output of 'indent'");
  if (first) rv += ind.str();
  bool at_first = true;
  py_splitlines(text.str(), [&](std::string_view l) {
    if (!at_first) {
      rv += '\n';
      if (blank || !l.empty()) rv += ind.str();
    }
    at_first = false;
    rv += l;
  });
  return Value(rv.take());
}

// Jinja2's do_title: words split at whitespace, '-', and opening brackets.
std::string jinja_title(const std::string& s) {
  std::string out;
  size_t i = 0;
  auto sep = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == '-' || c == '(' ||
           c == '{' || c == '[' || c == '<';
  };
  while (i < s.size()) {
    size_t j = i;
    if (sep(s[i])) {
      while (j < s.size() && sep(s[j])) ++j;
      out += s.substr(i, j - i);
    } else {
      while (j < s.size() && !sep(s[j])) ++j;
      out += py_title_word(s.substr(i, j - i));
    }
    i = j;
  }
  return out;
}

Value generator(std::vector<Value> items) {
  Value v = make_list(std::move(items));
  v.list().generator = true;
  return v;
}

// Each filter is called with the value, its arguments and the name it was called by (one function
// serves the names that share a body, such as escape/e or select/reject).
using Name = const std::string&;

Value f_markup(const Value& v, Args&, Name name) {  // safe, e, escape, forceescape
  Value out(name == "safe" || (v.markup && name != "forceescape") ? to_str(v) : html_escape(to_str(v)));
  out.markup = true;
  return out;
}
Value f_tojson(const Value& v, Args& a, Name) { return tojson(v, a); }
Value f_string(const Value& v, Args&, Name) { return v.is_string() ? v : Value(to_str(v)); }
Value f_trim(const Value& v, Args& a, Name) { return Value(py_strip(to_str(v), param(a, 0, "chars"), true, true)); }
Value f_length(const Value& v, Args&, Name) { return Value(static_cast<int64_t>(length(v))); }
Value f_upper(const Value& v, Args&, Name) { return Value(ascii_upper(to_str(v))); }
Value f_lower(const Value& v, Args&, Name) { return Value(ascii_lower(to_str(v))); }
Value f_capitalize(const Value& v, Args&, Name) { return Value(py_title_word(to_str(v))); }
Value f_title(const Value& v, Args&, Name) { return Value(jinja_title(to_str(v))); }
Value f_indent(const Value& v, Args& a, Name) { return indent_filter(v, a); }

Value f_replace(const Value& v, Args& a, Name name) {
  Args b = a;
  return string_method(to_str(v), name, b);
}

Value f_default(const Value& v, Args& a, Name) {
  const Value* def = param(a, 0, "default_value");
  bool boolean = param_bool(a, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !truthy(v))) return def ? *def : Value(std::string());
  return v;
}

Value f_join(const Value& v, Args& a, Name) {
  const Value* d = param(a, 0, "d");
  const Value* attr = param(a, 1, "attribute");
  std::string sep = d ? to_str(*d) : "";
  StringBuilder out("output of 'join'");
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += to_str(attr ? attr_path(item, *attr) : item);
  }
  return Value(out.take());
}

Value f_first(const Value& v, Args&, Name) {
  if (v.is_list() && v.list().generator) {  // next(iter(gen)) takes one item
    auto& items = v.list().items;
    if (items.empty()) return Value::undefined("No first item, sequence was empty.");
    Value f = items.front();
    charge_work(items.size());  // the erase moves what is left
    items.erase(items.begin());
    return f;
  }
  std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(const Value& v, Args&, Name) {
  if (v.is_list() && v.list().generator) fail("'generator' object is not reversible");
  std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_list(const Value& v, Args&, Name) { return make_list(iterate(v)); }

Value f_reverse(const Value& v, Args&, Name) {
  if (v.is_string()) {
    auto cps = code_points(v.str());
    StringBuilder out("reversed string");
    for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
    return Value(out.take());
  }
  bool gen = v.is_list() && v.list().generator;  // a list gives an iterator, anything else a list
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  return (v.is_list() && !gen) ? generator(std::move(items)) : make_list(std::move(items));
}

Value f_items(const Value& v, Args&, Name) {
  if (v.is_undefined()) return generator({});
  if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, x] : v.dict().items) out.push_back(make_list({k, x}, true));
  return generator(std::move(out));
}

// int and float of a string: Python's int() first (for int), then float().
Value number_from_string(const std::string& str, Name name, const Value& fallback) {
  std::string s = py_strip(str, nullptr, true, true);
  size_t used = 0;
  if (name == "int") {
    try {
      int64_t x = std::stoll(s, &used, 10);
      if (used == s.size()) return Value(x);
    } catch (const std::out_of_range&) {
      fail("int filter: '" + s + "' is outside the 64-bit integer range");  // Python's int would grow
    } catch (const std::invalid_argument&) {
    }
  }
  double d = 0;
  try {
    d = std::stod(s, &used);
  } catch (const std::exception&) {
    return fallback;  // not a number, or beyond double: float('1e400') is inf, which do_int turns into the default
  }
  if (used != s.size()) return fallback;
  if (name == "float") return Value(d);
  if (!std::isfinite(d)) return fallback;  // do_int's second try catches int(float('inf')) and int(float('nan'))
  return Value(float_to_int(d, "int filter"));
}

Value f_number(const Value& v, Args& a, Name name) {  // int, float
  const Value* def = param(a, 0, "default");
  Value fallback = def ? *def : (name == "int" ? Value(int64_t{0}) : Value(0.0));
  if (v.is_undefined()) fail(v.undefined_name());  // int(Undefined) raises, it is no TypeError
  if (name == "float") {
    if (v.is_number()) return Value(v.as_double());
  } else if (v.is_float()) {
    // Jinja2's do_int: int(nan) raises ValueError, which it turns into the default; int(inf) raises
    // OverflowError, which it lets through; a finite float beyond int64 fails (float_to_int says why).
    if (std::isnan(v.as_double())) return fallback;
    return Value(float_to_int(v.as_double(), "int filter"));
  } else if (v.is_number()) {
    return Value(v.as_int());
  }
  if (v.is_string()) return number_from_string(v.str(), name, fallback);
  return fallback;
}

Value f_abs(const Value& v, Args&, Name) {
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  if (v.is_number()) {
    // Python's abs(-2**63) is 2**63, beyond int64: a template error like the engine's other integer
    // overflows ("integer overflow in '-'"), not a silent wrap back to -2**63.
    if (v.as_int() == INT64_MIN) fail("abs: integer overflow: abs(" + std::to_string(v.as_int()) + ") is beyond int64");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  fail("bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_round(const Value& v, Args& a, Name) {
  const Value* p = param(a, 0, "precision");
  const Value* m = param(a, 1, "method");
  std::string method = m ? to_str(*m) : "common";
  int64_t prec = p ? p->as_int() : 0;
  if (!v.is_number()) fail("round: not a number");
  if (method == "common" && !v.is_float() && prec >= 0) return Value(v.as_int());  // Python's round(int) is an int
  double scale = std::pow(10.0, static_cast<double>(prec));
  double x = v.as_double() * scale;
  double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
  return Value(r / scale);
}

Value f_map(const Value& v, Args& a, Name) {
  const Value* attr = a.kwarg("attribute");
  std::vector<Value> out;
  if (!truthy(v)) return generator(std::move(out));  // do_map starts with `if value:`
  if (attr) {
    const Value* def = a.kwarg("default");
    for (const Value& item : iterate(v)) {
      Value x = attr_path(item, *attr);
      out.push_back(x.is_undefined() && def ? *def : x);
    }
    return generator(std::move(out));
  }
  if (a.pos.empty() || !a.pos[0].is_string()) fail("map needs a filter name or attribute=");
  Args rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (const Value& item : iterate(v)) {
    Args r = rest;
    out.push_back(apply_filter(a.pos[0].str(), item, r));
  }
  return generator(std::move(out));
}

Value f_select(const Value& v, Args& a, Name name) {  // select, reject
  return generator(select_items(v, a, false, name == "select"));
}
Value f_selectattr(const Value& v, Args& a, Name name) {  // selectattr, rejectattr
  return generator(select_items(v, a, true, name == "selectattr"));
}

Value f_unique(const Value& v, Args& a, Name) {
  bool cs = param_bool(a, 0, "case_sensitive", false);
  const Value* attr = param(a, 1, "attribute");
  // Hashed, as Python's set is: a linear scan of what was seen made range(100000)|unique quadratic.
  std::vector<Value> out, seen;
  std::unordered_multimap<uint64_t, size_t> index;  // hash of a key -> its place in `seen`
  for (const Value& item : iterate(v)) {
    Value key = fold(attr ? attr_path(item, *attr) : item, cs);
    if (key.is_dict() || (key.is_list() && !key.list().tuple)) fail("unhashable type: '" + type_name(key) + "'");
    const uint64_t h = hash_value(key);
    auto [lo, hi] = index.equal_range(h);
    if (std::none_of(lo, hi, [&](const auto& e) { return equal(seen[e.second], key); })) {
      index.emplace(h, seen.size());
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return generator(std::move(out));
}

Value f_ordered(const Value& v, Args& a, Name name) {  // sort, dictsort, min, max
  std::vector<Value> items;
  bool cs, reverse = false;
  std::function<Value(const Value&)> key;
  if (name == "dictsort") {
    if (!v.is_dict()) fail("dictsort: not a mapping");
    for (const auto& [k, x] : v.dict().items) items.push_back(make_list({k, x}, true));
    cs = param_bool(a, 0, "case_sensitive", false);
    const Value* by = param(a, 1, "by");
    size_t pos = (by && to_str(*by) == "value") ? 1 : 0;
    reverse = param_bool(a, 2, "reverse", false);
    key = [pos, cs](const Value& it) { return fold(it.list().items[pos], cs); };
  } else {
    items = iterate(v);
    size_t off = name == "sort" ? 1 : 0;
    if (name == "sort") reverse = param_bool(a, 0, "reverse", false);
    cs = param_bool(a, off, "case_sensitive", false);
    const Value* attr = param(a, off + 1, "attribute");
    Value at = attr ? *attr : Value();
    key = [at, cs](const Value& it) { return fold(at.is_undefined() ? it : attr_path(it, at), cs); };
  }
  if (name == "min" || name == "max") {
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    size_t best = 0;
    for (size_t i = 1; i < items.size(); ++i) {
      int c = compare(key(items[i]), key(items[best]));
      if (name == "min" ? c < 0 : c > 0) best = i;
    }
    return items[best];
  }
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    Value kx = key(x), ky = key(y);
    if (kx.is_undefined() && ky.is_undefined()) return false;  // what Python's sort makes of two Undefined
    return reverse ? compare(ky, kx) < 0 : compare(kx, ky) < 0;
  });
  return make_list(std::move(items));
}

Value f_sum(const Value& v, Args& a, Name) {
  const Value* attr = param(a, 0, "attribute");
  const Value* start = param(a, 1, "start");
  Value acc = start ? *start : Value(int64_t{0});
  for (const Value& item : iterate(v)) {
    Value x = attr ? attr_path(item, *attr) : item;
    if (!acc.is_number() || !x.is_number()) fail("sum: unsupported operand types");
    if (acc.is_float() || x.is_float()) {
      acc = Value(acc.as_double() + x.as_double());
      continue;
    }
    // Python's sum grows past int64; promoting to float would round silently (2**63 + 1 prints as
    // 9.223372036854776e+18), so an overflow is a template error naming the filter and the operands,
    // as the `+` operator's is.
    int64_t r = 0;
    if (__builtin_add_overflow(acc.as_int(), x.as_int(), &r))
      fail("sum: integer overflow adding " + std::to_string(x.as_int()) + " to " + std::to_string(acc.as_int()));
    acc = Value(r);
  }
  return acc;
}

Value f_batch(const Value& v, Args& a, Name) {
  const Value* n = param(a, 0, "linecount");
  const Value* fill = param(a, 1, "fill_with");
  if (!n || !n->is_int() || n->as_int() <= 0) fail("batch: linecount must be a positive integer");
  // A batch is filled up to linecount: a list that long must fit before the filling starts.
  if (fill) check_value_bytes(kObjectOverhead + static_cast<uint64_t>(n->as_int()) * sizeof(Value), "batch of 'batch'");
  std::vector<Value> out, cur;
  for (const Value& item : iterate(v)) {
    cur.push_back(item);
    if (static_cast<int64_t>(cur.size()) == n->as_int()) {
      out.push_back(make_list(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (fill)
      while (static_cast<int64_t>(cur.size()) < n->as_int()) cur.push_back(*fill);
    out.push_back(make_list(std::move(cur)));
  }
  return generator(std::move(out));
}

Value f_wordcount(const Value& v, Args&, Name) {
  const std::string s = to_str(v);
  charge_bytes_scanned(2 * s.size());  // copied, then each byte classified
  int64_t n = 0;
  bool in = false;
  for (unsigned char c : s) {
    bool w = std::isalnum(c) || c == '_' || c >= 0x80;
    if (w && !in) ++n;
    in = w;
  }
  return Value(n);
}

Value f_center(const Value& v, Args& a, Name) {
  int64_t width = param(a, 0, "width") ? param(a, 0, "width")->as_int() : 80;
  std::string s = to_str(v);
  int64_t len = static_cast<int64_t>(code_point_count(s));
  if (width <= len) return Value(s);
  int64_t pad = width - len;
  int64_t left = pad / 2 + (pad & width & 1);
  StringBuilder out("output of 'center'");  // checks the width before the padding is allocated
  out.append(static_cast<size_t>(left), ' ');
  out += s;
  out.append(static_cast<size_t>(pad - left), ' ');
  return Value(out.take());
}

using FilterFn = Value (*)(const Value& v, Args& a, Name name);
constexpr auto kFilters = std::to_array<Named<FilterFn>>({
    {"abs", f_abs},
    {"batch", f_batch},
    {"capitalize", f_capitalize},
    {"center", f_center},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_ordered},
    {"e", f_markup},
    {"escape", f_markup},
    {"first", f_first},
    {"float", f_number},
    {"forceescape", f_markup},
    {"indent", f_indent},
    {"int", f_number},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_ordered},
    {"min", f_ordered},
    {"reject", f_select},
    {"rejectattr", f_selectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_markup},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"sort", f_ordered},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"unique", f_unique},
    {"upper", f_upper},
    {"wordcount", f_wordcount},
});
static_assert(sorted_by_name(kFilters));

// Jinja2 built-in filters this interpreter does not implement: named in the error, so a template
// author knows the filter exists but is not supported here.
constexpr std::array<std::string_view, 13> kUnsupportedFilters = {
    "attr",      "filesizeformat", "format",    "groupby", "pprint",   "random", "slice",
    "striptags", "truncate",       "urlencode", "urlize",  "wordwrap", "xmlattr"};

}  // namespace

bool known_filter(std::string_view n) { return find_named(kFilters, n) != nullptr; }

bool jinja2_builtin_filter(std::string_view n) {
  return std::find(kUnsupportedFilters.begin(), kUnsupportedFilters.end(), n) != kUnsupportedFilters.end();
}

Value apply_filter(const std::string& name, const Value& v, Args& a) {
  if (FilterFn f = find_named(kFilters, name)) return f(v, a, name);
  if (jinja2_builtin_filter(name)) fail("the Jinja2 filter '" + name + "' is not supported");
  fail("no filter named '" + name + "'");
}

namespace {

const Value& test_arg(const Args& a, Name name) {
  if (a.pos.empty()) fail("test '" + name + "' needs an argument");
  return a.pos[0];
}

bool plain_dict(const Value& v) { return v.is_dict() && !v.dict().ns && !v.dict().loop; }

bool t_defined(const Value& v, Args&, Name) { return !v.is_undefined(); }
bool t_undefined(const Value& v, Args&, Name) { return v.is_undefined(); }
bool t_none(const Value& v, Args&, Name) { return v.is_none(); }
bool t_string(const Value& v, Args&, Name) { return v.is_string(); }
bool t_mapping(const Value& v, Args&, Name) { return plain_dict(v); }
bool t_iterable(const Value& v, Args&, Name) {  // iterable, sequence
  return v.is_undefined() || v.is_string() || v.is_list() || plain_dict(v);
}
bool t_number(const Value& v, Args&, Name) { return v.is_number(); }
bool t_integer(const Value& v, Args&, Name) { return v.is_int(); }
bool t_float(const Value& v, Args&, Name) { return v.is_float(); }
bool t_boolean(const Value& v, Args&, Name) { return v.is_bool(); }
bool t_true(const Value& v, Args&, Name) { return v.is_bool() && std::get<bool>(v.v); }
bool t_false(const Value& v, Args&, Name) { return v.is_bool() && !std::get<bool>(v.v); }
bool t_callable(const Value& v, Args&, Name) { return v.is_function() || v.is_undefined(); }  // Undefined has __call__
bool t_escaped(const Value&, Args&, Name) { return false; }

bool t_parity(const Value& v, Args&, Name name) {  // odd, even
  if (v.is_float()) {                              // value % 2 == 1 / == 0, with Python's modulo
    double m = std::fmod(v.as_double(), 2.0);
    if (m < 0) m += 2.0;
    return name == "odd" ? m == 1.0 : m == 0.0;
  }
  if (!v.is_int() && !v.is_bool()) fail("unsupported operand type(s) for %: '" + type_name(v) + "' and 'int'");
  return (v.as_int() % 2 != 0) == (name == "odd");
}

bool t_divisibleby(const Value& v, Args& a, Name name) {
  int64_t d = test_arg(a, name).as_int();
  if (d == 0) fail("integer division or modulo by zero");
  return v.as_int() % d == 0;
}

bool t_eq(const Value& v, Args& a, Name name) { return equal(v, test_arg(a, name)); }
bool t_ne(const Value& v, Args& a, Name name) { return !equal(v, test_arg(a, name)); }
bool t_lt(const Value& v, Args& a, Name name) { return compare(v, test_arg(a, name)) < 0; }
bool t_le(const Value& v, Args& a, Name name) { return compare(v, test_arg(a, name)) <= 0; }
bool t_gt(const Value& v, Args& a, Name name) { return compare(v, test_arg(a, name)) > 0; }
bool t_ge(const Value& v, Args& a, Name name) { return compare(v, test_arg(a, name)) >= 0; }
bool t_in(const Value& v, Args& a, Name name) { return contains(test_arg(a, name), v); }

bool t_sameas(const Value& v, Args& a, Name name) {
  const Value& o = test_arg(a, name);
  if (v.is_none() || v.is_bool() || v.is_undefined()) return v.v.index() == o.v.index() && equal(v, o);
  if (v.is_list() && o.is_list()) return &v.list() == &o.list();
  if (v.is_dict() && o.is_dict()) return &v.dict() == &o.dict();
  return false;
}

bool t_cased(const Value& v, Args&, Name name) {  // lower, upper: the str methods islower, isupper
  Args none;
  return truthy(string_method(to_str(v), name == "lower" ? "islower" : "isupper", none));
}

using TestFn = bool (*)(const Value& v, Args& a, Name name);
constexpr auto kTests = std::to_array<Named<TestFn>>({
    {"!=", t_ne},
    {"<", t_lt},
    {"<=", t_le},
    {"==", t_eq},
    {">", t_gt},
    {">=", t_ge},
    {"boolean", t_boolean},
    {"callable", t_callable},
    {"defined", t_defined},
    {"divisibleby", t_divisibleby},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"escaped", t_escaped},
    {"even", t_parity},
    {"false", t_false},
    {"float", t_float},
    {"ge", t_ge},
    {"greaterthan", t_gt},
    {"gt", t_gt},
    {"in", t_in},
    {"integer", t_integer},
    {"iterable", t_iterable},
    {"le", t_le},
    {"lessthan", t_lt},
    {"lower", t_cased},
    {"lt", t_lt},
    {"mapping", t_mapping},
    {"ne", t_ne},
    {"none", t_none},
    {"number", t_number},
    {"odd", t_parity},
    {"sameas", t_sameas},
    {"sequence", t_iterable},
    {"string", t_string},
    {"true", t_true},
    {"undefined", t_undefined},
    {"upper", t_cased},
});
static_assert(sorted_by_name(kTests));

}  // namespace

bool known_test(std::string_view n) { return find_named(kTests, n) != nullptr; }

bool apply_test(const std::string& name, const Value& v, Args& a) {
  if (TestFn t = find_named(kTests, name)) return t(v, a, name);
  fail("no test named '" + name + "'");
}

}  // namespace skainet::chat
