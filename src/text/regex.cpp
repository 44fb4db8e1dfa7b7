#include "text/regex.hpp"

#include <limits>
#include <string>

#include "skainet/core/base.hpp"
#include "text/unicode.hpp"

namespace skainet::text {

namespace uc = unicode;

namespace {

constexpr uint32_t kInf = std::numeric_limits<uint32_t>::max();

uint32_t cat_bit(uc::Category c) { return 1u << static_cast<unsigned>(c); }

// The \p{...} names the pre-tokenizer patterns use. The Unicode tables hold general categories only,
// so a letter's subcategory (Lu, Ll, ...) matches every letter: an approximation for the few patterns
// that split letters by case.
struct NamedCategory {
  std::string_view name;
  uc::Category category;
};
constexpr NamedCategory kCategoryNames[] = {
    {"L", uc::Category::Letter},  {"Lu", uc::Category::Letter},     {"Ll", uc::Category::Letter},
    {"Lt", uc::Category::Letter}, {"Lm", uc::Category::Letter},     {"Lo", uc::Category::Letter},
    {"N", uc::Category::Number},  {"P", uc::Category::Punctuation}, {"M", uc::Category::Mark},
    {"S", uc::Category::Symbol},  {"Z", uc::Category::Separator},   {"C", uc::Category::Control},
};

const uc::Category* category_named(std::string_view name) {
  for (const NamedCategory& c : kCategoryNames)
    if (c.name == name) return &c.category;
  return nullptr;
}

// A non-owning callable reference: continuations are passed down every match step, so they must not
// allocate.
class Cont {
 public:
  template <class F>
  Cont(const F& f) : obj_(&f), call_([](const void* o, size_t p) { return (*static_cast<const F*>(o))(p); }) {}
  bool operator()(size_t p) const { return call_(obj_, p); }

 private:
  const void* obj_;
  bool (*call_)(const void*, size_t);
};

}  // namespace

bool Regex::Class::contains(uint32_t cp) const noexcept {
  bool hit = false;
  for (const ClassItem& it : items) {
    bool m = false;
    switch (it.kind) {
      case ClassItem::Range: m = cp >= it.lo && cp <= it.hi; break;
      case ClassItem::Category: m = (it.lo & cat_bit(uc::category(cp))) != 0; break;
      case ClassItem::Space: m = uc::is_whitespace(cp); break;
      case ClassItem::Digit: m = cp >= '0' && cp <= '9'; break;
      case ClassItem::Word:
        m = cp == '_' || (cp >= '0' && cp <= '9') || ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z');
        break;
    }
    if (m != it.negated) {
      hit = true;
      break;
    }
  }
  return hit != negated;
}

class RegexParser {
 public:
  RegexParser(Regex& re, std::string_view pattern) : re_(re), pattern_(pattern), p_(uc::decode_lenient(pattern)) {}

  void parse() {
    re_.alternations_.emplace_back();
    parse_alternation(0);
    if (i_ != p_.size()) fail("unbalanced ')'");
  }

 private:
  Regex& re_;
  std::string_view pattern_;
  std::vector<uint32_t> p_;
  size_t i_ = 0;
  bool icase_ = false;

  [[noreturn]] void fail(const std::string& what) const {
    throw InvalidArgument("regex '" + std::string(pattern_) + "': " + what + " at code point " + std::to_string(i_));
  }
  bool at_end() const { return i_ >= p_.size(); }
  uint32_t peek(size_t k = 0) const { return i_ + k < p_.size() ? p_[i_ + k] : 0; }

  void parse_alternation(uint32_t index) {
    for (;;) {
      Regex::Sequence seq = parse_sequence();
      re_.alternations_[index].branches.push_back(std::move(seq));
      if (!at_end() && peek() == '|') {
        ++i_;
        continue;
      }
      return;
    }
  }

  Regex::Sequence parse_sequence() {
    Regex::Sequence seq;
    while (!at_end() && peek() != '|' && peek() != ')') {
      Regex::Term t = parse_atom();
      parse_quantifier(t);
      seq.push_back(t);
    }
    return seq;
  }

  uint32_t add_class(Regex::Class c) {
    re_.classes_.push_back(std::move(c));
    return static_cast<uint32_t>(re_.classes_.size() - 1);
  }

