#include "chat/value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "skainet/core/utf8.hpp"

namespace skainet::chat {

void fail(std::string message) { throw ValueError{std::move(message)}; }

Value::Value(std::string s) {
  check_value_bytes(s.size(), "string");
  auto o = std::make_shared<StrObj>();
  o->charge.grow(kObjectOverhead + s.size(), "string");
  o->s = std::move(s);
  v = std::shared_ptr<const StrObj>(std::move(o));
}

std::string Value::kind_name() const {
  std::string s = type_name(*this);
  s.insert(s.begin(), '\'');
  s += '\'';
  return s;
}

const Value* DictObj::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (equal(k, key)) return &v;
  return nullptr;
}

int value_depth(const Value& v) {
  if (v.is_list()) return v.list().depth;
  if (v.is_dict()) return v.dict().depth;
  if (v.is_function()) return v.function().depth;
  return 0;
}

bool holds_namespace(const Value& v) {
  if (v.is_list()) return v.list().has_ns;
  if (v.is_dict()) return v.dict().ns || v.dict().has_ns;
  if (v.is_function()) return v.function().has_ns;
  return false;
}

static void check_value_depth(int depth) {
  if (depth > kMaxValueDepth) fail("value nests deeper than " + std::to_string(kMaxValueDepth) + " levels");
}

void DictObj::set(Value key, Value value) {
  if (ns && holds_namespace(value)) fail("a namespace cannot hold a namespace");
  for (auto& [k, v] : items)
    if (equal(k, key)) {
      int d = std::max(depth, 1 + value_depth(value));
      check_value_depth(d);
      depth = d;
      has_ns = has_ns || holds_namespace(value);
      v = std::move(value);
      return;
    }
  append(std::move(key), std::move(value));
}

void DictObj::append(Value key, Value value) {
  if (ns && holds_namespace(value)) fail("a namespace cannot hold a namespace");
  int d = std::max({depth, 1 + value_depth(key), 1 + value_depth(value)});
  check_value_depth(d);
  constexpr uint64_t item_bytes = sizeof(std::pair<Value, Value>);
  check_value_bytes(kObjectOverhead + (items.size() + 1) * item_bytes, "dict");
  charge.grow(charge.bytes() == 0 ? kObjectOverhead + item_bytes : item_bytes, "dict");
  depth = d;
  has_ns = has_ns || holds_namespace(key) || holds_namespace(value);
  items.emplace_back(std::move(key), std::move(value));
}

const Value* Args::kwarg(std::string_view name) const {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

Value make_list(std::vector<Value> items, bool tuple) {
  const uint64_t bytes = kObjectOverhead + items.size() * sizeof(Value);
  check_value_bytes(bytes, "list");
  auto l = std::make_shared<ListObj>();
  l->charge.grow(bytes, "list");
  for (const auto& v : items) {
    l->depth = std::max(l->depth, 1 + value_depth(v));
    l->has_ns = l->has_ns || holds_namespace(v);
  }
  check_value_depth(l->depth);
  l->items = std::move(items);
  l->tuple = tuple;
  return Value(std::move(l));
}

Value make_dict() { return Value(std::make_shared<DictObj>()); }

Value make_function(std::string name, std::function<Value(Args&)> fn, const Value* holds) {
  auto f = std::make_shared<Function>(Function{std::move(name), std::move(fn)});
  if (holds) {
    f->depth = 1 + value_depth(*holds);
    check_value_depth(f->depth);
    f->has_ns = holds_namespace(*holds);
  }
  return Value(std::move(f));
}

bool truthy(const Value& v) {
  return std::visit(
      [](const auto& x) -> bool {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Undefined> || std::is_same_v<T, None>)
          return false;
        else if constexpr (std::is_same_v<T, bool>)
          return x;
        else if constexpr (std::is_same_v<T, int64_t>)
          return x != 0;
        else if constexpr (std::is_same_v<T, double>)
          return x != 0.0;
        else if constexpr (std::is_same_v<T, std::shared_ptr<const StrObj>>)
          return !x->s.empty();
        else if constexpr (std::is_same_v<T, std::shared_ptr<ListObj>>)
          return x->generator || !x->items.empty();
        else if constexpr (std::is_same_v<T, std::shared_ptr<DictObj>>)
          return x->ns || x->loop || !x->items.empty();
        else
          return true;
      },
      v.v);
}

