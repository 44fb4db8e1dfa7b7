// The grammar's pushdown recognition, as llama.cpp does it: the text so far is a set of rule stacks
// (positions of the elements still to match, innermost on top, each top a character class; an empty
// stack: a whole sentence). A code point advances every stack whose top accepts it.
//
// Here each distinct stack set met is interned as a state of an automaton built while generating, so a
// code point from a state is worked out once (transitions cached), and so is a state's token mask.
// A mask is one walk over the vocabulary's trie, carrying the state (and a UTF-8 sequence begun but
// not finished: tokens may split a character) from a node to its children.
#include <algorithm>
#include <array>
#include <limits>
#include <set>
#include <unordered_map>

#include "rules.hpp"
#include "skainet/core/utf8.hpp"

namespace skainet::grammar {

namespace {

using Stack = std::vector<uint32_t>;
using StackSet = std::vector<Stack>;  // sorted, without duplicates

constexpr uint32_t kDead = 0;        // the empty stack set: nothing can follow
constexpr size_t kMaxStacks = 4096;  // per expansion: beyond it a grammar is refused as too ambiguous
constexpr uint32_t kUnknown = std::numeric_limits<uint32_t>::max();

// A UTF-8 sequence begun and not yet finished: the bits so far and the continuation bytes still due.
// Overlong forms (a code point in more bytes than it needs) are refused: the text would not be UTF-8.
struct Partial {
  uint32_t value = 0;
  uint8_t remaining = 0, length = 0;
  bool operator==(const Partial&) const = default;
  uint32_t smallest() const { return length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000; }
};

bool ends_alternative(const Element& e) { return e.op == Op::End || e.op == Op::Alt; }

}  // namespace

struct Matcher::Automaton {
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<const Vocabulary> vocab;
  std::span<const Element> el;
  StackSet start_set;

  std::vector<StackSet> sets;  // per state
  std::vector<uint8_t> accepting;
  std::vector<std::array<uint32_t, 128>> ascii;  // per state: next state per ASCII code point
  std::unordered_map<std::string, uint32_t> ids;
  std::unordered_map<uint64_t, uint32_t> wide;  // (state << 32 | code point) -> next, beyond ASCII
  std::unordered_map<uint64_t, std::vector<uint64_t>> masks;

  uint32_t state = kDead;
  Partial partial;

  Automaton(std::shared_ptr<const Grammar> g, std::shared_ptr<const Vocabulary> v)
      : grammar(std::move(g)), vocab(std::move(v)), el(grammar->elements()) {
    std::vector<Stack> work;
    push_alternatives({}, grammar->rule_start(grammar->root()), work);
    StackSet out;
    expand(std::move(work), out);
    start_set = normalized(std::move(out));
    restart(start_set);
  }

  // One stack per alternative of the rule at `rule_pos`, each `below` with the alternative's first
  // element on top (an empty alternative: `below` as it is).
  void push_alternatives(const Stack& below, uint32_t rule_pos, std::vector<Stack>& work) const {
    for (std::span<const Element> alt : alternatives(el.subspan(rule_pos))) {
      Stack s = below;
      if (!alt.empty()) s.push_back(static_cast<uint32_t>(alt.data() - el.data()));
      work.push_back(std::move(s));
    }
  }

  // Expands each stack until its top is a character class (or it is empty, a whole sentence): a rule
  // reference on top gives way to the rule's alternatives, its continuation kept below them. A stack
  // met twice is expanded once, so empty alternatives nested in each other (`s ::= "" | ""` twenty
  // times over) cost their distinct stacks, not every path to them; more than kMaxStacks of those is
  // a grammar too ambiguous to follow.
  void expand(std::vector<Stack> work, StackSet& out) const {
    std::set<Stack> seen;
    while (!work.empty()) {
      Stack s = std::move(work.back());
      work.pop_back();
      if (!seen.insert(s).second) continue;
      if (seen.size() > kMaxStacks)
        throw GrammarError("grammar: more than " + std::to_string(kMaxStacks) +
                           " ways to read the text at this point: the grammar is too ambiguous to follow");
      if (s.empty() || el[s.back()].op != Op::RuleRef) {
        out.push_back(std::move(s));
        continue;
      }
      const uint32_t pos = s.back();
      s.pop_back();
      if (!ends_alternative(el[pos + 1])) s.push_back(pos + 1);
      push_alternatives(s, grammar->rule_start(el[pos].value), work);
    }
  }

  static StackSet normalized(StackSet set) {
    std::sort(set.begin(), set.end());
    set.erase(std::unique(set.begin(), set.end()), set.end());
    return set;
  }