  void add_literal(Regex::Class& c, uint32_t cp) const {
    c.items.push_back({Regex::ClassItem::Range, false, cp, cp});
    if (icase_ && cp < 128 && ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z')) {
      const uint32_t other = cp ^ 0x20;
      c.items.push_back({Regex::ClassItem::Range, false, other, other});
    }
  }

  uint32_t parse_number() {
    if (at_end() || peek() < '0' || peek() > '9') fail("expected a number");
    uint64_t v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (p_[i_++] - '0');
      if (v > 100000) fail("repeat count too large");
    }
    return static_cast<uint32_t>(v);
  }

  void parse_quantifier(Regex::Term& t) {
    if (at_end()) return;
    const uint32_t c = peek();
    uint32_t mn = 1, mx = 1;
    if (c == '?')
      mn = 0, mx = 1;
    else if (c == '*')
      mn = 0, mx = kInf;
    else if (c == '+')
      mn = 1, mx = kInf;
    else if (c == '{') {
      ++i_;
      mn = parse_number();
      mx = mn;
      if (peek() == ',') {
        ++i_;
        mx = peek() == '}' ? kInf : parse_number();
      }
      if (peek() != '}') fail("expected '}'");
      if (mx < mn) fail("{m,n} with n < m");
    } else {
      return;
    }
    ++i_;
    if (t.kind != Regex::Term::Char && t.kind != Regex::Term::Group) fail("quantified assertion");
    if (!at_end() && (peek() == '?' || peek() == '+')) fail("lazy or possessive quantifiers are not supported");
    t.min = mn;
    t.max = mx;
  }

  // An escape after '\'; returns false when it was a single literal code point (in *cp).
  bool parse_escape(Regex::Class& c, uint32_t* cp) {
    if (at_end()) fail("trailing '\\'");
    const uint32_t e = p_[i_++];
    using I = Regex::ClassItem;
    switch (e) {
      case 's': c.items.push_back({I::Space, false, 0, 0}); return true;
      case 'S': c.items.push_back({I::Space, true, 0, 0}); return true;
      case 'd': c.items.push_back({I::Digit, false, 0, 0}); return true;
      case 'D': c.items.push_back({I::Digit, true, 0, 0}); return true;
      case 'w': c.items.push_back({I::Word, false, 0, 0}); return true;
      case 'W': c.items.push_back({I::Word, true, 0, 0}); return true;
      case 'p':
      case 'P': {
        if (peek() != '{') fail("expected '{' after \\p");
        ++i_;
        std::string name;
        while (!at_end() && peek() != '}') name += static_cast<char>(p_[i_++]);
        if (at_end()) fail("unterminated \\p{");
        ++i_;
        const uc::Category* cat = category_named(name);
        if (!cat) fail("unsupported category \\p{" + name + "}");
        c.items.push_back({I::Category, e == 'P', cat_bit(*cat), 0});
        return true;
      }
      case 'r': *cp = '\r'; return false;
      case 'n': *cp = '\n'; return false;
      case 't': *cp = '\t'; return false;
      case 'f': *cp = '\f'; return false;
      case 'v': *cp = '\v'; return false;
      case '0': *cp = 0; return false;
      default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '1' && e <= '9')) {
          fail(std::string("unsupported escape \\") + static_cast<char>(e));
        }
        *cp = e;
        return false;
    }
  }

  uint32_t parse_class() {
    Regex::Class c;
    if (peek() == '^') {
      c.negated = true;
      ++i_;
    }
    while (!at_end() && peek() != ']') {
      uint32_t lo = p_[i_++];
      if (lo == '\\') {
        if (parse_escape(c, &lo)) continue;
      }
      if (peek() == '-' && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        uint32_t hi = p_[i_++];
        if (hi == '\\') {
          Regex::Class dummy;
          if (parse_escape(dummy, &hi)) fail("class escape as a range end");
        }
        if (hi < lo) fail("range out of order");
        c.items.push_back({Regex::ClassItem::Range, false, lo, hi});
        if (icase_) fail("ranges under (?i) are not supported");
        continue;
      }
      add_literal(c, lo);
    }
    if (at_end()) fail("unterminated '['");
    ++i_;  // ']'
    return add_class(std::move(c));
  }

  Regex::Term parse_atom() {
    const uint32_t c = p_[i_++];
    Regex::Term t{};
    switch (c) {
      case '(': {
        Regex::Term::Kind kind = Regex::Term::Group;
        const bool saved_icase = icase_;
        if (peek() == '?') {
          if (peek(1) == ':')
            i_ += 2;
          else if (peek(1) == '=')
            kind = Regex::Term::LookAhead, i_ += 2;
          else if (peek(1) == '!')
            kind = Regex::Term::NegLookAhead, i_ += 2;
          else if (peek(1) == 'i' && peek(2) == ':')
            icase_ = true, i_ += 3;
          else
            fail("unsupported group kind");
        }
        const uint32_t index = static_cast<uint32_t>(re_.alternations_.size());
        re_.alternations_.emplace_back();
        parse_alternation(index);
        icase_ = saved_icase;
        if (at_end() || peek() != ')') fail("missing ')'");
        ++i_;
        t.kind = kind;
        t.index = index;
        return t;
      }
      case '[':
        t.kind = Regex::Term::Char;
        t.index = parse_class();
        return t;
      case '.': {
        Regex::Class any;
        any.negated = true;
        for (uint32_t nl : {uint32_t('\n'), uint32_t('\r'), 0x2028u, 0x2029u})
          any.items.push_back({Regex::ClassItem::Range, false, nl, nl});
        t.kind = Regex::Term::Char;
        t.index = add_class(std::move(any));
        return t;
      }
      case '^': t.kind = Regex::Term::Start; return t;
      case '$': t.kind = Regex::Term::End; return t;
      case '*':
      case '+':
      case '?':
      case '{':
      case ')':
      case ']':
      case '}': --i_; fail("unexpected '" + std::string(1, static_cast<char>(c)) + "'");
      default: {
        Regex::Class lit;
        uint32_t cp = c;
        if (c == '\\' && parse_escape(lit, &cp)) {
          // a class escape such as \s: lit already holds it
        } else {
          add_literal(lit, cp);
        }
        t.kind = Regex::Term::Char;
        t.index = add_class(std::move(lit));
        return t;
      }
    }
  }
};

