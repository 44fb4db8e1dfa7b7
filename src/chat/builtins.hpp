// Jinja2's attribute and item lookup, filters, tests, the Python methods templates call on strings,
// dicts and lists, and the globals (range, namespace, dict, raise_exception, strftime_now).
// Everything here reports failure through fail(); the evaluator adds the line and column.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/value.hpp"
#include "skainet/text/chat.hpp"

namespace skainet::chat {

// Jinja2's sandboxed getattr / getitem: a missing attribute or key is Undefined, an attribute of
// Undefined fails, and methods that change a list or dict are refused as the immutable sandbox does.
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// Items a for loop visits: list items, dict keys, string characters, nothing for Undefined.
std::vector<Value> iterate(const Value& v);
// The same items as a list value: a list itself (lists never change, so no copy), anything else built.
Value as_list(const Value& v);
size_t length(const Value& v);
bool contains(const Value& container, const Value& item);

// A name -> function table (filters, tests, the methods of str, dict and list). Each name is listed
// once, in its table; tables are sorted by name, which sorted_by_name checks at compile time, so a
// lookup is a binary search.
template <class Fn>
struct Named {
  std::string_view name;
  Fn fn;
};
template <class Fn, size_t N>
constexpr bool sorted_by_name(const std::array<Named<Fn>, N>& table) {
  for (size_t i = 1; i < N; ++i)
    if (!(table[i - 1].name < table[i].name)) return false;  // strictly: no name twice
  return true;
}
// The function registered under `name`, or nullptr.
template <class Fn, size_t N>
Fn find_named(const std::array<Named<Fn>, N>& table, std::string_view name) {
  auto it = std::lower_bound(table.begin(), table.end(), name,
                             [](const Named<Fn>& e, std::string_view n) { return e.name < n; });
  return it != table.end() && it->name == name ? it->fn : nullptr;
}

// Names this interpreter implements (read from the tables apply_filter and apply_test use);
// jinja2_builtin: a Jinja2 built-in it does not implement.
bool known_filter(std::string_view name);
bool known_test(std::string_view name);
bool jinja2_builtin_filter(std::string_view name);

Value apply_filter(const std::string& name, const Value& v, Args& args);
bool apply_test(const std::string& name, const Value& v, Args& args);

Value string_method(const std::string& s, const std::string& name, Args& args);

// Fills `globals` with range, namespace, dict, raise_exception, strftime_now.
void add_globals(std::vector<std::pair<std::string, Value>>& globals, const Options& options);

// Python's str methods used by several filters.
std::string py_strip(std::string_view s, const Value* chars, bool left, bool right);
std::string py_title_word(std::string_view s);  // first character upper, rest lower (ASCII)
std::string ascii_upper(std::string s);
std::string ascii_lower(std::string s);
void py_splitlines(std::string_view s, const std::function<void(std::string_view)>& line);

// Python's int(d) for a float, truncating toward zero, as an int64. NaN and infinity fail as Python
// raises (ValueError, OverflowError); a finite value outside int64 fails too, naming `what` and the
// value: Python's ints grow without bound, ours are int64, and a refusal is better than a wrong number.
int64_t float_to_int(double d, const std::string& what);

}  // namespace skainet::chat
