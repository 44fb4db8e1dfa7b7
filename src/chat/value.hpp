// Values of the template language: Python's object model cut down to what chat templates touch.
// Lists and dicts are shared by reference, as in Python, so `ns.x = ...` and aliasing behave alike.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/budget.hpp"

namespace skainet::chat {

struct Value;
struct StrObj;
struct ListObj;
struct DictObj;
struct Function;
struct Args;

// Raised by value operations; the evaluator adds the line and column.
struct ValueError {
  std::string message;
};
[[noreturn]] void fail(std::string message);

struct Undefined {
  std::string name;
};  // Jinja2's default Undefined: empty, falsy, iterable as empty
struct None {};

struct Value {
  // Strings are shared too, but never change: copying a value (a variable read, an argument, an item)
  // costs no copy of its bytes, and a string is charged to the render's budget once, where it is built.
  using Storage = std::variant<Undefined, None, bool, int64_t, double, std::shared_ptr<const StrObj>,
                               std::shared_ptr<ListObj>, std::shared_ptr<DictObj>, std::shared_ptr<Function>>;
  Storage v;
  bool markup = false;  // a string marked safe (MarkupSafe's Markup): `+` escapes the plain side

  Value() : v(Undefined{}) {}
  Value(None) : v(None{}) {}
  Value(bool b) : v(b) {}
  Value(int i) : v(int64_t{i}) {}
  Value(int64_t i) : v(i) {}
  Value(double d) : v(d) {}
  Value(std::string s);  // checked against Limits::max_value_bytes and charged; defined in value.cpp
  Value(const char* s) : Value(std::string(s)) {}
  Value(std::shared_ptr<ListObj> l) : v(std::move(l)) {}
  Value(std::shared_ptr<DictObj> d) : v(std::move(d)) {}
  Value(std::shared_ptr<Function> f) : v(std::move(f)) {}
  static Value undefined(std::string name) {
    Value x;
    x.v = Undefined{std::move(name)};
    return x;
  }

  bool is_undefined() const { return std::holds_alternative<Undefined>(v); }
  bool is_none() const { return std::holds_alternative<None>(v); }
  bool is_bool() const { return std::holds_alternative<bool>(v); }
  bool is_int() const { return std::holds_alternative<int64_t>(v); }
  bool is_float() const { return std::holds_alternative<double>(v); }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return std::holds_alternative<std::shared_ptr<const StrObj>>(v); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<ListObj>>(v); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<DictObj>>(v); }
  bool is_function() const { return std::holds_alternative<std::shared_ptr<Function>>(v); }

  // These fail with a ValueError (never std::bad_variant_access) on a value of another type.
  const std::string& str() const;
  int64_t as_int() const {
    if (is_bool()) return int64_t{std::get<bool>(v)};
    if (!is_int()) fail("expected an integer, got " + kind_name());
    return std::get<int64_t>(v);
  }
  double as_double() const {
    if (is_float()) return std::get<double>(v);
    if (!is_int() && !is_bool()) fail("expected a number, got " + kind_name());
    return static_cast<double>(as_int());
  }
  std::string kind_name() const;
  ListObj& list() const { return *std::get<std::shared_ptr<ListObj>>(v); }
  DictObj& dict() const { return *std::get<std::shared_ptr<DictObj>>(v); }
  Function& function() const { return *std::get<std::shared_ptr<Function>>(v); }
  const std::string& undefined_name() const { return std::get<Undefined>(v).name; }
};

// Values nest at most this deep. repr, str, equal, compare, tojson and the destructors recurse over a
// value; bounding its depth where it is built (a list or dict is one deeper than its deepest item)
// is one check in make_list and DictObj::set instead of an iterative rewrite of each walk. Lists and
// non-namespace dicts do not change after they are built, so their depth stays true; a namespace
// may not hold another namespace (nor a value containing one), so no cycle or unbounded chain can
// be built through namespaces either.
constexpr int kMaxValueDepth = 500;
int value_depth(const Value& v);  // 0 for scalars
bool holds_namespace(const Value& v);

struct StrObj {
  std::string s;
  Charge charge;
};

inline const std::string& Value::str() const {
  if (!is_string()) fail("expected a string, got " + kind_name());
  return std::get<std::shared_ptr<const StrObj>>(v)->s;
}

struct ListObj {
  std::vector<Value> items;
  Charge charge;
  int depth = 1;
  bool has_ns = false;  // some item is, or holds, a namespace
  bool tuple = false;
  // What Jinja2's map/select/unique/items/batch/reverse return: always truthy, consumed by the
  // first iteration, not subscriptable, not JSON.
  bool generator = false;
};

struct DictObj {
  std::vector<std::pair<Value, Value>> items;  // insertion order, as Python dicts keep it; grown by set/append
  Charge charge;
  int depth = 1;
  bool has_ns = false;
  bool ns = false;    // a namespace(): the one object `set x.y =` may change
  bool loop = false;  // the `loop` variable of a for

  const Value* find(const Value& key) const;
  void set(Value key, Value value);
  void append(Value key, Value value);  // a key known not to be there yet
};

struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  const Value* kwarg(std::string_view name) const;
};

struct Function {
  std::string name;
  std::function<Value(Args&)> call;
  // A bound method (`d.items`, `l.copy`) holds its object: it counts as one level deeper than the
  // object, and as holding a namespace if the object does, so a chain of them is bounded like a list.
  int depth = 0;
  bool has_ns = false;
};

Value make_list(std::vector<Value> items, bool tuple = false);
Value make_dict();
// `holds`: the value a bound method keeps (its depth and namespaces count as the function's).
Value make_function(std::string name, std::function<Value(Args&)> fn, const Value* holds = nullptr);

// Python semantics.
bool truthy(const Value& v);
bool equal(const Value& a, const Value& b);
uint64_t hash_value(const Value& v);  // equal values hash alike
// <0, 0, >0; throws std::runtime_error-like TypeError text for unorderable pairs.
int compare(const Value& a, const Value& b);
std::string type_name(const Value& v);  // "str", "int", "NoneType", "list", "dict", ...
std::string to_str(const Value& v);     // str(v)
std::string repr(const Value& v);       // repr(v)
std::string float_repr(double d);
std::string html_escape(std::string_view s);  // MarkupSafe's escape: & < > " '

// UTF-8 code points: Python strings index by code point. A code point is what base::utf8_sequence_size
// says starts at a byte (a byte that starts no well-formed sequence is one of its own), so counts,
// indexes and slices of any string agree with each other.
std::vector<std::string_view> code_points(std::string_view s);
size_t code_point_count(std::string_view s);

Value from_json(const nlohmann::ordered_json& j);
// json.dumps(v, ensure_ascii, indent, separators, sort_keys); indent < 0 means None.
std::string to_json(const Value& v, int indent, bool ensure_ascii, std::string_view item_sep, std::string_view key_sep,
                    bool sort_keys);

}  // namespace skainet::chat
