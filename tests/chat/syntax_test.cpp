// Whitespace control and statements, each expectation checked against Jinja2 3.1.6 configured as
// HuggingFace configures it (trim_blocks, lstrip_blocks).
#include <gtest/gtest.h>

#include "chat/helpers.hpp"

using namespace skainet::chat;
using namespace skainet::chat::testing;

TEST(ChatWhitespace, TrimAndLstripBlocks) {
  // lstrip_blocks removes the indentation before a tag; trim_blocks the newline after it.
  EXPECT_EQ(R("a\n  {% if true %}\n    x\n  {% endif %}\nb\n"), "a\n    x\nb");
}

TEST(ChatWhitespace, MinusAndPlusMarkers) {
  json ctx = {{"x", {1, 2, 3}}};
  EXPECT_EQ(R("{%- for i in x -%} {{ i }} {%- endfor %}", ctx), "123");
  EXPECT_EQ(R("{% for i in x +%}\n{{i}}{% endfor %}", ctx), "\n1\n2\n3");  // '+' keeps the newline
  EXPECT_EQ(R("  {{- 'v' }}  {#- c #}  {#  c2 #}\nz"), "v  z");
  EXPECT_EQ(R("a  {%+ if true %}b{% endif %}"), "a  b");  // '+' disables lstrip
}

TEST(ChatWhitespace, NewlinesAreNormalizedAndOneTrailingNewlineDropped) {
  EXPECT_EQ(R("a\r\nb\rc\n"), "a\nb\nc");
  EXPECT_EQ(R("a\n\n"), "a\n");
  EXPECT_EQ(R("{{ 'x' }}\n"), "x");
}

TEST(ChatWhitespace, VariableTagsAreNotTrimmed) { EXPECT_EQ(R("{{ 'a' }}\n  {{ 'b' }}"), "a\n  b"); }

TEST(ChatStatements, IfElifElse) {
  const char* t = "{% if n == 1 %}one{% elif n == 2 %}two{% else %}many{% endif %}";
  EXPECT_EQ(R(t, {{"n", 1}}), "one");
  EXPECT_EQ(R(t, {{"n", 2}}), "two");
  EXPECT_EQ(R(t, {{"n", 7}}), "many");
}

TEST(ChatStatements, LoopVariables) {
  json ctx = {{"x", {1, 2, 3}}};
  EXPECT_EQ(R("{% for i in x if i != 2 %}{{ loop.index }}/{{ loop.length }}:{{ i }}{{ loop.cycle('a','b') }}"
              "{% else %}none{% endfor %}{% for i in [] %}{% else %}empty{% endfor %}",
              ctx),
            "1/2:1a2/2:3bempty");
  EXPECT_EQ(R("{% for i in x %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}"
              "{{ loop.last }};{% endfor %}",
              ctx),
            "032TrueFalse;121FalseFalse;210FalseTrue;");
  EXPECT_EQ(R("{% for i in x %}[{{ loop.previtem }}|{{ loop.nextitem }}]{% endfor %}", ctx), "[|2][1|3][2|]");
}

