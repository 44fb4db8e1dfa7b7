// Rules as the GBNF parser collects them, and their checks before they become a Grammar: every
// referenced rule defined, the root present, no left recursion (the matcher would expand it forever),
// a bounded size.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "skainet/text/grammar.hpp"

namespace skainet::grammar {

class GrammarBuilder {
 public:
  // A rule written in the grammar; on_duplicate is called (and must throw) when it already was.
  uint32_t define(std::string_view name, const std::function<void()>& on_duplicate);
  uint32_t reference(std::string_view name);    // a rule used, perhaps before its definition
  uint32_t generated(std::string_view parent);  // a group's or repetition's rule, "parent_3"
  void set_rule(uint32_t id, std::vector<Element> elements);
  Grammar build(std::string_view root) &&;

 private:
  uint32_t id_of(std::string_view name);
  void check_left_recursion() const;
  std::vector<bool> nullable_rules() const;

  std::vector<std::vector<Element>> rules_;
  std::vector<std::string> names_;
  std::vector<bool> defined_;
  std::unordered_map<std::string, uint32_t> ids_;
  size_t elements_ = 0;
};

// A rule's alternatives as spans of elements (without their Alt/End terminators).
std::vector<std::span<const Element>> alternatives(std::span<const Element> rule);
// The element after a character class that starts at `pos` (skipping its ranges and alternatives).
size_t after_char_class(std::span<const Element> elements, size_t pos);

}  // namespace skainet::grammar
