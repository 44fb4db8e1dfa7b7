// A small backtracking regex engine over code points, for the pre-tokenizer patterns.
//
// std::regex cannot test Unicode categories. This engine takes the patterns the way llama.cpp writes
// them and matches with ECMAScript semantics (ordered alternation, greedy quantifiers with
// backtracking) with real categories in place of llama.cpp's collapsed-byte trick.
//
// Supported: literals (UTF-8), . [...] [^...] with ranges, \s \S \d \D \w \W \r \n \t \f \v,
// \p{L} \p{N} \p{P} \p{M} \p{S} \p{Z} \p{C} (and \p{Lu}..\p{Lo}, treated as \p{L}), \P{..}, escaped
// punctuation, (...) (?:...) (?i:...) (?=...) (?!...), ^ $, quantifiers ? * + {m} {m,} {m,n}.
// Anything else (lazy quantifiers, backreferences, lookbehind) is refused with InvalidArgument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace skainet::text {

class Regex {
 public:
  explicit Regex(std::string_view pattern);

  struct Match {
    size_t begin, end;
  };
  // Leftmost non-empty match in text[from, text.size()); lookaheads see up to text.size().
  std::optional<Match> search(std::span<const uint32_t> text, size_t from) const;

  // The end of the match that starts exactly at text[start], if any (an empty one only when allowed).
  std::optional<size_t> match_at(std::span<const uint32_t> text, size_t start, bool allow_empty) const;

  // One piece per match and one per stretch between matches, as llama.cpp's regex split does; the
  // pieces (lengths in code points) tile the text. Each input piece is searched on its own. A
  // zero-width match (a bare lookahead) splits where it matches.
  std::vector<size_t> split(std::span<const uint32_t> text, std::span<const size_t> pieces) const;

  struct ClassItem {
    enum Kind : uint8_t { Range, Category, Space, Digit, Word } kind;
    bool negated;     // \S, \P{..}, \D, \W
    uint32_t lo, hi;  // Range; Category: lo = category bit mask
  };
  struct Class {
    bool negated = false;
    std::vector<ClassItem> items;
    bool contains(uint32_t cp) const noexcept;
  };
  struct Term {
    enum Kind : uint8_t { Char, Group, LookAhead, NegLookAhead, Start, End } kind;
    uint32_t index = 0;         // Char: class; Group / lookaheads: alternation
    uint32_t min = 1, max = 1;  // quantifier
  };
  using Sequence = std::vector<Term>;
  struct Alternation {
    std::vector<Sequence> branches;
  };

 private:
  friend class RegexParser;
  friend class RegexMatcher;
  static constexpr uint32_t kVariableWidth = UINT32_MAX;
  std::string pattern_;
  std::vector<Class> classes_;
  std::vector<Alternation> alternations_;  // [0] is the whole pattern
  std::vector<uint32_t> widths_;           // per alternation: code points every match spans, or kVariableWidth
};

}  // namespace skainet::text