TEST(ChatStatements, LoopControlsAndUnpacking) {
  json ctx = {{"x", {1, 2, 3, 4}}};
  EXPECT_EQ(R("{% for i in x %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}"
              "{{ i }}{% endfor %}",
              ctx),
            "13");
  EXPECT_EQ(R("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }}{% if not loop.last %},{% endif %}"
              "{% endfor %}"),
            "a=1,b=2");
  EXPECT_EQ(R("{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}{% for c in 'hé' %}[{{ c }}]{% endfor %}"),
            "ab[h][é]");
  EXPECT_EQ(R("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
}

TEST(ChatStatements, ScopesFollowJinja2) {
  // A for body is a new scope (an assignment does not leak, nor survive an iteration); an if is not.
  EXPECT_EQ(R("{% set c = 0 %}{% for i in range(3) %}{% set c = c + 1 %}{{ c }}{% endfor %}{{ c }}"), "1110");
  EXPECT_EQ(R("{% if true %}{% set c = 5 %}{% endif %}{{ c }}"), "5");
}

TEST(ChatStatements, SymbolTrackingFollowsJinja2) {
  json ctx = {{"x", "ctx"}};
  // A name a scope assigns before reading it starts Undefined there, shadowing the context, also
  // for reads from nested scopes that run before the assignment...
  EXPECT_EQ(R("{% for i in [1] %}[{{ x }}]{% endfor %}{% set x = 1 %}", ctx), "[]");
  EXPECT_EQ(R("{% for i in [1] %}{% for j in [1] %}[{{ x }}]{% endfor %}{% set x = 2 %}{% endfor %}", ctx), "[]");
  // ...but a read that comes first, or an assignment inside an if, reads the context until assigned.
  EXPECT_EQ(R("[{{ x }}]{% set x = 1 %}[{{ x }}]", ctx), "[ctx][1]");
  EXPECT_EQ(R("{% for i in [1] %}{% for j in [1] %}[{{ x }}]{% endfor %}{% if false %}{% set x = 2 %}{% endif %}"
              "{% endfor %}",
              ctx),
            "[ctx]");
  // A block set's body is its own scope; a break inside it leaves the loop without assigning.
  EXPECT_EQ(R("{% set b %}{% set x = 1 %}{% endset %}[{{ x }}]", ctx), "[ctx]");
  EXPECT_EQ(R("{% for i in [1, 2] %}{% set b %}{{ i }}{% if i == 2 %}{% break %}{% endif %}{% endset %}"
              "[{{ b }}]{% endfor %}"),
            "[1]");
}

TEST(ChatStatements, ForElseRunsUnlessAnIterationCompleted) {
  // Jinja2 marks an iteration done at the end of the body, so break or continue in every iteration
  // that ran still leads to the else.
  EXPECT_EQ(R("{% for i in [1, 2] %}{% break %}{% else %}E{% endfor %}|"
              "{% for i in [1, 2] %}{% if i < 2 %}{% continue %}{% endif %}{% else %}E{% endfor %}|"
              "{% for i in [1, 2] %}{% continue %}{% else %}E{% endfor %}|{% for i in [] %}{% else %}E{% endfor %}"),
            "E||E|E");
}

TEST(ChatStatements, NamespaceCarriesStateOutOfLoops) {
  EXPECT_EQ(R("{% set ns = namespace(n=0, seen=false) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}"
              "{% endfor %}{{ ns.n }} {{ ns.seen }} {{ ns }}"),
            "6 False <Namespace {'n': 6, 'seen': False}>");
  auto e = failure("{% set d = {} %}{% set d.x = 1 %}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->line(), 1);
}

TEST(ChatStatements, BlockSetFilterAndRaw) {
  EXPECT_EQ(R("{% raw %}{{ not }}{% endraw %}|{% filter upper %}abc{% endfilter %}|"
              "{% set b | trim %}  pad  {% endset %}[{{ b }}]{% set c %}x{{ 1 }}{% endset %}{{ c }}"),
            "{{ not }}|ABC|[pad]x1");
}

TEST(ChatStatements, Macros) {
  const char* m = "{% macro m(a, b='B', c=none) %}{{ a }}{{ b }}{{ c }}{{ varargs }}{{ kwargs }}{% endmacro %}";
  EXPECT_EQ(R(std::string(m) + "{{ m(1) }}|{{ m(1, c=3) }}|{{ m(1, 2, 3, 4, z=5) }}"),
            "1BNone(){}|1B3(){}|123(4,){'z': 5}");
  // Free names in a macro resolve at call time from the template's top level.
  EXPECT_EQ(R("{% macro g() %}{{ v }}{% endmacro %}{% set v = 3 %}{{ g() }}"), "3");
}

TEST(ChatStatements, GenerationBlockRendersItsBody) {
  EXPECT_EQ(R("{% generation %}answer{% endgeneration %}"), "answer");
}

TEST(ChatExpressions, OperatorsAndLiterals) {
  EXPECT_EQ(R("{{ 1/2 }} {{ 4/2 }} {{ 7//2 }} {{ -7//2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2**10 }} {{ 2 + 3 * 4 }}"),
            "0.5 2.0 3 -4 1 2 1024 14");
  EXPECT_EQ(R("{{ [1,'a',none,true,1.5,{'a':(1,2)}] }}"), "[1, 'a', None, True, 1.5, {'a': (1, 2)}]");
  EXPECT_EQ(R("{{ 'a' ~ none ~ 1.0 ~ 1e20 ~ 1e-5 ~ 'x' * 3 }}"), "aNone1.01e+201e-05xxx");
  EXPECT_EQ(R("{{ 'b' in 'abc' }}{{ 2 not in [1, 2] }}{{ 'k' in {'k': 1} }}{{ 1 < 2 < 3 }}"), "TrueFalseTrueTrue");
  EXPECT_EQ(R("{{ 'y' if x else 'n' }}{{ 'y' if not x }}|{{ x or 'd' }}{{ x and 'd' }}", {{"x", false}}), "ny|dFalse");
  EXPECT_EQ(R("{{ 'abc'[::-1] }} {{ 'héllo'[1] }} {{ [1,2,3][-1] }} {{ [1,2,3][1:] }} {{ 'abcdef'[1:5:2] }}"),
            "cba é 3 [2, 3] bd");
  EXPECT_EQ(R("{{ '%s-%d-%r %%' % ('a', 3, 'b') }}|{{ 'x%s' % 1 }}"), "a-3-'b' %|x1");
  EXPECT_EQ(R("{{ \"it's\" }} {{ 'a\\tb\\n' }} {{ '\\u00e9' }} {{ 'x' 'y' }}"), "it's a\tb\n é xy");
}

TEST(ChatExpressions, Tests) {
  json ctx = {{"s", "x"}, {"n", nullptr}, {"d", json::object()}, {"l", json::array()}, {"i", 3}, {"f", 1.5}};
  EXPECT_EQ(R("{{ s is string }}{{ n is none }}{{ d is mapping }}{{ l is iterable }}{{ l is sequence }}"
              "{{ i is number }}{{ i is integer }}{{ f is float }}{{ u is defined }}{{ u is undefined }}"
              "{{ true is true }}{{ 1 is true }}{{ s is not none }}{{ i is odd }}{{ 6 is divisibleby 3 }}"
              "{{ i is eq 3 }}{{ true is boolean }}",
              ctx),
            "TrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueFalseTrueTrueTrueTrueTrue");
}

TEST(ChatExpressions, UndefinedBehavesLikeJinja2Default) {
  EXPECT_EQ(R("[{{ u }}]{{ u | length }}{{ u | default('d') }}{% for a in u %}x{% endfor %}{{ u is none }}"),
            "[]0dFalse");
  EXPECT_EQ(R("[{{ d.missing }}][{{ d['missing'] }}][{{ none.x }}]", {{"d", json::object()}}), "[][][]");
  auto e = failure("line one\n{{ u.attr }}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->line(), 2);
  EXPECT_NE(std::string(e->what()).find("'u' is undefined"), std::string::npos);
}

TEST(ChatExpressions, StringDictAndListMethods) {
  EXPECT_EQ(R("{{ ' a b '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\\n\\nz'.lstrip('\\n') }}|{{ 'a,b,,c'.split(',') }}|"
              "{{ ' a  b '.split() }}|{{ 'a-b-c'.split('-', 1) }}|{{ 'abc'.startswith(('x', 'a')) }}|"
              "{{ 'abc'.endswith('bc') }}|{{ 'aaa'.replace('a', 'b') }}|{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}|"
              "{{ \"they're\".title() }}|{{ '{} and {name}'.format(1, name='n') }}|{{ 'abcb'.find('b') }}"),
            "a b|a|z|['a', 'b', '', 'c']|['a', 'b']|['a', 'b-c']|True|True|bbb|ABab|They'Re|1 and n|1");
  EXPECT_EQ(R("{{ d.get('a') }}{{ d.get('z', 9) }}{{ d.get('z') }}{{ d.keys() | list }}{{ d.values() | list }}"
              "{{ [1, 2, 1].count(1) }}",
              {{"d", {{"a", 1}}}}),
            "19None['a'][1]2");
}
