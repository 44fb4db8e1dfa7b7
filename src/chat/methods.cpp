// Attribute and item lookup, iteration, and the Python methods of str, dict and list.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "chat/builtins.hpp"
#include "skainet/core/utf8.hpp"

namespace skainet::chat {
namespace {

constexpr std::string_view kPySpace = " \t\n\r\v\f\x1c\x1d\x1e\x1f";
constexpr int64_t kMaxRange = 100000;  // Jinja2's sandbox refuses larger ranges

bool is_py_space(char c) { return kPySpace.find(c) != std::string_view::npos; }

const char* const kUnsafeList[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"};
const char* const kUnsafeDict[] = {"pop", "popitem", "setdefault", "update", "clear"};

[[noreturn]] void unsafe(const std::string& attr, const Value& obj) {
  fail("access to attribute '" + attr + "' of '" + type_name(obj) + "' object is unsafe.");
}

int64_t arg_int(const Value& v, const char* what) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  fail(std::string(what) + ": expected an integer, got '" + type_name(v) + "'");
}

const std::string& arg_str(const Value& v, const char* what) {
  if (!v.is_string()) fail(std::string(what) + ": expected a string, got '" + type_name(v) + "'");
  return v.str();
}

// The parts are built as values, each charged as it is made: a 16 MiB string of separators cannot
// become millions of uncharged std::strings first.
std::vector<Value> split_ws(std::string_view s, int64_t maxsplit) {
  charge_bytes_scanned(s.size());
  std::vector<Value> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_py_space(s[i])) ++i;
    if (i >= s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      size_t e = s.size();
      while (e > i && is_py_space(s[e - 1])) --e;
      out.emplace_back(std::string(s.substr(i, e - i)));
      return out;
    }
    size_t j = i;
    while (j < s.size() && !is_py_space(s[j])) ++j;
    out.emplace_back(std::string(s.substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<Value> split_sep(std::string_view s, std::string_view sep, int64_t maxsplit) {
  if (sep.empty()) fail("empty separator");
  charge_bytes_scanned(s.size());
  std::vector<Value> out;
  size_t i = 0;
  for (;;) {
    size_t j = s.find(sep, i);
    if (j == std::string_view::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit)) {
      out.emplace_back(std::string(s.substr(i)));
      return out;
    }
    out.emplace_back(std::string(s.substr(i, j - i)));
    i = j + sep.size();
  }
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  StringBuilder out("output of 'replace'");
  if (from.empty()) {
    // Python inserts `to` between every character and at both ends.
    auto cps = code_points(s);
    int64_t n = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      if (i < cps.size()) out += cps[i];
    }
    return out.take();
  }
  size_t i = 0;
  int64_t n = 0;
  for (;;) {
    size_t j = s.find(from, i);
    if (j == std::string_view::npos || (count >= 0 && n >= count)) break;
    out.append(s.substr(i, j - i));
    out.append(to);
    i = j + from.size();
    ++n;
  }
  out.append(s.substr(i));
  return out.take();
}

bool prefix_match(const std::string& s, const Value& p, bool suffix) {
  auto one = [&](const Value& x) {
    const std::string& t = arg_str(x, suffix ? "endswith" : "startswith");
    if (t.size() > s.size()) return false;
    charge_bytes_scanned(t.size());
    return suffix ? s.compare(s.size() - t.size(), t.size(), t) == 0 : s.compare(0, t.size(), t) == 0;
  };
  if (p.is_list() && p.list().tuple) {
    for (const auto& x : p.list().items)
      if (one(x)) return true;
    return false;
  }
  return one(p);
}

std::string py_str_title(std::string_view s) {
  std::string out(s);
  bool prev_cased = false;
  for (char& c : out) {
    bool upper = c >= 'A' && c <= 'Z', lower = c >= 'a' && c <= 'z';
    if (upper || lower) {
      c = prev_cased ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
                     : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      prev_cased = true;
    } else {
      prev_cased = false;
    }
  }
  return out;
}

// str.format with automatic or explicit field numbering and keyword names; no format specs.
std::string py_format(const std::string& fmt, Args& args) {
  StringBuilder out("output of 'format'");
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}';
      ++i;
      continue;
    }
    if (c == '}') fail("Single '}' encountered in format string");
    if (c != '{') {
      out += c;
      continue;
    }
    size_t e = fmt.find('}', i);
    if (e == std::string::npos) fail("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, e - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos)
      fail("str.format: format specs and conversions are not supported ('{" + field + "}')");
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_index >= args.pos.size())
        fail("Replacement index " + std::to_string(auto_index) + " out of range for positional args tuple");
      v = &args.pos[auto_index++];
    } else if (field.size() < 9 &&
               std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      size_t k = std::stoul(field);
      if (k >= args.pos.size()) fail("Replacement index " + field + " out of range for positional args tuple");
      v = &args.pos[k];
    } else {
      v = args.kwarg(field);
      if (!v) fail("KeyError: '" + field + "'");
    }
    out += to_str(*v);
    i = e;
  }
  return out.take();
}

}  // namespace

