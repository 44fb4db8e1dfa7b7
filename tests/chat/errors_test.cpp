// What the renderer refuses: syntax errors and unsupported constructs name the construct and its
// line and column; limits bound recursion, output and work; no input crashes or hangs it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "chat/helpers.hpp"

using namespace skainet::chat;
using namespace skainet::chat::testing;

namespace {

void expect_error_at(std::string_view tpl, int line, int column, std::string_view needle) {
  auto e = failure(tpl);
  ASSERT_TRUE(e) << tpl;
  EXPECT_EQ(e->line(), line) << e->what();
  EXPECT_EQ(e->column(), column) << e->what();
  EXPECT_NE(std::string(e->what()).find(needle), std::string::npos) << e->what();
}

}  // namespace

TEST(ChatErrors, SyntaxErrorsNameConstructAndPosition) {
  expect_error_at("ok\n  {% include 'x.j2' %}", 2, 6, "unsupported or unknown tag '{% include %}'");
  expect_error_at("{% extends 'base' %}", 1, 4, "'{% extends %}'");
  expect_error_at("{% if x %}never closed", 1, 23, "missing '{% elif %}'");
  expect_error_at("a\nb {{ 1 + }}", 2, 10, "unexpected token in expression");
  expect_error_at("{{ 'open", 1, 4, "unterminated string literal");
  expect_error_at("x {# open", 1, 3, "unterminated comment");
  expect_error_at("{{ x", 1, 1, "unterminated '{{' expression");
  expect_error_at("{% for x in %}{% endfor %}", 1, 13, "unexpected token");
  expect_error_at("{% for x in y recursive %}{% endfor %}", 1, 15, "recursive");
  // Beyond U+10FFFF no UTF-8 sequence holds it: Jinja2 (Python's unicode-escape) refuses the literal.
  expect_error_at("{{ 'a\\U00110000' }}", 1, 6, "illegal Unicode character");
}

TEST(ChatErrors, NamesResolveWhenJinja2CompilesThem) {
  // An unknown filter or test fails the whole template, as Jinja2's compiler does, except inside an
  // if or an inline if, where it fails only when evaluated.
  expect_error_at("{% for m in [] %}{{ m | nosuch }}{% endfor %}", 1, 23, "no filter named 'nosuch'");
  expect_error_at("{% if false %}{% for i in x %}{{ i | nosuch }}{% endfor %}{% endif %}", 1, 36, "no filter named");
  expect_error_at("{% macro f() %}{{ 1 is nosuch }}{% endmacro %}", 1, 21, "no test named 'nosuch'");
  expect_error_at("{{ x | truncate(3) }}", 1, 6, "the Jinja2 filter 'truncate' is not supported");
  EXPECT_EQ(R("{% if false %}{{ m | nosuch }}{{ 1 is nosuch }}{% endif %}{{ 1 | nosuch if false }}"), "");
  expect_error_at("{% if true %}{{ 1 | nosuch }}{% endif %}", 1, 19, "no filter named 'nosuch'");
  // break/continue outside a loop (a macro body or a for's else counts as outside) fail at parse time.
  expect_error_at("{% break %}", 1, 4, "'{% break %}' outside a loop");
  expect_error_at("{% for i in x %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}", 1, 35, "outside a loop");
  expect_error_at("{% for i in [] %}{% else %}{% break %}{% endfor %}", 1, 31, "outside a loop");
}

TEST(ChatErrors, RuntimeErrorsNamePosition) {
  expect_error_at("{% if true %}\n\n   {{ x | nosuchfilter }}{% endif %}", 3, 9, "no filter named 'nosuchfilter'");
  expect_error_at("{% if true %}{{ 1 is nosuchtest }}{% endif %}", 1, 19, "no test named 'nosuchtest'");
  expect_error_at("{{ '%s %s' % ('a',) }}", 1, 12, "not enough arguments for format string");
  expect_error_at("{{ 'a' + 1 }}", 1, 8, "unsupported operand type(s) for +: 'str' and 'int'");
  expect_error_at("{{ 1 // 0 }}", 1, 6, "division or modulo by zero");
  expect_error_at("{{ x.y.z }}", 1, 5, "'x' is undefined");
  expect_error_at("{% for a in 3 %}{% endfor %}", 1, 13, "'int' object is not iterable");
  expect_error_at("{{ 'abc'.nosuchmethod() }}", 1, 22, "'str object' has no attribute 'nosuchmethod'");
}