class RegexMatcher {
 public:
  RegexMatcher(const Regex& re, std::span<const uint32_t> text)
      : re_(re), text_(text), stack_top_(reinterpret_cast<uintptr_t>(__builtin_frame_address(0))) {}

  bool alternation(uint32_t index, size_t pos, Cont k) const {
    for (const Regex::Sequence& seq : re_.alternations_[index].branches) {
      if (sequence(seq, 0, pos, k)) return true;
    }
    return false;
  }

 private:
  const Regex& re_;
  std::span<const uint32_t> text_;
  uintptr_t stack_top_;

  // Matching recurses once per quantified-group iteration whose width varies, so a long enough word
  // would overflow the stack; past this much stack it is refused instead (about ten thousand
  // iterations; worker threads have 8 MiB).
  static constexpr uintptr_t kStackBudget = 2u << 20;

  void check_stack(size_t pos) const {
    const uintptr_t here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    if (stack_top_ > here && stack_top_ - here > kStackBudget) {
      throw InvalidArgument("regex '" + re_.pattern_ + "': a piece of " + std::to_string(text_.size()) +
                            " code points needs more than " + std::to_string(kStackBudget >> 20) +
                            " MiB of matcher stack (at code point " + std::to_string(pos) + ")");
    }
  }

  bool sequence(const Regex::Sequence& seq, size_t i, size_t pos, Cont k) const {
    if (i == seq.size()) return k(pos);
    check_stack(pos);
    const Regex::Term& t = seq[i];
    auto next = [&](size_t p) { return sequence(seq, i + 1, p, k); };
    switch (t.kind) {
      case Regex::Term::Char: {
        const Regex::Class& c = re_.classes_[t.index];
        size_t n = 0;
        while (n < t.max && pos + n < text_.size() && c.contains(text_[pos + n])) ++n;
        if (n < t.min) return false;
        for (size_t m = n + 1; m-- > t.min;) {  // greedy: longest first
          if (next(pos + m)) return true;
        }
        return false;
      }
      case Regex::Term::Group:
        if (const uint32_t w = re_.widths_[t.index]; w != Regex::kVariableWidth && w > 0)
          return repeat_fixed(t, w, pos, Cont(next));
        return repeat(t, pos, 0, Cont(next));
      case Regex::Term::LookAhead:
      case Regex::Term::NegLookAhead: {
        auto accept = [](size_t) { return true; };
        const bool found = alternation(t.index, pos, Cont(accept));
        return found == (t.kind == Regex::Term::LookAhead) && next(pos);
      }
      case Regex::Term::Start: return pos == 0 && next(pos);
      case Regex::Term::End: return pos == text_.size() && next(pos);
    }
    return false;
  }