bool equal(const Value& a, const Value& b) {
  charge_work(1);  // unique, `in`, index, dict lookups and == on lists all come through here
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.v.index() != b.v.index()) return false;
  if (a.is_undefined() || a.is_none()) return true;
  if (a.is_string()) {
    if (a.str().size() != b.str().size()) return false;
    charge_bytes_scanned(a.str().size());
    return a.str() == b.str();
  }
  if (a.is_list()) {
    const auto& x = a.list();
    const auto& y = b.list();
    if (x.generator || y.generator) return &x == &y;
    if (x.tuple != y.tuple || x.items.size() != y.items.size()) return false;
    for (size_t i = 0; i < x.items.size(); ++i)
      if (!equal(x.items[i], y.items[i])) return false;
    return true;
  }
  if (a.is_dict()) {
    const auto& x = a.dict();
    const auto& y = b.dict();
    if (&x == &y) return true;
    if (x.ns || y.ns || x.loop || y.loop || x.items.size() != y.items.size()) return false;
    for (const auto& [k, v] : x.items) {
      const Value* o = y.find(k);
      if (!o || !equal(v, *o)) return false;
    }
    return true;
  }
  return &a.function() == &b.function();
}

uint64_t hash_value(const Value& v) {
  charge_work(1);
  auto mix = [](uint64_t h, uint64_t x) { return (h ^ x) * 0x100000001b3ull + (h >> 29); };
  if (v.is_number()) {  // 1, 1.0 and True are equal, so they hash alike
    if (!v.is_float()) return std::hash<int64_t>{}(v.as_int());
    double d = v.as_double();
    if (d == std::trunc(d) && d >= -0x1p63 && d < 0x1p63) return std::hash<int64_t>{}(static_cast<int64_t>(d));
    return std::hash<double>{}(d);
  }
  if (v.is_string()) {
    charge_bytes_scanned(v.str().size());
    return std::hash<std::string_view>{}(v.str());
  }
  if (v.is_list()) {
    if (v.list().generator) return std::hash<const void*>{}(&v.list());
    uint64_t h = v.list().items.size();
    for (const Value& x : v.list().items) h = mix(h, hash_value(x));
    return h;
  }
  if (v.is_dict()) return v.dict().items.size();  // equal dicts have equal sizes
  if (v.is_function()) return std::hash<const void*>{}(&v.function());
  return v.v.index();  // None, Undefined
}