TEST(ChatLimits, RecursionDepthIsBounded) {
  auto e = failure("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("recursion deeper than"), std::string::npos);
  // Deeply nested brackets stop in the parser, not on the C++ stack.
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  e = failure("{{ " + deep + " }}");
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("nests deeper"), std::string::npos);
}

// A left-associative chain is built by a loop, but it is a tree as deep as the chain is long: the
// passes after the parser (check_names, the evaluator, the destructor) recursed over it and
// overflowed the stack. Depth counts chains too, and is refused at parse time.
TEST(ChatLimits, LongChainsAreRefusedAtParseTime) {
  auto repeat = [](std::string_view piece, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += piece;
    return s;
  };
  const int n = 100000;
  for (const std::string& body : {"1" + repeat(" + 1", n), "x" + repeat("|e", n), "x" + repeat("[0]", n),
                                  "x" + repeat(".x", n), "x" + repeat(" * 2", n), "x" + repeat(" and x", n)}) {
    auto e = failure("\n{{ " + body + " }}");
    ASSERT_TRUE(e) << body.substr(0, 20);
    EXPECT_NE(std::string(e->what()).find("nests deeper than 200 levels"), std::string::npos) << e->what();
    EXPECT_EQ(e->line(), 2) << e->what();
    EXPECT_GT(e->column(), 0) << e->what();
  }
  // The same in a statement, and a chain inside a nested block.
  auto e = failure("{% if true %}{% set y = 1" + repeat(" - 1", n) + " %}{% endif %}");
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("nests deeper"), std::string::npos) << e->what();
  // A chain that fails to parse at its end is freed without recursion.
  e = failure("{{ 1" + repeat(" + 1", 300000) + " + }}");
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("unexpected token in expression"), std::string::npos) << e->what();
  // Chains within the limit still render.
  EXPECT_EQ(R("{{ 1" + repeat(" + 1", 150) + " }}"), "151");
  EXPECT_EQ(R("{{ 'ab'" + repeat("|upper|lower", 60) + " }}"), "ab");
}

// A value nested 100k deep crashed repr, equal and (at 1M) the recursive release of its items; values
// are bounded in depth where they are built, and namespaces cannot be made to hold themselves.
TEST(ChatLimits, ValueDepthIsBounded) {
  const std::string wrap = "{% set ns = namespace(x=[], y=[]) %}{% for i in range(100000) %}";
  for (const std::string& tpl : {wrap + "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}",
                                 wrap + "{% set ns.x = [ns.x] %}{% set ns.y = [ns.y] %}{% endfor %}{{ ns.x == ns.y }}",
                                 wrap + "{% set ns.x = {'k': ns.x} %}{% endfor %}{{ ns.x }}",
                                 wrap + "{% set ns.x = {ns.x|string: 1} if false else (ns.x, 1) %}{% endfor %}"}) {
    auto e = failure(tpl);
    ASSERT_TRUE(e) << tpl;
    EXPECT_NE(std::string(e->what()).find("value nests deeper than 500 levels"), std::string::npos) << e->what();
  }
  // A namespace holding itself, directly or through a list or dict, would be a cycle.
  for (const char* tpl : {"{% set ns = namespace() %}{% set ns.x = ns %}{{ ns }}",
                          "{% set ns = namespace() %}{% set ns.x = [1, {'a': ns}] %}{{ ns }}",
                          "{% set a = namespace() %}{% set b = namespace(x=[a]) %}{% set a.y = b %}{{ a }}"}) {
    auto e = failure(tpl);
    ASSERT_TRUE(e) << tpl;
    EXPECT_NE(std::string(e->what()).find("a namespace cannot hold a namespace"), std::string::npos) << e->what();
  }
  // Deep JSON from the context is bounded the same way.
  json deep = json::array();
  for (int i = 0; i < 1000; ++i) deep = json::array({deep});
  auto e = failure("{{ x }}", json{{"x", deep}});
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("value nests deeper"), std::string::npos) << e->what();
  // Within the limit, deep values still work.
  EXPECT_EQ(R("{% set ns = namespace(x=[], y=[]) %}{% for i in range(400) %}{% set ns.x = [ns.x] %}"
              "{% set ns.y = [ns.y] %}{% endfor %}{{ ns.x == ns.y }} {{ (ns.x|string)[:3] }}"),
            "True [[[");
  EXPECT_EQ(R("{% set a = namespace(n=1) %}{% set b = [a, [a]] %}{{ b[1][0].n }}"), "1");
}