std::string py_strip(std::string_view s, const Value* chars, bool left, bool right) {
  bool set[256] = {};  // a table, so a long `chars` costs its length once, not once per character
  if (!chars || chars->is_none()) {
    for (char c : kPySpace) set[static_cast<unsigned char>(c)] = true;
  } else {
    const std::string& cs = arg_str(*chars, "strip");
    charge_bytes_scanned(cs.size());
    for (char c : cs) set[static_cast<unsigned char>(c)] = true;
  }
  charge_bytes_scanned(s.size());
  auto strip_set = [&](char c) { return set[static_cast<unsigned char>(c)]; };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && strip_set(s[b])) ++b;
  if (right)
    while (e > b && strip_set(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

std::string ascii_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string py_title_word(std::string_view s) {
  if (s.empty()) return {};
  auto cps = code_points(s);
  std::string out = ascii_upper(std::string(cps[0]));
  out += ascii_lower(std::string(s.substr(cps[0].size())));
  return out;
}

int64_t float_to_int(double d, const std::string& what) {
  if (std::isnan(d)) fail(what + ": cannot convert float NaN to integer");
  if (std::isinf(d)) fail(what + ": cannot convert float infinity to integer");
  double t = std::trunc(d);
  // [-2**63, 2**63) holds exactly the doubles that convert without undefined behaviour.
  if (!(t >= -0x1p63 && t < 0x1p63)) fail(what + ": " + float_repr(d) + " is outside the 64-bit integer range");
  return static_cast<int64_t>(t);
}

void py_splitlines(std::string_view s, const std::function<void(std::string_view)>& line) {
  charge_bytes_scanned(s.size());
  size_t start = 0, i = 0;
  while (i < s.size()) {
    size_t brk = 0;
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n')
      brk = 2;
    else if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == 0x1c || c == 0x1d || c == 0x1e)
      brk = 1;
    else if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x85)
      brk = 2;
    else if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
             (static_cast<unsigned char>(s[i + 2]) == 0xA8 || static_cast<unsigned char>(s[i + 2]) == 0xA9))
      brk = 3;
    if (brk) {
      line(s.substr(start, i - start));
      i += brk;
      start = i;
    } else {
      ++i;
    }
  }
  if (start < s.size()) line(s.substr(start));
}