  // A group that always spans w code points (such as llama.cpp's ((?=[\p{L}])([^a-z]))*): its
  // iterations can be counted in a loop, as a character class's are, instead of one recursion each.
  bool repeat_fixed(const Regex::Term& t, uint32_t w, size_t pos, Cont k) const {
    auto accept = [](size_t) { return true; };
    uint32_t n = 0;
    while (n < t.max && pos + (size_t{n} + 1) * w <= text_.size() &&
           alternation(t.index, pos + size_t{n} * w, Cont(accept)))
      ++n;
    if (n < t.min) return false;
    for (uint32_t m = n + 1; m-- > t.min;) {  // greedy: most iterations first
      if (k(pos + size_t{m} * w)) return true;
    }
    return false;
  }

  bool repeat(const Regex::Term& t, size_t pos, uint32_t count, Cont k) const {
    if (count < t.max) {
      auto more = [&](size_t p) {
        if (p == pos) return false;  // an empty iteration would loop forever
        return repeat(t, p, count + 1, k);
      };
      if (alternation(t.index, pos, Cont(more))) return true;
    }
    return count >= t.min && k(pos);
  }
};

Regex::Regex(std::string_view pattern) : pattern_(pattern) {
  RegexParser(*this, pattern).parse();
  // Children are numbered after their parents, so one backward pass sees every group's children first.
  widths_.assign(alternations_.size(), kVariableWidth);
  for (size_t a = alternations_.size(); a-- > 0;) {
    uint32_t width = kVariableWidth;
    bool first = true;
    for (const Sequence& seq : alternations_[a].branches) {
      uint64_t w = 0;
      for (const Term& t : seq) {
        if (t.kind == Term::Char || t.kind == Term::Group) {
          const uint64_t one = t.kind == Term::Char ? 1 : widths_[t.index];
          if (t.min != t.max || one == kVariableWidth) {
            w = kVariableWidth;
            break;
          }
          w += one * t.min;
          if (w >= kVariableWidth) break;
        }
      }
      if (w >= kVariableWidth || (!first && w != width)) {
        width = kVariableWidth;
        break;
      }
      width = static_cast<uint32_t>(w);
      first = false;
    }
    widths_[a] = width;
  }
}

std::optional<size_t> Regex::match_at(std::span<const uint32_t> text, size_t start, bool allow_empty) const {
  RegexMatcher m(*this, text);
  size_t end = start;
  auto done = [&](size_t e) {
    if (e == start && !allow_empty) return false;
    end = e;
    return true;
  };
  if (m.alternation(0, start, Cont(done))) return end;
  return std::nullopt;
}

std::optional<Regex::Match> Regex::search(std::span<const uint32_t> text, size_t from) const {
  for (size_t start = from; start < text.size(); ++start) {
    if (std::optional<size_t> end = match_at(text, start, false)) return Match{start, *end};
  }
  return std::nullopt;
}

std::vector<size_t> Regex::split(std::span<const uint32_t> text, std::span<const size_t> pieces) const {
  std::vector<size_t> out;
  out.reserve(pieces.size());
  size_t base = 0;
  for (size_t len : pieces) {
    const std::span<const uint32_t> piece = text.subspan(base, len);
    // As std::regex_iterator walks (what llama.cpp splits with): an empty match still ends the gap
    // before it; after one, the next match must be non-empty at that point or start one further on.
    size_t last = 0, from = 0;
    bool after_empty = false;
    for (;;) {
      std::optional<Match> m;
      if (after_empty) {
        if (std::optional<size_t> end = match_at(piece, from, false))
          m = Match{from, *end};
        else
          ++from;
      }
      for (size_t start = from; !m && start <= len; ++start) {
        if (std::optional<size_t> end = match_at(piece, start, true)) m = Match{start, *end};
      }
      if (!m) break;
      if (m->begin > last) out.push_back(m->begin - last);
      if (m->end > m->begin) out.push_back(m->end - m->begin);  // an empty word would merge to nothing
      last = from = m->end;
      after_empty = m->end == m->begin;
    }
    if (last < len) out.push_back(len - last);
    base += len;
  }
  return out;
}

}  // namespace skainet::text