TEST(ChatLimits, OutputSizeIsBounded) {
  Options o = fixed_clock_options();
  o.limits.max_output_bytes = 1000;
  auto e = failure("{% for i in range(100) %}0123456789{{ i }}{% endfor %}", json::object(), o);
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("output larger than 1000 bytes"), std::string::npos);
  e = failure("{{ 'x' * 100000000000 }}");
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("string built by '*' larger than 16777216 bytes"), std::string::npos)
      << e->what();
  e = failure("{% set s = namespace(v='xx') %}{% for i in range(40) %}{% set s.v = s.v ~ s.v %}{% endfor %}");
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("string built by '~' larger than 16777216 bytes"), std::string::npos)
      << e->what();
}

TEST(ChatLimits, WorkIsBounded) {
  Options o = fixed_clock_options();
  o.limits.max_steps = 100000;
  auto e = failure("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", json::object(), o);
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("the template ran past 100000 steps"), std::string::npos) << e->what();
  e = failure("{{ range(1000000) | length }}");
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("Range too big"), std::string::npos);
}

// Every prefix cut of every real template either renders or raises a TemplateError: no crash, no hang.
TEST(ChatRobustness, TruncatedRealTemplatesNeverCrash) {
  std::filesystem::path dir = std::filesystem::path(SKAINET_SHARED_MODELS) / "templates";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  json ctx = json::parse(R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                                          {"role": "assistant", "content": "a"}, {"role": "user", "content": "v"}],
                             "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
  size_t files = 0, renders = 0, errors = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".jinja") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string src = ss.str();
    ++files;
    for (size_t cut = 0; cut <= src.size(); cut += std::max<size_t>(1, src.size() / 40)) {
      try {
        render(std::string_view(src).substr(0, cut), ctx, fixed_clock_options());
        ++renders;
      } catch (const TemplateError&) {
        ++errors;
      }
    }
  }
  EXPECT_GE(files, 70u);
  EXPECT_GT(renders, 0u);
  EXPECT_GT(errors, 0u);
}

// Random single-character edits of every real template, with wrong-typed arguments in the mix:
// each render either succeeds or raises a TemplateError, within small limits.
TEST(ChatRobustness, MutatedRealTemplatesFailCleanly) {
  std::filesystem::path dir = std::filesystem::path(SKAINET_SHARED_MODELS) / "templates";
  json ctx = json::parse(R"({"messages": [{"role": "user", "content": ["x", 1]}, {"role": "assistant", "content": null,
                             "tool_calls": [{"function": {"name": 3, "arguments": "{}"}}]}, {"role": 7, "content": 2.5}],
                             "tools": [{"type": "function", "function": {"name": "f", "parameters": 1}}],
                             "add_generation_prompt": 1, "bos_token": null})");
  Options o = fixed_clock_options();
  o.limits.max_steps = 200000;
  o.limits.max_output_bytes = 1 << 20;
  std::mt19937 rng(1234);
  const std::string alphabet = "{}%#-+()[]'\"|.,:=~*/ \nab0";
  size_t cases = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".jinja") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string src = ss.str();
    for (int k = 0; k < 30 && !src.empty(); ++k) {
      std::string m = src;
      size_t at = rng() % m.size();
      char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0: m[at] = c; break;
        case 1: m.insert(m.begin() + static_cast<std::ptrdiff_t>(at), c); break;
        default: m.erase(at, 1 + rng() % 8); break;
      }
      ++cases;
      try {
        render(m, ctx, o);
      } catch (const TemplateError&) {
      }
    }
  }
  EXPECT_GE(cases, 2000u);
}