namespace {

// Each method is called with its object, its arguments and the name it was called by (one function
// serves the names that share a body, such as strip/lstrip/rstrip).
using Name = const std::string&;

const Value* pos(const Args& a, size_t i) { return i < a.pos.size() ? &a.pos[i] : nullptr; }

Value s_strip(const std::string& s, Args& a, Name name) {  // strip, lstrip, rstrip
  return Value(py_strip(s, pos(a, 0), name != "rstrip", name != "lstrip"));
}

Value s_split(const std::string& s, Args& a, Name name) {  // split, rsplit
  const Value* sep = pos(a, 0) ? pos(a, 0) : a.kwarg("sep");
  const Value* ms = pos(a, 1) ? pos(a, 1) : a.kwarg("maxsplit");
  int64_t maxsplit = ms ? arg_int(*ms, "split") : -1;
  if (name == "rsplit" && maxsplit >= 0) fail("rsplit with maxsplit is not supported");
  return make_list((!sep || sep->is_none()) ? split_ws(s, maxsplit) : split_sep(s, arg_str(*sep, "split"), maxsplit));
}

Value s_affix(const std::string& s, Args& a, Name name) {  // startswith, endswith
  if (!pos(a, 0)) fail(name + " takes at least 1 argument");
  return Value(prefix_match(s, *pos(a, 0), name == "endswith"));
}

Value s_replace(const std::string& s, Args& a, Name) {
  if (a.pos.size() < 2) fail("replace expected at least 2 arguments");
  int64_t count = pos(a, 2) ? arg_int(*pos(a, 2), "replace") : -1;
  return Value(replace_all(s, arg_str(a.pos[0], "replace"), arg_str(a.pos[1], "replace"), count));
}

Value s_upper(const std::string& s, Args&, Name) { return Value(ascii_upper(s)); }
Value s_lower(const std::string& s, Args&, Name) { return Value(ascii_lower(s)); }
Value s_title(const std::string& s, Args&, Name) { return Value(py_str_title(s)); }
Value s_capitalize(const std::string& s, Args&, Name) { return Value(py_title_word(s)); }
Value s_format(const std::string& s, Args& a, Name) { return Value(py_format(s, a)); }

Value s_swapcase(const std::string& s, Args&, Name) {
  std::string o = s;
  for (char& c : o) {
    const unsigned char u = static_cast<unsigned char>(c);
    c = static_cast<char>(std::isupper(u) ? std::tolower(u) : std::toupper(u));
  }
  return Value(o);
}

Value s_find(const std::string& s, Args& a, Name name) {  // find, rfind, index, count
  if (!pos(a, 0)) fail(name + " takes at least 1 argument");
  const std::string& sub = arg_str(*pos(a, 0), name.c_str());
  charge_bytes_scanned(s.size());
  if (name == "count") {
    if (sub.empty()) return Value(static_cast<int64_t>(code_point_count(s) + 1));
    int64_t n = 0;
    for (size_t i = s.find(sub); i != std::string::npos; i = s.find(sub, i + sub.size())) ++n;
    return Value(n);
  }
  size_t at = name == "rfind" ? s.rfind(sub) : s.find(sub);
  if (at == std::string::npos) {
    if (name == "index") fail("substring not found");
    return Value(int64_t{-1});
  }
  return Value(static_cast<int64_t>(code_point_count(std::string_view(s).substr(0, at))));
}

Value s_join(const std::string& s, Args& a, Name) {
  if (!pos(a, 0)) fail("join takes exactly one argument");
  StringBuilder out("output of 'join'");
  bool first = true;
  for (const Value& v : iterate(*pos(a, 0))) {
    if (!first) out += s;
    first = false;
    out += arg_str(v, "join");
  }
  return Value(out.take());
}

Value s_splitlines(const std::string& s, Args&, Name) {
  std::vector<Value> out;
  py_splitlines(s, [&](std::string_view l) { out.emplace_back(std::string(l)); });
  return make_list(std::move(out));
}

Value s_zfill(const std::string& s, Args& a, Name) {
  int64_t w = pos(a, 0) ? arg_int(*pos(a, 0), "zfill") : 0;
  size_t n = code_point_count(s);
  if (w <= static_cast<int64_t>(n)) return Value(s);
  StringBuilder o("output of 'zfill'");  // checks the width before the zeros are allocated
  size_t at = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  o.append(s.substr(0, at));
  o.append(static_cast<size_t>(w) - n, '0');
  o.append(std::string_view(s).substr(at));
  return Value(o.take());
}

Value s_is_class(const std::string& s, Args&, Name name) {  // isdigit, isalpha, isalnum, isspace
  using Class = bool (*)(unsigned char);
  const Class in_class = name == "isdigit"   ? +[](unsigned char c) { return std::isdigit(c) != 0; }
                         : name == "isalpha" ? +[](unsigned char c) { return std::isalpha(c) != 0; }
                         : name == "isalnum" ? +[](unsigned char c) { return std::isalnum(c) != 0; }
                                             : +[](unsigned char c) { return is_py_space(static_cast<char>(c)); };
  if (s.empty()) return Value(false);
  for (unsigned char c : s)
    if (!in_class(c)) return Value(false);
  return Value(true);
}

Value s_is_cased(const std::string& s, Args&, Name name) {  // islower, isupper
  bool cased = false, ok = true;
  for (unsigned char c : s) {
    if (std::islower(c)) {
      cased = true;
      ok = ok && name == "islower";
    }
    if (std::isupper(c)) {
      cased = true;
      ok = ok && name == "isupper";
    }
  }
  return Value(cased && ok);
}

using StrMethod = Value (*)(const std::string& s, Args& a, Name name);
constexpr auto kStrMethods = std::to_array<Named<StrMethod>>({
    {"capitalize", s_capitalize},
    {"count", s_find},
    {"endswith", s_affix},
    {"find", s_find},
    {"format", s_format},
    {"index", s_find},
    {"isalnum", s_is_class},
    {"isalpha", s_is_class},
    {"isdigit", s_is_class},
    {"islower", s_is_cased},
    {"isspace", s_is_class},
    {"isupper", s_is_cased},
    {"join", s_join},
    {"lower", s_lower},
    {"lstrip", s_strip},
    {"replace", s_replace},
    {"rfind", s_find},
    {"rsplit", s_split},
    {"rstrip", s_strip},
    {"split", s_split},
    {"splitlines", s_splitlines},
    {"startswith", s_affix},
    {"strip", s_strip},
    {"swapcase", s_swapcase},
    {"title", s_title},
    {"upper", s_upper},
    {"zfill", s_zfill},
});
static_assert(sorted_by_name(kStrMethods));

Value d_items(const DictObj& d, Args&, Name) {
  std::vector<Value> out;
  for (const auto& [k, v] : d.items) out.push_back(make_list({k, v}, true));
  return make_list(std::move(out));
}

Value d_keys(const DictObj& d, Args&, Name name) {  // keys, values
  std::vector<Value> out;
  for (const auto& [k, v] : d.items) out.push_back(name == "keys" ? k : v);
  return make_list(std::move(out));
}

Value d_get(const DictObj& d, Args& a, Name) {
  if (a.pos.empty()) fail("get expected at least 1 argument, got 0");
  const Value* v = d.find(a.pos[0]);
  if (v) return *v;
  return a.pos.size() > 1 ? a.pos[1] : Value(None{});
}

Value d_copy(const DictObj& d, Args&, Name) {
  Value c = make_dict();
  for (const auto& [k, v] : d.items) c.dict().append(k, v);
  return c;
}

using DictMethod = Value (*)(const DictObj& d, Args& a, Name name);
constexpr auto kDictMethods = std::to_array<Named<DictMethod>>({
    {"copy", d_copy},
    {"get", d_get},
    {"items", d_items},
    {"keys", d_keys},
    {"values", d_keys},
});
static_assert(sorted_by_name(kDictMethods));

Value l_index(const ListObj& l, Args& a, Name name) {  // index, count
  if (a.pos.empty()) fail(name + " expected 1 argument, got 0");
  int64_t n = 0;
  for (size_t i = 0; i < l.items.size(); ++i)
    if (equal(l.items[i], a.pos[0])) {
      if (name == "index") return Value(static_cast<int64_t>(i));
      ++n;
    }
  if (name == "index") fail(repr(a.pos[0]) + " is not in list");
  return Value(n);
}

Value l_copy(const ListObj& l, Args&, Name) { return make_list(l.items, l.tuple); }

using ListMethod = Value (*)(const ListObj& l, Args& a, Name name);
constexpr auto kListMethods = std::to_array<Named<ListMethod>>({
    {"copy", l_copy},
    {"count", l_index},
    {"index", l_index},
});
static_assert(sorted_by_name(kListMethods));

// obj.name as a callable: the method of `obj`'s type registered under `name`, bound to obj.
template <class Method>
Value bound(const Value& obj, const std::string& name, Method method) {
  return make_function(
      name,
      [obj, name, method](Args& a) -> Value {
        if constexpr (std::is_same_v<Method, StrMethod>)
          return method(obj.str(), a, name);
        else if constexpr (std::is_same_v<Method, DictMethod>)
          return method(obj.dict(), a, name);
        else
          return method(obj.list(), a, name);
      },
      &obj);
}

}  // namespace

