// Filters, HuggingFace's tojson and the helper globals; expectations checked against Jinja2 3.1.6.
#include <gtest/gtest.h>

#include "chat/helpers.hpp"

using namespace skainet::chat;
using namespace skainet::chat::testing;

TEST(ChatFilters, TojsonIsPythonJsonDumps) {
  EXPECT_EQ(R("{{ {'b': [1, 2.5, none, true], 'a': 'é\"\\n<'} | tojson }}"),
            "{\"b\": [1, 2.5, null, true], \"a\": \"é\\\"\\n<\"}");  // no HTML escaping, key order kept
  EXPECT_EQ(R("{{ {'b': 1, 'a': [1,2]} | tojson(indent=2, sort_keys=true) }}"),
            "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": 1\n}");
  EXPECT_EQ(R("{{ 'é😀' | tojson(ensure_ascii=true) }}"), "\"\\u00e9\\ud83d\\ude00\"");
  EXPECT_EQ(R("{{ [1,{'a':2}] | tojson(separators=(',', ':')) }}|{{ [] | tojson(indent=2) }}"), "[1,{\"a\":2}]|[]");
  // Context values keep their JSON key order through to tojson.
  json ctx = json::parse(R"({"t": {"z": 1, "a": {"y": 2.0, "b": "x"}}})");
  EXPECT_EQ(R("{{ t | tojson }}", ctx), "{\"z\": 1, \"a\": {\"y\": 2.0, \"b\": \"x\"}}");
  // map/select return generators in Jinja2, which json.dumps refuses.
  EXPECT_TRUE(failure("{{ [1] | map('string') | tojson }}"));
}

TEST(ChatFilters, GeneratorsBehaveLikePythonGenerators) {
  // Always truthy, consumed by the first pass, `first` takes one item, no len(), not reversible.
  json ctx = {{"x", {1, 2, 3}}};
  EXPECT_EQ(R("{{ 'T' if x | select('eq', 9) else 'F' }}|{% set h = x | select('odd') %}{{ h | list }}{{ h | list }}|"
              "{% set k = x | map('string') %}{{ k | first }}{{ k | list }}|{{ 2 in (x | select) }}|"
              "{{ (x | select)[0] }}|{% set r = x | reverse %}{{ r | list }}{{ r | list }}",
              ctx),
            "T|[1, 3][]|1['2', '3']|True||[3, 2, 1][]");
  EXPECT_TRUE(failure("{{ x | select | length }}", ctx));
  EXPECT_TRUE(failure("{{ x | select | last }}", ctx));
}

TEST(ChatFilters, StringFilters) {
  EXPECT_EQ(R("{{ '  a b  ' | trim }}|{{ 'xxaxx' | trim('x') }}|{{ 'hello world-foo(bar' | title }}|"
              "{{ 'hELLO' | capitalize }}|{{ 'aaa' | replace('a', 'b', 2) }}|{{ 'a b' | upper }}|{{ 'A' | lower }}|"
              "{{ 'x1 y2 z' | wordcount }}|{{ 'héllo' | length }}|{{ 1 | string }}{{ none | string }}"),
            "a b|a|Hello World-Foo(Bar|Hello|bba|A B|a|3|5|1None");
  EXPECT_EQ(
      R("{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(1, blank=true) }}"),
      "a\n  b\n\n  c|  a\n  b|a\n \n b");
  EXPECT_EQ(R("{{ '<a>' | e }}|{{ '<a>' | safe }}|{{ '<' | safe + '>' }}"), "&lt;a&gt;|<a>|<&gt;");
}