int compare(const Value& a, const Value& b) {
  charge_work(1);  // sort, min, max and dictsort come through here
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    charge_bytes_scanned(std::min(a.str().size(), b.str().size()));
    int c = a.str().compare(b.str());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.list().tuple == b.list().tuple) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equal(x[i], y[i])) return compare(x[i], y[i]);
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  fail("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

std::string type_name(const Value& v) {
  switch (v.v.index()) {
    case 0: return "Undefined";
    case 1: return "NoneType";
    case 2: return "bool";
    case 3: return "int";
    case 4: return "float";
    case 5: return "str";
    case 6: return v.list().generator ? "generator" : v.list().tuple ? "tuple" : "list";
    case 7: return v.dict().ns ? "Namespace" : (v.dict().loop ? "LoopContext" : "dict");
    default: return "function";
  }
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // "-d.ddde+XX" -> sign, digits, decimal exponent
  bool neg = sci[0] == '-';
  size_t epos = sci.find('e');
  std::string mant = sci.substr(neg ? 1 : 0, epos - (neg ? 1 : 0));
  int exp = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out = neg ? "-" : "";
  if (exp >= -5 + 1 && exp < 16) {  // Python's repr: fixed notation for 1e-4 <= |d| < 1e16
    if (exp < 0) {
      out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char e[16];
  std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return out + e;
}

std::string html_escape(std::string_view s) {
  StringBuilder out("escaped string");
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out.take();
}

static void repr_string(StringBuilder& out, const std::string& s) {
  char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  out += q;
  for (unsigned char c : s) {
    if (c == q || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else
      out += static_cast<char>(c);
  }
  out += q;
}

// One builder for the whole value: a list repeating one long string is checked as it grows, not after
// each item's text was built.
static void repr_into(StringBuilder& out, const Value& v) {
  charge_work(1);
  if (v.is_undefined())
    out += "Undefined";
  else if (v.is_string())
    repr_string(out, v.str());
  else if (v.is_list()) {
    const auto& l = v.list();
    if (l.generator) {
      out += "<generator object>";
      return;
    }
    out += l.tuple ? "(" : "[";
    for (size_t i = 0; i < l.items.size(); ++i) {
      if (i) out += ", ";
      repr_into(out, l.items[i]);
    }
    if (l.tuple && l.items.size() == 1) out += ",";
    out += l.tuple ? ")" : "]";
  } else if (v.is_dict()) {
    const auto& d = v.dict();
    out += d.ns ? "<Namespace {" : "{";
    for (size_t i = 0; i < d.items.size(); ++i) {
      if (i) out += ", ";
      repr_into(out, d.items[i].first);
      out += ": ";
      repr_into(out, d.items[i].second);
    }
    out += d.ns ? "}>" : "}";
  } else {
    out += to_str(v);
  }
}

std::string repr(const Value& v) {
  StringBuilder out("repr of a value");
  repr_into(out, v);
  return out.take();
}

std::string to_str(const Value& v) {
  return std::visit(
      [&](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Undefined>)
          return "";
        else if constexpr (std::is_same_v<T, None>)
          return "None";
        else if constexpr (std::is_same_v<T, bool>)
          return x ? "True" : "False";
        else if constexpr (std::is_same_v<T, int64_t>)
          return std::to_string(x);
        else if constexpr (std::is_same_v<T, double>)
          return float_repr(x);
        else if constexpr (std::is_same_v<T, std::shared_ptr<const StrObj>>)
          return x->s;
        else if constexpr (std::is_same_v<T, std::shared_ptr<Function>>)
          return "<function " + x->name + ">";
        else
          return repr(v);
      },
      v.v);
}

std::vector<std::string_view> code_points(std::string_view s) {
  const size_t n = code_point_count(s);
  check_value_bytes(n * sizeof(std::string_view), "code point index of a string");
  std::vector<std::string_view> out;
  out.reserve(n);
  for (size_t i = 0; i < s.size();) {
    size_t n = base::utf8_sequence_size(s, i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

size_t code_point_count(std::string_view s) {
  charge_bytes_scanned(s.size());
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += base::utf8_sequence_size(s, i)) ++n;
  return n;
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value(None{});
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      // Above INT64_MAX: Python keeps the exact int, which int64 cannot; the nearest float is the
      // closest we hold, where a cast would wrap 2**64-1 to -1.
      uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      check_value_bytes(j.size() * sizeof(Value), "list");
      std::vector<Value> items;
      for (const auto& e : j) items.push_back(from_json(e));
      return make_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = make_dict();
      for (const auto& [k, e] : j.items()) d.dict().append(Value(k), from_json(e));  // JSON keys are unique
      return d;
    }
    default: fail("unsupported JSON value of type " + std::string(j.type_name()));
  }
}

static void json_string(StringBuilder& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    char b[16];
    if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else if (c >= 0x80 && ensure_ascii) {
      const size_t n = base::utf8_sequence_size(s, i);
      uint32_t cp = base::decode_utf8(s, i, n);
      i += n - 1;
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
      } else {
        std::snprintf(b, sizeof b, "\\u%04x", cp);
      }
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

static void json_dump(StringBuilder& out, const Value& v, int indent, int level, bool ensure_ascii,
                      std::string_view item_sep, std::string_view key_sep, bool sort_keys) {
  auto newline = [&](int lvl) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(lvl), ' ');
  };
  if (level > 200) fail("tojson: nesting deeper than 200");
  charge_work(1);
  if (v.is_none())
    out += "null";
  else if (v.is_bool())
    out += std::get<bool>(v.v) ? "true" : "false";
  else if (v.is_int())
    out += std::to_string(v.as_int());
  else if (v.is_float()) {
    double d = v.as_double();
    out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : float_repr(d);
  } else if (v.is_string())
    json_string(out, v.str(), ensure_ascii);
  else if (v.is_list() && !v.list().generator) {
    const auto& items = v.list().items;
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += item_sep;
      newline(level + 1);
      json_dump(out, items[i], indent, level + 1, ensure_ascii, item_sep, key_sep, sort_keys);
    }
    newline(level);
    out += ']';
  } else if (v.is_dict() && !v.dict().loop) {
    std::vector<const std::pair<Value, Value>*> items;
    for (const auto& kv : v.dict().items) items.push_back(&kv);
    if (items.empty()) {
      out += "{}";
      return;
    }
    auto key_text = [](const Value& k) -> std::string {
      if (k.is_string()) return k.str();
      if (k.is_none()) return "null";
      if (k.is_bool()) return std::get<bool>(k.v) ? "true" : "false";
      if (k.is_int() || k.is_float()) return to_str(k);
      fail("keys must be str, int, float, bool or None, not " + type_name(k));
    };
    if (sort_keys)
      std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return compare(a->first, b->first) < 0; });
    out += '{';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += item_sep;
      newline(level + 1);
      json_string(out, key_text(items[i]->first), ensure_ascii);
      out += key_sep;
      json_dump(out, items[i]->second, indent, level + 1, ensure_ascii, item_sep, key_sep, sort_keys);
    }
    newline(level);
    out += '}';
  } else {
    fail("Object of type " + type_name(v) + " is not JSON serializable");
  }
}

std::string to_json(const Value& v, int indent, bool ensure_ascii, std::string_view item_sep, std::string_view key_sep,
                    bool sort_keys) {
  StringBuilder out("output of 'tojson'");
  json_dump(out, v, indent, 0, ensure_ascii, item_sep, key_sep, sort_keys);
  return out.take();
}

}  // namespace skainet::chat
