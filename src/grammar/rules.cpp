#include "rules.hpp"

namespace skainet::grammar {

std::vector<std::span<const Element>> alternatives(std::span<const Element> rule) {
  std::vector<std::span<const Element>> out;
  size_t begin = 0;
  for (size_t i = 0; i < rule.size(); ++i) {
    if (rule[i].op != Op::Alt && rule[i].op != Op::End) continue;
    out.push_back(rule.subspan(begin, i - begin));
    if (rule[i].op == Op::End) break;
    begin = i + 1;
  }
  return out;
}

size_t after_char_class(std::span<const Element> elements, size_t pos) {
  ++pos;
  while (pos < elements.size() && (elements[pos].op == Op::CharRangeUpper || elements[pos].op == Op::CharAlt)) ++pos;
  return pos;
}

uint32_t GrammarBuilder::id_of(std::string_view name) {
  const auto [it, inserted] = ids_.try_emplace(std::string(name), static_cast<uint32_t>(rules_.size()));
  if (inserted) {
    rules_.emplace_back();
    names_.emplace_back(name);
    defined_.push_back(false);
  }
  return it->second;
}

uint32_t GrammarBuilder::define(std::string_view name, const std::function<void()>& on_duplicate) {
  const uint32_t id = id_of(name);
  if (defined_[id]) on_duplicate();
  defined_[id] = true;
  return id;
}

uint32_t GrammarBuilder::reference(std::string_view name) { return id_of(name); }

uint32_t GrammarBuilder::generated(std::string_view parent) {
  for (size_t n = rules_.size();; ++n) {
    const std::string name = std::string(parent) + "_" + std::to_string(n);
    if (ids_.count(name)) continue;
    const uint32_t id = id_of(name);
    defined_[id] = true;
    return id;
  }
}

void GrammarBuilder::set_rule(uint32_t id, std::vector<Element> elements) {
  elements_ += elements.size();
  if (elements_ > Grammar::kMaxElements)
    throw GrammarError("grammar too large: more than " + std::to_string(Grammar::kMaxElements) +
                       " elements once its repetitions are expanded");
  rules_[id] = std::move(elements);
}

// A rule is nullable when one of its alternatives is made of nullable rule references only.
std::vector<bool> GrammarBuilder::nullable_rules() const {
  std::vector<bool> nullable(rules_.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules_.size(); ++r) {
      if (nullable[r]) continue;
      for (std::span<const Element> alt : alternatives(rules_[r])) {
        bool all = true;
        for (const Element& e : alt) all = all && e.op == Op::RuleRef && nullable[e.value];
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

// Left recursion: a rule that can reach itself again before consuming a character. Its edges go to
// the rules an alternative may begin with (past nullable ones); a cycle among them is refused.
void GrammarBuilder::check_left_recursion() const {
  const std::vector<bool> nullable = nullable_rules();
  std::vector<std::vector<uint32_t>> first(rules_.size());
  for (size_t r = 0; r < rules_.size(); ++r)
    for (std::span<const Element> alt : alternatives(rules_[r]))
      for (const Element& e : alt) {
        if (e.op != Op::RuleRef) break;
        first[r].push_back(e.value);
        if (!nullable[e.value]) break;
      }
  enum : uint8_t { Unseen, Open, Done };
  std::vector<uint8_t> state(rules_.size(), Unseen);
  // Iterative depth-first search (a generated grammar may nest deeply).
  for (uint32_t start = 0; start < rules_.size(); ++start) {
    if (state[start] != Unseen) continue;
    std::vector<std::pair<uint32_t, size_t>> path{{start, 0}};
    state[start] = Open;
    while (!path.empty()) {
      auto& [rule, next] = path.back();
      if (next == first[rule].size()) {
        state[rule] = Done;
        path.pop_back();
        continue;
      }
      const uint32_t to = first[rule][next++];
      if (state[to] == Open)
        throw GrammarError("grammar rule '" + names_[to] + "' is left-recursive (it can reach itself through '" +
                           names_[rule] + "' before matching a character)");
      if (state[to] == Unseen) {
        state[to] = Open;
        path.push_back({to, 0});
      }
    }
  }
}

Grammar GrammarBuilder::build(std::string_view root) && {
  for (size_t r = 0; r < rules_.size(); ++r)
    if (!defined_[r]) throw GrammarError("grammar rule '" + names_[r] + "' is used but never defined");
  const auto it = ids_.find(std::string(root));
  if (it == ids_.end()) throw GrammarError("grammar has no '" + std::string(root) + "' rule to start from");
  check_left_recursion();
  Grammar g;
  g.root_ = it->second;
  g.elements_.reserve(elements_);
  for (size_t r = 0; r < rules_.size(); ++r) {
    g.rule_start_.push_back(static_cast<uint32_t>(g.elements_.size()));
    g.elements_.insert(g.elements_.end(), rules_[r].begin(), rules_[r].end());
  }
  g.names_ = std::move(names_);
  return g;
}

}  // namespace skainet::grammar