TEST(ChatFilters, CodePointsAreCountedOneWayEverywhere) {
  // Valid UTF-8 counts as Python counts code points (checked against Jinja2).
  const json ok = {{"s", "h\u00e9\u20ac\U0001F600"}};  // h é € 😀: 1, 2, 3 and 4 bytes
  EXPECT_EQ(R("{{ s|length }} {{ s|list|length }} {{ s[2] }} {{ s[-1] }} {{ s[1:3] }} {{ s|reverse }}", ok),
            "4 4 \u20ac \U0001F600 \u00e9\u20ac \U0001F600\u20ac\u00e9h");
  EXPECT_EQ(R("[{{ s|center(6) }}] {{ s.zfill(5) }} {{ s.count('') }} {{ s.find('\u20ac') }}", ok),
            "[ h\u00e9\u20ac\U0001F600 ] 0h\u00e9\u20ac\U0001F600 5 2");
  // Bytes that start no well-formed sequence (a stray continuation byte, a lead byte cut short) are
  // one code point each, for the length, the characters, indexes and padding alike.
  const json bad = {{"s", std::string("\x80"
                                      "a\xC3"
                                      "b")}};
  EXPECT_EQ(R("{{ s|length }} {{ s|list|length }} {{ s[1] }}{{ s[3] }} {{ s[-2:]|length }}", bad), "4 4 ab 2");
  EXPECT_EQ(R("{{ s|reverse|length }} {{ s.count('') }} [{{ s|center(6) }}]", bad), "4 5 [ " +
                                                                                        std::string("\x80"
                                                                                                    "a\xC3"
                                                                                                    "b") +
                                                                                        " ]");
}

TEST(ChatFilters, SequenceFilters) {
  json ctx = {{"x", {1, 2, 3}},
              {"messages", {{{"role", "user"}, {"content", "a"}}, {{"role", "assistant"}, {"content", "b"}}}}};
  EXPECT_EQ(R("{{ x | join(', ') }}|{{ messages | map(attribute='role') | join(',') }}|"
              "{{ messages | selectattr('role', 'equalto', 'user') | list | length }}|"
              "{{ messages | rejectattr('role', 'eq', 'user') | map(attribute='content') | first }}|"
              "{{ x | select('odd') | list }}|{{ x | reject('odd') | list }}|{{ x | first }}{{ x | last }}|"
              "{{ x[1:] }}|{{ x | reverse | list }}|{{ x | batch(2) | list }}|{{ [3,1,2] | sort }}|"
              "{{ x | sum }}|{{ x | max }}{{ x | min }}|{{ ['a', 'A', 'b'] | unique | list }}|"
              "{{ messages | map(attribute='role') | map('upper') | list }}",
              ctx),
            "1, 2, 3|user,assistant|1|b|[1, 3]|[2]|13|[2, 3]|[3, 2, 1]|[[1, 2], [3]]|[1, 2, 3]|6|31|['a', 'b']|"
            "['USER', 'ASSISTANT']");
  EXPECT_EQ(R("{{ {'b': 1, 'A': 2} | dictsort }}|{{ {'a': 1} | items | list }}|{{ 'ab' | list }}"),
            "[('A', 2), ('b', 1)]|[('a', 1)]|['a', 'b']");
}

TEST(ChatFilters, NumbersAndDefaults) {
  EXPECT_EQ(R("{{ '3' | int + 1 }}|{{ 'x' | int }}|{{ '2.5' | float }}|{{ 2.567 | round(1) }}|{{ -3 | abs }}|"
              "{{ u | default('d') }}|{{ '' | default('e', true) }}|{{ '' | d('f') }}|{{ 2.5 | int }}"),
            "4|0|2.5|2.6|3|d|e||2");
}

TEST(ChatGlobals, RaiseExceptionStrftimeRangeNamespace) {
  auto e = failure("ok\n  {{ raise_exception('roles must alternate') }}");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->line(), 2);
  EXPECT_NE(std::string(e->what()).find("roles must alternate"), std::string::npos);
  EXPECT_EQ(R("{{ strftime_now('%Y-%m-%d') }} {{ strftime_now('%d %b %Y') }} {{ strftime_now('%B %d, %Y') }}"),
            "2026-01-15 15 Jan 2026 January 15, 2026");
  EXPECT_EQ(R("{{ range(3) | list }}{{ range(1, 7, 2) | list }}{{ range(3, 0, -1) | list }}"),
            "[0, 1, 2][1, 3, 5][3, 2, 1]");
  EXPECT_EQ(R("{{ dict(a=1) }}"), "{'a': 1}");
}

TEST(ChatGlobals, ImmutableSandboxRefusesMutation) {
  auto e = failure("{% set l = [] %}{{ l.append(1) }}");
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("unsafe"), std::string::npos);
  EXPECT_TRUE(failure("{% set d = {} %}{{ d.update({'a': 1}) }}"));
  EXPECT_TRUE(failure("{% set d = {'a': 1} %}{{ d.pop('a') }}"));
}