  // Whether the class at `pos` holds cp; sets `after` to the element past the class.
  bool matches(uint32_t pos, uint32_t cp, uint32_t& after) const {
    after = static_cast<uint32_t>(after_char_class(el, pos));
    if (el[pos].op == Op::CharAny) return true;
    bool found = false;
    for (uint32_t i = pos; i < after; ++i) {
      if (i + 1 < after && el[i + 1].op == Op::CharRangeUpper) {
        found = found || (el[i].value <= cp && cp <= el[i + 1].value);
        ++i;
      } else {
        found = found || el[i].value == cp;
      }
    }
    return found != (el[pos].op == Op::CharNot);
  }

  // Whether the class at `pos` holds some code point in [lo, hi].
  bool intersects(uint32_t pos, uint32_t lo, uint32_t hi) const {
    const uint32_t after = static_cast<uint32_t>(after_char_class(el, pos));
    if (el[pos].op == Op::CharAny) return true;
    const bool negated = el[pos].op == Op::CharNot;
    for (uint32_t x = lo;;) {  // negated: look for a point in [lo, hi] no listed range covers
      bool covered = false;
      for (uint32_t i = pos; i < after; ++i) {
        const uint32_t a = el[i].value;
        const uint32_t b = i + 1 < after && el[i + 1].op == Op::CharRangeUpper ? el[++i].value : a;
        if (!negated && a <= hi && b >= lo) return true;
        if (negated && a <= x && x <= b) covered = true, x = b + 1;
      }
      if (!negated) return false;
      if (!covered) return x <= hi;
      if (x > hi || x == 0) return false;
    }
  }

  uint32_t intern(StackSet set) {
    std::string key;
    for (const Stack& s : set) {
      key.append(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(uint32_t));
      key.append(4, '\xff');  // no element position is 0xffffffff: a separator
    }
    if (set.empty()) return kDead;
    const auto [it, inserted] = ids.try_emplace(std::move(key), static_cast<uint32_t>(sets.size()));
    if (inserted) {
      accepting.push_back(std::any_of(set.begin(), set.end(), [](const Stack& s) { return s.empty(); }));
      sets.push_back(std::move(set));
      ascii.emplace_back().fill(kUnknown);
    }
    return it->second;
  }

  // Forgets every state but `current` (bounded memory; the states are found again as they are met).
  void restart(StackSet current) {
    sets.assign(1, {});
    accepting.assign(1, 0);
    ascii.assign(1, {});
    ascii[0].fill(kDead);
    ids.clear();
    wide.clear();
    masks.clear();
    state = intern(std::move(current));
  }

  uint32_t advance(uint32_t from, uint32_t cp) {
    if (cp < 128) {
      if (ascii[from][cp] != kUnknown) return ascii[from][cp];
    } else if (const auto it = wide.find(uint64_t{from} << 32 | cp); it != wide.end()) {
      return it->second;
    }
    StackSet out;
    for (const Stack& s : sets[from]) {
      uint32_t after = 0;
      if (s.empty() || !matches(s.back(), cp, after)) continue;
      Stack t(s.begin(), s.end() - 1);
      if (!ends_alternative(el[after])) t.push_back(after);
      std::vector<Stack> work;
      work.push_back(std::move(t));
      expand(std::move(work), out);
    }
    const uint32_t next = intern(normalized(std::move(out)));
    if (cp < 128)
      ascii[from][cp] = next;  // `ascii` may have grown: index again
    else
      wide.emplace(uint64_t{from} << 32 | cp, next);
    return next;
  }

  // A UTF-8 sequence begun: can some code point it may still become follow in `from`?
  bool may_finish(uint32_t from, Partial p) const {
    const uint32_t lo = std::max(p.value << (6 * p.remaining), p.smallest());
    const uint32_t hi = std::min(((p.value + 1) << (6 * p.remaining)) - 1, base::kMaxCodePoint);
    if (lo > hi) return false;
    for (const Stack& s : sets[from])
      if (!s.empty() && intersects(s.back(), lo, hi)) return true;
    return false;
  }

  // One byte of text from (s, p); false where the grammar refuses it. A character begun is refused
  // as soon as no code point it may still become can follow, so a token walk and the trie walk stop
  // at the same byte (and meet the same transitions, all cached once a state's mask is known).
  bool step(uint32_t& s, Partial& p, uint8_t b) {
    if (p.remaining > 0) {
      if ((b & 0xC0) != 0x80) return false;
      p.value = p.value << 6 | (b & 0x3Fu);
      if (--p.remaining > 0) return may_finish(s, p);
      if (p.value < p.smallest() || p.value > base::kMaxCodePoint) return false;
      s = advance(s, p.value);
      p = {};
      return s != kDead;
    }
    if (b < 0x80) {
      s = advance(s, b);
      return s != kDead;
    }
    if ((b & 0xE0) == 0xC0)
      p = {b & 0x1Fu, 1, 2};
    else if ((b & 0xF0) == 0xE0)
      p = {b & 0x0Fu, 2, 3};
    else if ((b & 0xF8) == 0xF0)
      p = {b & 0x07u, 3, 4};
    else
      return false;
    return may_finish(s, p);
  }

