// GBNF, llama.cpp's grammar dialect, parsed into compiled rules (grammar.hpp's Element layout).
//
//   root  ::= item ("," space item)*      # rules end at a newline outside parentheses
//   item  ::= [a-z]+ | "\"" [^"]* "\""     # literals, classes ([^...] negated), `.` any character
//   space ::= " "{0,4}                     # repetitions * + ? {m} {m,} {m,n}
//
// Groups and repetitions become rules of their own (named after the rule they appear in, "item_2"),
// so the matcher only ever sees sequences, alternatives and rule references.
#include <limits>

#include "rules.hpp"
#include "skainet/core/utf8.hpp"

namespace skainet::grammar {

namespace {

constexpr uint32_t kUnbounded = std::numeric_limits<uint32_t>::max();
constexpr uint32_t kMaxRepetition = 4096;

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) {}

  GrammarBuilder parse() {
    skip_space(true);
    while (pos_ < src_.size()) {
      parse_rule();
      skip_space(true);
    }
    return std::move(builder_);
  }

 private:
  std::string_view src_;
  size_t pos_ = 0;
  GrammarBuilder builder_;

  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < src_.size(); ++i) {
      if (src_[i] == '\n')
        ++line, column = 1;
      else
        ++column;
    }
    throw GrammarError("grammar line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + what);
  }
  bool at_end() const { return pos_ >= src_.size(); }
  char peek() const { return at_end() ? '\0' : src_[pos_]; }

  // Spaces, tabs and comments; newlines too where a rule may go on (inside parentheses, between rules).
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = src_[pos_];
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && src_[pos_] != '\n') ++pos_;
      } else {
        return;
      }
    }
  }

  std::string_view parse_name() {
    const size_t begin = pos_;
    while (!at_end() && is_word_char(src_[pos_])) ++pos_;
    if (pos_ == begin) fail("expected a rule name");
    return src_.substr(begin, pos_ - begin);
  }

  void parse_rule() {
    const std::string_view name = parse_name();
    skip_space(false);
    if (src_.substr(pos_, 3) != "::=") fail("expected '::=' after rule name '" + std::string(name) + "'");
    pos_ += 3;
    skip_space(true);
    const uint32_t id = builder_.define(name, [&] { fail("rule '" + std::string(name) + "' is defined twice"); });
    builder_.set_rule(id, parse_alternatives(name, false));
    if (!at_end() && peek() != '\n' && peek() != '\r')
      fail("expected the end of the line after rule '" + std::string(name) + "'");
  }

  std::vector<Element> parse_alternatives(std::string_view rule, bool nested) {
    std::vector<Element> out;
    parse_sequence(rule, nested, out);
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      out.push_back({Op::Alt, 0});
      parse_sequence(rule, nested, out);
    }
    out.push_back({Op::End, 0});
    return out;
  }

  void parse_sequence(std::string_view rule, bool nested, std::vector<Element>& out) {
    size_t last_symbol = out.size();  // where the symbol a repetition applies to begins
    while (!at_end()) {
      const char c = peek();
      if (c == '"') {
        last_symbol = out.size();
        parse_literal(out);
      } else if (c == '[') {
        last_symbol = out.size();
        parse_class(out);
      } else if (c == '.') {
        last_symbol = out.size();
        ++pos_;
        out.push_back({Op::CharAny, 0});
      } else if (is_word_char(c)) {
        last_symbol = out.size();
        out.push_back({Op::RuleRef, builder_.reference(parse_name())});
      } else if (c == '(') {
        ++pos_;
        skip_space(true);
        last_symbol = out.size();
        const uint32_t sub = builder_.generated(rule);
        builder_.set_rule(sub, parse_alternatives(rule, true));
        if (peek() != ')') fail("expected ')'");
        ++pos_;
        out.push_back({Op::RuleRef, sub});
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (last_symbol == out.size()) fail(std::string("'") + c + "' with nothing before it to repeat");
        const auto [min, max] = parse_repetition();
        repeat(rule, out, last_symbol, min, max);
        last_symbol = out.size();  // a repetition of a repetition needs parentheses
      } else if (c == '<') {
        fail("token references (<...>) are not supported");
      } else {
        break;
      }
      skip_space(nested);
    }
  }

  std::pair<uint32_t, uint32_t> parse_repetition() {
    const char c = src_[pos_++];
    if (c == '*') return {0, kUnbounded};
    if (c == '+') return {1, kUnbounded};
    if (c == '?') return {0, 1};
    skip_space(false);
    const uint32_t min = parse_count();
    uint32_t max = min;
    skip_space(false);
    if (peek() == ',') {
      ++pos_;
      skip_space(false);
      max = peek() == '}' ? kUnbounded : parse_count();
      skip_space(false);
    }
    if (peek() != '}') fail("expected '}' closing a repetition");
    ++pos_;
    if (max < min)
      fail("repetition {" + std::to_string(min) + "," + std::to_string(max) + "}: the maximum is below the minimum");
    return {min, max};
  }

  uint32_t parse_count() {
    const size_t begin = pos_;
    uint64_t n = 0;
    while (!at_end() && src_[pos_] >= '0' && src_[pos_] <= '9') {
      n = n * 10 + static_cast<uint64_t>(src_[pos_++] - '0');
      if (n > kMaxRepetition) fail("repetition count above " + std::to_string(kMaxRepetition));
    }
    if (pos_ == begin) fail("expected a number in a repetition");
    return static_cast<uint32_t>(n);
  }

  // symbol{min,max}: the symbol (made a rule of its own unless it is one reference) min times, then
  // `rest ::= symbol rest |` when unbounded, or max - min nested optionals `opt ::= symbol opt |`.
  void repeat(std::string_view rule, std::vector<Element>& out, size_t symbol_begin, uint32_t min, uint32_t max) {
    std::vector<Element> symbol(out.begin() + static_cast<std::ptrdiff_t>(symbol_begin), out.end());
    out.resize(symbol_begin);
    if (!(symbol.size() == 1 && symbol[0].op == Op::RuleRef)) {
      const uint32_t sub = builder_.generated(rule);
      symbol.push_back({Op::End, 0});
      builder_.set_rule(sub, std::move(symbol));
      symbol = {{Op::RuleRef, sub}};
    }
    for (uint32_t i = 0; i < min; ++i) out.push_back(symbol[0]);
    if (max == min) return;
    const uint32_t tail = builder_.generated(rule);
    if (max == kUnbounded) {
      builder_.set_rule(tail, {symbol[0], {Op::RuleRef, tail}, {Op::Alt, 0}, {Op::End, 0}});
    } else {
      uint32_t inner = tail;
      for (uint32_t i = min; i < max; ++i) {
        const uint32_t next = i + 1 < max ? builder_.generated(rule) : 0;
        if (i + 1 < max)
          builder_.set_rule(inner, {symbol[0], {Op::RuleRef, next}, {Op::Alt, 0}, {Op::End, 0}});
        else
          builder_.set_rule(inner, {symbol[0], {Op::Alt, 0}, {Op::End, 0}});
        inner = next;
      }
    }
    out.push_back({Op::RuleRef, tail});
  }

  // One character of a literal or class, escapes decoded; UTF-8 sequences become one code point.
  uint32_t parse_char() {
    if (at_end()) fail("unexpected end of grammar");
    if (src_[pos_] != '\\') {
      const size_t n = base::utf8_sequence_size(src_, pos_);
      const uint32_t cp = base::decode_utf8(src_, pos_, n);
      pos_ += n;
      return cp;
    }
    ++pos_;
    if (at_end()) fail("unexpected end of grammar after '\\'");
    const char e = src_[pos_++];
    switch (e) {
      case 'x': return parse_hex(2);
      case 'u': return parse_hex(4);
      case 'U': return parse_hex(8);
      case 't': return '\t';
      case 'r': return '\r';
      case 'n': return '\n';
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '/': return static_cast<uint8_t>(e);
      default: --pos_; fail(std::string("unknown escape '\\") + e + "'");
    }
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      int d = -1;
      if (c >= '0' && c <= '9')
        d = c - '0';
      else if (c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
      if (d < 0) fail("expected " + std::to_string(digits) + " hexadecimal digits");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    return v;
  }

  void parse_literal(std::vector<Element>& out) {
    ++pos_;  // the opening quote
    while (peek() != '"') {
      if (at_end() || peek() == '\n') fail("unterminated string literal");
      out.push_back({Op::Char, parse_char()});
    }
    ++pos_;
  }

  void parse_class(std::vector<Element>& out) {
    ++pos_;  // '['
    Op first = Op::Char;
    if (peek() == '^') ++pos_, first = Op::CharNot;
    bool any = false;
    while (peek() != ']') {
      if (at_end() || peek() == '\n') fail("unterminated character class");
      out.push_back({any ? Op::CharAlt : first, parse_char()});
      any = true;
      if (peek() == '-' && pos_ + 1 < src_.size() && src_[pos_ + 1] != ']') {
        ++pos_;
        const uint32_t upper = parse_char();
        if (upper < out.back().value) fail("character range with its end below its start");
        out.push_back({Op::CharRangeUpper, upper});
      }
    }
    if (!any) fail("empty character class");
    ++pos_;
  }
};

}  // namespace

Grammar Grammar::parse(std::string_view gbnf, std::string_view root) { return Parser(gbnf).parse().build(root); }

}  // namespace skainet::grammar
