#include "chat/lexer.hpp"

#include <cstdio>

#include "skainet/text/chat.hpp"
#include "skainet/core/utf8.hpp"

namespace skainet::chat {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Jinja2 normalises the template's newlines to "\n" and drops one trailing newline.
std::string normalize(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out += src[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view src, LexOptions opt) : src_(normalize(src)), opt_(opt) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t open = find_open(pos_);
      std::string text = src_.substr(pos_, open - pos_);
      size_t text_pos = pos_;
      if (open == src_.size()) {
        emit_text(std::move(text), text_pos);
        break;
      }
      char kind = src_[open + 1];  // '{', '%' or '#'
      char sign = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (sign == '-') {
        size_t e = text.size();
        while (e > 0 && is_space(text[e - 1])) --e;
        text.resize(e);
      } else if (sign != '+' && opt_.lstrip_blocks && kind != '{') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size()) {
          bool blank = true;
          for (size_t i = l_pos; i < text.size(); ++i) blank = blank && is_space(text[i]);
          if (blank) text.resize(l_pos);
        }
      }
      emit_text(std::move(text), text_pos);
      pos_ = open + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#')
        comment(open);
      else if (kind == '%' && is_raw())
        raw(open);
      else
        tag(open, kind == '{');
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    tokens_.push_back(make(Tok::Eof, "", src_.size()));
    return std::move(tokens_);
  }

 private:
  size_t find_open(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return src_.size();
  }

  void position(size_t at, int& line, int& col) const {
    // Tokens are made in order, so advance a cursor instead of rescanning from the start.
    if (at < cursor_) {
      cursor_ = 0;
      cline_ = 1;
      ccol_ = 1;
    }
    for (; cursor_ < at && cursor_ < src_.size(); ++cursor_) {
      if (src_[cursor_] == '\n') {
        ++cline_;
        ccol_ = 1;
      } else
        ++ccol_;
    }
    line = cline_;
    col = ccol_;
  }

  Token make(Tok k, std::string text, size_t at) const {
    Token t{k, std::move(text)};
    position(at, t.line, t.column);
    return t;
  }

  [[noreturn]] void error(const std::string& msg, size_t at) const {
    int line, col;
    position(at, line, col);
    throw TemplateError(msg, line, col);
  }

  void emit_text(std::string text, size_t at) {
    if (!text.empty()) tokens_.push_back(make(Tok::Text, std::move(text), at));
  }

  // After a block or comment end: "-" eats all whitespace, otherwise trim_blocks eats one newline.
  void after_end(bool strip, bool plus, bool block) {
    if (strip) {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
    } else if (block && !plus && opt_.trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
  }

  void comment(size_t open) {
    size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) error("unterminated comment '{#'", open);
    bool strip = end > pos_ && src_[end - 1] == '-';
    pos_ = end + 2;
    after_end(strip, false, true);
  }

  bool is_raw() const {
    size_t p = pos_;
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    size_t q = p;
    while (q < src_.size() && is_space(src_[q])) ++q;
    return q < src_.size() && (src_[q] == '%' || src_[q] == '-' || src_[q] == '+') && (q > p || src_[q] != '_');
  }

  void raw(size_t open) {
    size_t p = src_.find("%}", pos_);
    if (p == std::string::npos) error("unterminated '{% raw %}' tag", open);
    bool strip = src_[p - 1] == '-';
    pos_ = p + 2;
    if (strip)
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
    // The body runs to the first {% endraw %}, whatever it contains.
    for (size_t i = pos_;; ++i) {
      i = src_.find("{%", i);
      if (i == std::string::npos) error("'{% raw %}' without '{% endraw %}'", open);
      size_t q = i + 2;
      char sign = q < src_.size() ? src_[q] : '\0';
      if (sign == '-' || sign == '+') ++q;
      while (q < src_.size() && is_space(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q += 6;
      while (q < src_.size() && is_space(src_[q])) ++q;
      char esign = src_[q];
      if (esign == '-' || esign == '+') ++q;
      if (src_.compare(q, 2, "%}") != 0) continue;
      std::string body = src_.substr(pos_, i - pos_);
      if (sign == '-') {
        while (!body.empty() && is_space(body.back())) body.pop_back();
      } else if (sign != '+' && opt_.lstrip_blocks) {
        size_t l_pos = body.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        bool blank = l_pos < body.size();
        for (size_t k = l_pos; k < body.size(); ++k) blank = blank && is_space(body[k]);
        if (blank && (l_pos > 0 || (pos_ > 0 && src_[pos_ - 1] == '\n'))) body.resize(l_pos);
      }
      emit_text(std::move(body), pos_);
      pos_ = q + 2;
      after_end(esign == '-', esign == '+', true);
      return;
    }
  }

  void tag(size_t open, bool variable) {
    tokens_.push_back(make(variable ? Tok::VarBegin : Tok::BlockBegin, "", open));
    int depth = 0;
    for (;;) {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
      if (pos_ >= src_.size()) error(variable ? "unterminated '{{' expression" : "unterminated '{%' tag", open);
      if (depth == 0) {
        const char* close = variable ? "}}" : "%}";
        bool sign = (src_[pos_] == '-' || (!variable && src_[pos_] == '+')) && src_.compare(pos_ + 1, 2, close) == 0;
        if (sign || src_.compare(pos_, 2, close) == 0) {
          tokens_.push_back(make(variable ? Tok::VarEnd : Tok::BlockEnd, "", pos_));
          bool strip = sign && src_[pos_] == '-';
          bool plus = sign && src_[pos_] == '+';
          pos_ += sign ? 3 : 2;
          after_end(strip, plus, !variable);
          return;
        }
      }
      char c = src_[pos_];
      size_t start = pos_;
      if (is_ident_start(c)) {
        while (pos_ < src_.size() && (is_ident_start(src_[pos_]) || is_digit(src_[pos_]))) ++pos_;
        tokens_.push_back(make(Tok::Name, src_.substr(start, pos_ - start), start));
      } else if (is_digit(c)) {
        number();
      } else if (c == '\'' || c == '"') {
        string_literal();
      } else {
        static const char* ops[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "*", "/", "%", "~", "<",
                                    ">",  "=",  ".",  ",",  ":",  "|",  "(", ")", "[", "]", "{", "}", ";"};
        const char* hit = nullptr;
        for (const char* op : ops)
          if (src_.compare(pos_, std::char_traits<char>::length(op), op) == 0) {
            hit = op;
            break;
          }
        if (!hit) error(std::string("unexpected character '") + c + "' in tag", pos_);
        std::string op = hit;
        if (op == "(" || op == "[" || op == "{") ++depth;
        if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
        pos_ += op.size();
        tokens_.push_back(make(Tok::Op, op, start));
      }
    }
  }

  void number() {
    size_t start = pos_;
    auto digits = [&] {
      while (pos_ < src_.size() &&
             (is_digit(src_[pos_]) || (src_[pos_] == '_' && pos_ + 1 < src_.size() && is_digit(src_[pos_ + 1]))))
        ++pos_;
    };
    digits();
    bool is_float = false;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
      ++pos_;
      digits();
      is_float = true;
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && is_digit(src_[p])) {
        pos_ = p;
        digits();
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = start; i < pos_; ++i)
      if (src_[i] != '_') text += src_[i];
    Token t = make(is_float ? Tok::Float : Tok::Int, text, start);
    try {
      if (is_float)
        t.f = std::stod(text);
      else
        t.i = std::stoll(text);
    } catch (const std::exception&) {
      error("number literal '" + text + "' out of range", start);
    }
    tokens_.push_back(std::move(t));
  }

  void string_literal() {
    size_t start = pos_;
    char q = src_[pos_++];
    std::string out;
    for (;;) {
      if (pos_ >= src_.size()) error("unterminated string literal", start);
      char c = src_[pos_++];
      if (c == q) break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= src_.size()) error("unterminated string literal", start);
      char e = src_[pos_++];
      auto hex = [&](int n) -> uint32_t {
        uint32_t v = 0;
        for (int k = 0; k < n; ++k) {
          char h = pos_ < src_.size() ? src_[pos_] : '\0';
          int d = is_digit(h)              ? h - '0'
                  : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                  : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                           : -1;
          if (d < 0) error("truncated \\x/\\u escape in string literal", pos_);
          v = v * 16 + static_cast<uint32_t>(d);
          ++pos_;
        }
        return v;
      };
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': base::append_utf8(out, hex(2)); break;
        case 'u': base::append_utf8(out, hex(4)); break;
        case 'U': {
          const size_t escape = pos_ - 2;  // the backslash
          const uint32_t cp = hex(8);
          if (cp > base::kMaxCodePoint) error("illegal Unicode character", escape);  // as Jinja2 says it
          base::append_utf8(out, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t v = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++k)
              v = v * 8 + static_cast<uint32_t>(src_[pos_++] - '0');
            base::append_utf8(out, v);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    tokens_.push_back(make(Tok::String, std::move(out), start));
  }

  std::string src_;
  LexOptions opt_;
  size_t pos_ = 0;
  std::vector<Token> tokens_;
  mutable size_t cursor_ = 0;
  mutable int cline_ = 1, ccol_ = 1;
};

}  // namespace

std::vector<Token> lex(std::string_view source, LexOptions options) { return Lexer(source, options).run(); }

}  // namespace skainet::chat