  bool walk(std::string_view bytes, uint32_t& s, Partial& p) {
    for (const char c : bytes)
      if (!step(s, p, static_cast<uint8_t>(c))) return false;
    return true;
  }

  bool is_eog(int32_t id) const {
    const auto eog = vocab->end_of_generation();
    return std::find(eog.begin(), eog.end(), id) != eog.end();
  }
  bool complete() const { return accepting[state] && partial.remaining == 0; }

  bool allows(int32_t id) {
    if (is_eog(id)) return complete();
    uint32_t s = state;
    Partial p = partial;
    const std::string_view bytes = vocab->bytes(id);
    return !bytes.empty() && walk(bytes, s, p);
  }

  const std::vector<uint64_t>& mask() {
    const uint64_t key =
        uint64_t{state} << 32 | uint64_t{partial.value} << 5 | uint64_t{partial.length} << 2 | partial.remaining;
    if (const auto it = masks.find(key); it != masks.end()) return it->second;
    if (masks.size() >= kMaxMasks) masks.clear();
    std::vector<uint64_t> bits((static_cast<size_t>(vocab->size()) + 63) / 64, 0);
    walk_trie(bits);
    if (complete())
      for (const int32_t id : vocab->end_of_generation())
        bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
    return masks.emplace(key, std::move(bits)).first->second;
  }

  // Marks every token the grammar allows from the current state: a preorder walk of the trie, each
  // node stepped from its parent's state; a refused node's subtree is skipped whole.
  void walk_trie(std::vector<uint64_t>& bits) {
    struct Frame {
      uint32_t end, state;
      Partial partial;
    };
    std::vector<Frame> frames;
    const std::span<const Vocabulary::Node> nodes = vocab->trie();
    for (uint32_t i = 0; i < nodes.size();) {
      while (!frames.empty() && frames.back().end <= i) frames.pop_back();
      uint32_t s = frames.empty() ? state : frames.back().state;
      Partial p = frames.empty() ? partial : frames.back().partial;
      const Vocabulary::Node& node = nodes[i];
      if (!step(s, p, node.byte)) {
        i = node.subtree_end;
        continue;
      }
      for (const int32_t id : vocab->tokens_at(node)) bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
      frames.push_back({node.subtree_end, s, p});
      ++i;
    }
  }

  void accept(int32_t id) {
    if (is_eog(id)) return;
    const std::string_view bytes = vocab->bytes(id);
    if (bytes.empty() || !take(bytes))
      throw GrammarError("grammar: token " + std::to_string(id) + " was drawn but the grammar does not allow it here");
  }

  // Moves past `bytes` where the grammar allows them (false, and nothing changes, where it does not).
  bool take(std::string_view bytes) {
    uint32_t s = state;
    Partial p = partial;
    if (!walk(bytes, s, p)) return false;
    partial = p;
    if (sets.size() > kMaxStates || wide.size() > kMaxStates * 16)
      restart(sets[s]);
    else
      state = s;
    return true;
  }
};

Matcher::Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocabulary)
    : automaton_(std::make_unique<Automaton>(std::move(grammar), std::move(vocabulary))) {}

Matcher::~Matcher() = default;

void Matcher::mask(std::span<text::Candidate> by_id) {
  const std::vector<uint64_t>& bits = automaton_->mask();
  bool any = false;
  for (text::Candidate& c : by_id) {
    const size_t id = static_cast<size_t>(c.id);
    if (bits[id / 64] >> (id % 64) & 1)
      any = true;
    else
      c.logit = -std::numeric_limits<float>::infinity();
  }
  if (!any) throw GrammarError("grammar: no token of the vocabulary can continue the text here");
}

bool Matcher::allows(int32_t id) { return automaton_->allows(id); }
void Matcher::accept(int32_t id) { automaton_->accept(id); }
void Matcher::reset() {
  automaton_->partial = {};
  automaton_->state = automaton_->intern(automaton_->start_set);
}
bool Matcher::complete() const { return automaton_->complete(); }

bool Matcher::accept_text(std::string_view text) { return automaton_->take(text); }

}  // namespace skainet::grammar