Value string_method(const std::string& s, const std::string& name, Args& a) {
  if (StrMethod m = find_named(kStrMethods, name)) return m(s, a, name);
  fail("'str' object has no attribute '" + name + "'");
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined())
    fail(obj.undefined_name().empty() ? "'" + name + "' of an undefined value" : obj.undefined_name());
  auto missing = [&] {
    std::string hint(1, '\'');  // built piecewise: GCC 12 warns falsely on "lit" + std::string&&
    hint += type_name(obj);
    hint += " object' has no attribute '";
    hint += name;
    hint += '\'';
    return Value::undefined(std::move(hint));
  };
  if (obj.is_dict()) {
    const DictObj& d = obj.dict();
    if (!d.ns && !d.loop) {
      if (DictMethod m = find_named(kDictMethods, name)) return bound(obj, name, m);
      for (const char* u : kUnsafeDict)
        if (name == u) unsafe(name, obj);
    }
    const Value* v = d.find(Value(name));
    return v ? *v : missing();
  }
  if (obj.is_string()) {
    StrMethod m = find_named(kStrMethods, name);
    return m ? bound(obj, name, m) : missing();
  }
  if (obj.is_list() && !obj.list().generator) {
    if (ListMethod m = find_named(kListMethods, name)) return bound(obj, name, m);
    for (const char* u : kUnsafeList)
      if (name == u) unsafe(name, obj);
    return missing();
  }
  return missing();
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail(obj.undefined_name().empty() ? "item of an undefined value" : obj.undefined_name());
  if (obj.is_dict()) {
    const Value* v = obj.dict().find(key);
    if (v) return *v;
    if (key.is_string()) return get_attr(obj, key.str());
    return Value::undefined("'dict object' has no attribute " + repr(key));
  }
  if (obj.is_list() && obj.list().generator) return Value::undefined("'generator' object is not subscriptable");
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      const auto& items = obj.list().items;
      int64_t n = static_cast<int64_t>(items.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("list object has no element " + std::to_string(key.as_int()));
      return items[static_cast<size_t>(i)];
    }
    // Walked as code_points() would split it, but without building that index of a long string.
    const std::string& str = obj.str();
    charge_bytes_scanned(2 * str.size());  // counted, then walked
    int64_t n = 0;
    for (size_t at = 0; at < str.size(); at += base::utf8_sequence_size(str, at)) ++n;
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined("str object has no element " + std::to_string(key.as_int()));
    size_t at = 0;
    for (int64_t k = 0; k < i; ++k) at += base::utf8_sequence_size(str, at);
    return Value(str.substr(at, base::utf8_sequence_size(str, at)));
  }
  if (key.is_string()) return get_attr(obj, key.str());
  return Value::undefined(type_name(obj) + " object has no element " + repr(key));
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail(obj.undefined_name());
  auto opt = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;
    return arg_int(v, what);
  };
  std::optional<int64_t> a = opt(start, "slice start"), b = opt(stop, "slice stop"), c = opt(step, "slice step");
  int64_t st = c.value_or(1);
  if (st == 0) fail("slice step cannot be zero");
  if (obj.is_list() && obj.list().generator) return Value::undefined("'generator' object is not subscriptable");
  std::vector<std::string_view> cps;
  const std::vector<Value>* items = nullptr;
  int64_t n;
  bool ascii = false;  // then a code point is a byte, and no index of the string is built
  if (obj.is_string()) {
    const std::string& str = obj.str();
    charge_bytes_scanned(str.size());
    ascii = std::all_of(str.begin(), str.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x80; });
    if (!ascii) cps = code_points(str);
    n = static_cast<int64_t>(ascii ? str.size() : cps.size());
  } else if (obj.is_list() && !obj.list().generator) {
    items = &obj.list().items;
    n = static_cast<int64_t>(items->size());
  } else {  // Jinja2 slices with Python's own [], not its forgiving getitem
    fail(obj.is_dict() ? std::string("unhashable type: 'slice'")
                       : "'" + type_name(obj) + "' object is not subscriptable");
  }
  auto clamp = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) x += n;
    if (st > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  int64_t lo = clamp(a, st > 0 ? 0 : n - 1), hi = clamp(b, st > 0 ? n : -1);
  if (obj.is_string()) {
    if (ascii && st == 1)
      return Value(obj.str().substr(static_cast<size_t>(lo), static_cast<size_t>(std::max<int64_t>(hi - lo, 0))));
    StringBuilder out("slice of a string");
    for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) {
      if (ascii)
        out += obj.str()[static_cast<size_t>(i)];
      else
        out += cps[static_cast<size_t>(i)];
    }
    return Value(out.take());
  }
  std::vector<Value> out;
  for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) out.push_back((*items)[static_cast<size_t>(i)]);
  return make_list(std::move(out), obj.list().tuple);
}