// Issue 24, finding 6: numbers beyond int64 were undefined behaviour (release gave INT64_MIN). Jinja2's
// answer where it has one: int(nan) is do_int's default, int(inf) raises, '%d' % x prints int(x)
// exactly; where Python's ints would grow past int64 (1e300|int, sum, abs), a template error naming
// the filter and the value.
TEST(ChatFilters, NumbersBeyondInt64AreDefinedAndJinja2Like) {
  auto error_has = [](std::string_view tpl, std::string_view needle) {
    auto e = failure(tpl);
    if (!e) return ::testing::AssertionFailure() << tpl << " rendered";
    if (std::string(e->what()).find(needle) == std::string::npos)
      return ::testing::AssertionFailure() << tpl << ": " << e->what();
    return ::testing::AssertionSuccess();
  };
  // int: NaN gives the default, as in Jinja2; strings Jinja2 cannot convert too.
  EXPECT_EQ(R("{{ ('nan'|float)|int }}|{{ ('nan'|float)|int(7) }}|{{ 'inf'|int }}|{{ 'nan'|int }}|{{ '1e400'|int }}"),
            "0|7|0|0|0");
  EXPECT_TRUE(error_has("{{ ('inf'|float)|int }}", "int filter: cannot convert float infinity"));
  EXPECT_TRUE(error_has("{{ (-1e300 * 1e300)|int }}", "infinity"));
  EXPECT_TRUE(error_has("{{ 1e300|int }}", "int filter: 1e+300 is outside the 64-bit integer range"));
  EXPECT_TRUE(error_has("{{ 9.3e18|int }}", "outside the 64-bit integer range"));
  EXPECT_TRUE(error_has("{{ '1e20'|int }}", "outside the 64-bit integer range"));
  EXPECT_TRUE(error_has("{{ '99999999999999999999'|int }}", "outside the 64-bit integer range"));
  EXPECT_EQ(R("{{ -9.2e18|int }}|{{ 2.9|int }}|{{ -2.9|int }}|{{ '-2.9'|int }}|{{ ' 12 '|int }}|{{ 'x'|int }}"),
            "-9200000000000000000|2|-2|-2|12|0");
  // '%d' % float: exact digits however large, NaN and infinity refused as Python refuses them.
  EXPECT_EQ(R("{{ '%d' % 1e20 }}|{{ '%d' % -2.7 }}|{{ '%i' % -0.5 }}|{{ '%d' % 1e300 }}"),
            "100000000000000000000|-2|0|"
            "1000000000000000052504760255204420248704468581108159154915854115511802457988908195786371375080447864"
            "0437044438328838781769425232353604305756447921847867069828483872009265758037378302337947880900593689"
            "53234970799945081119038967640880074652742780142494579258788820056842838115669472196386865459400540160");
  EXPECT_TRUE(error_has("{{ '%d' % ('nan'|float) }}", "cannot convert float NaN to integer"));
  EXPECT_TRUE(error_has("{{ '%d' % ('-inf'|float) }}", "cannot convert float infinity to integer"));
  // sum and abs: an overflow is an error naming the filter and the values, never a wrap.
  EXPECT_TRUE(error_has("{{ [9223372036854775807, 1]|sum }}", "sum: integer overflow adding 1 to 9223372036854775807"));
  EXPECT_TRUE(error_has("{{ [-9223372036854775807, -2]|sum }}", "sum: integer overflow"));
  EXPECT_TRUE(error_has("{{ [1, 2]|sum(start=9223372036854775807) }}", "sum: integer overflow"));
  EXPECT_EQ(R("{{ [9223372036854775806, 1]|sum }}|{{ [9223372036854775807, 1.0]|sum }}|{{ [1, -2]|sum }}"),
            "9223372036854775807|9.223372036854776e+18|-1");
  EXPECT_TRUE(error_has("{{ (-9223372036854775807 - 1)|abs }}", "abs: integer overflow: abs(-9223372036854775808)"));
  EXPECT_EQ(R("{{ (-9223372036854775807)|abs }}|{{ -3|abs }}|{{ -2.5|abs }}"), "9223372036854775807|3|2.5");
}