Value as_list(const Value& v) {
  if (v.is_list() && !v.list().generator) return v;  // lists never change: no copy needed
  return make_list(iterate(v));
}

std::vector<Value> iterate(const Value& v) {
  if (v.is_undefined()) return {};
  if (v.is_list() && v.list().generator) {
    charge_work(v.list().items.size());
    return std::exchange(v.list().items, {});
  }
  if (v.is_list()) {
    charge_work(v.list().items.size());
    return v.list().items;
  }
  if (v.is_dict() && !v.dict().ns && !v.dict().loop) {
    charge_work(v.dict().items.size());
    std::vector<Value> out;
    for (const auto& [k, x] : v.dict().items) out.push_back(k);
    return out;
  }
  if (v.is_string()) {
    // Checked as the list of characters it becomes, before the index of its code points is built.
    check_value_bytes(kObjectOverhead + code_point_count(v.str()) * sizeof(Value),
                      "list of the characters of a string");
    std::vector<Value> out;
    for (auto cp : code_points(v.str())) out.emplace_back(std::string(cp));
    return out;
  }
  fail("'" + type_name(v) + "' object is not iterable");
}

size_t length(const Value& v) {
  if (v.is_undefined()) return 0;
  if (v.is_string()) return code_point_count(v.str());
  if (v.is_list() && !v.list().generator) return v.list().items.size();
  if (v.is_dict() && !v.dict().ns && !v.dict().loop) return v.dict().items.size();
  fail("object of type '" + type_name(v) + "' has no len()");
}

bool contains(const Value& c, const Value& item) {
  if (c.is_undefined()) return false;
  if (c.is_string()) {
    if (!item.is_string()) fail("'in <string>' requires string as left operand, not " + type_name(item));
    charge_bytes_scanned(c.str().size());
    return c.str().find(item.str()) != std::string::npos;
  }
  if (c.is_list() && c.list().generator) {  // consumes up to the match, as Python's `in` does
    auto& items = c.list().items;
    charge_work(items.size());  // the erase below moves what is left
    for (size_t i = 0; i < items.size(); ++i)
      if (equal(items[i], item)) {
        items.erase(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(i) + 1);
        return true;
      }
    items.clear();
    return false;
  }
  if (c.is_list()) {
    for (const auto& x : c.list().items)
      if (equal(x, item)) return true;
    return false;
  }
  if (c.is_dict()) {
    if (item.is_dict() || (item.is_list() && !item.list().tuple)) fail("unhashable type: '" + type_name(item) + "'");
    return c.dict().find(item) != nullptr;
  }
  fail("argument of type '" + type_name(c) + "' is not iterable");
}

void add_globals(std::vector<std::pair<std::string, Value>>& g, const Options& options) {
  g.emplace_back("range", make_function("range", [](Args& a) -> Value {
                   if (a.pos.empty() || a.pos.size() > 3)
                     fail("range expected 1 to 3 arguments, got " + std::to_string(a.pos.size()));
                   int64_t start = 0, stop, step = 1;
                   if (a.pos.size() == 1)
                     stop = arg_int(a.pos[0], "range");
                   else {
                     start = arg_int(a.pos[0], "range");
                     stop = arg_int(a.pos[1], "range");
                   }
                   if (a.pos.size() == 3) step = arg_int(a.pos[2], "range");
                   if (step == 0) fail("range() arg 3 must not be zero");
                   std::vector<Value> out;
                   for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
                     if (static_cast<int64_t>(out.size()) >= kMaxRange)
                       fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
                     out.emplace_back(i);
                   }
                   return make_list(std::move(out));
                 }));
  auto make_ns = [](bool ns) {
    return [ns](Args& a) -> Value {
      Value d = make_dict();
      d.dict().ns = ns;
      for (const auto& p : a.pos) {
        if (!p.is_dict()) fail(std::string(ns ? "namespace" : "dict") + "() positional argument must be a mapping");
        for (const auto& [k, v] : p.dict().items) d.dict().set(k, v);
      }
      for (const auto& [k, v] : a.kw) d.dict().set(Value(k), v);
      return d;
    };
  };
  g.emplace_back("namespace", make_function("namespace", make_ns(true)));
  g.emplace_back("dict", make_function("dict", make_ns(false)));
  g.emplace_back("raise_exception", make_function("raise_exception", [](Args& a) -> Value {
                   fail(a.pos.empty() ? std::string("raise_exception() called") : to_str(a.pos[0]));
                 }));
  auto now = options.now;
  g.emplace_back("strftime_now", make_function("strftime_now", [now](Args& a) -> Value {
                   if (a.pos.empty()) fail("strftime_now() takes a format");
                   const std::string& fmt = arg_str(a.pos[0], "strftime_now");
                   std::tm tm{};
                   if (now) {
                     tm = now();
                   } else {
                     std::time_t t = std::time(nullptr);
                     localtime_r(&t, &tm);
                   }
                   char buf[512];
                   size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
                   if (n == 0 && !fmt.empty()) fail("strftime_now: format '" + fmt + "' produced nothing or too much");
                   return Value(std::string(buf, n));
                 }));
}

}  // namespace skainet::chat
