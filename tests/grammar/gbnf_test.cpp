// GBNF parsing and recognition: what the grammar accepts and refuses, and the errors that name what
// is wrong in a grammar.
#include <gtest/gtest.h>

#include "skainet/text/grammar.hpp"

namespace skainet::grammar {
namespace {

// These tests feed text, not tokens: any vocabulary will do.
std::shared_ptr<const Vocabulary> stories_vocabulary() {
  static const auto v = std::make_shared<const Vocabulary>(
      text::Tokenizer::from_file(std::string(SKAINET_SHARED_MODELS) + "/stories260K.gguf"));
  return v;
}

bool accepts(std::string_view gbnf, std::string_view text, bool whole = true) {
  Matcher m(std::make_shared<const Grammar>(Grammar::parse(gbnf)), stories_vocabulary());
  return m.accept_text(text) && (!whole || m.complete());
}

std::string error_of(std::string_view gbnf) {
  try {
    Grammar::parse(gbnf);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "";
}

TEST(Gbnf, ErrorsNameWhatIsWrong) {
  EXPECT_NE(error_of("root ::= item").find("'item' is used but never defined"), std::string::npos);
  EXPECT_NE(error_of("item ::= \"a\"").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= x \"a\"\nx ::= \"b\"? root").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"abc").find("line 1, column 14: unterminated string literal"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\n\nroot ::= \"b\"").find("line 3"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\n\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\q\"").find("unknown escape '\\q'"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{3,2}").find("below the minimum"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{99999}").find("repetition count above"), std::string::npos);
  EXPECT_NE(error_of("root ::= [z-a]").find("end below its start"), std::string::npos);
  EXPECT_NE(error_of("root ::= *").find("nothing before it to repeat"), std::string::npos);
  EXPECT_NE(error_of("root ::= <think>").find("token references"), std::string::npos);
  EXPECT_NE(error_of("root = \"a\"").find("expected '::='"), std::string::npos);
  EXPECT_NE(error_of("root ::= (\"a\"").find("expected ')'"), std::string::npos);
}

TEST(Gbnf, LiteralsClassesAndAlternatives) {
  EXPECT_TRUE(accepts("root ::= \"ab\" | \"cd\"", "cd"));
  EXPECT_FALSE(accepts("root ::= \"ab\" | \"cd\"", "ad"));
  EXPECT_TRUE(accepts("root ::= [a-c0-9_]+", "a0_9c"));
  EXPECT_FALSE(accepts("root ::= [a-c0-9_]+", "a0d"));
  EXPECT_TRUE(accepts("root ::= [^\"\\\\]*", "x y\tz€"));
  EXPECT_FALSE(accepts("root ::= [^\"\\\\]*", "x\"y"));
  EXPECT_TRUE(accepts("root ::= .+", "any thing ✓"));
  EXPECT_TRUE(accepts("root ::= \"\\x41\\u00e9\\U0001F600\\n\"", "Aé😀\n"));
  EXPECT_TRUE(accepts("root ::= [\\u4e00-\\u9fff]{2}", "中文"));
  EXPECT_FALSE(accepts("root ::= [\\u4e00-\\u9fff]{2}", "中a"));
}

TEST(Gbnf, Repetitions) {
  const char* g = "root ::= \"a\"{2,4} \"b\"{3} \"c\"{1,} \"d\"? (\"e\" \"f\")*";
  EXPECT_TRUE(accepts(g, "aabbbc"));
  EXPECT_TRUE(accepts(g, "aaaabbbcccdefef"));
  EXPECT_FALSE(accepts(g, "abbbc"));
  EXPECT_FALSE(accepts(g, "aaaaabbbc"));
  EXPECT_FALSE(accepts(g, "aabbc"));
  EXPECT_FALSE(accepts(g, "aabbbcde"));
  EXPECT_TRUE(accepts(g, "aabbbcde", /*whole=*/false));  // a prefix of a sentence
}

TEST(Gbnf, MultiLineRulesCommentsAndNesting) {
  const char* g = R"(# a list of words
root ::= "[" ws (
    word
    ("," ws word)*   # more
  )? "]"
word ::= [a-z]+
ws ::= [ ]*
)";
  EXPECT_TRUE(accepts(g, "[ ab, c,d]"));
  EXPECT_TRUE(accepts(g, "[]"));
  EXPECT_FALSE(accepts(g, "[ab,]"));
}

// Hostile grammars end quickly with an error or an answer, never a hang: empty alternatives nested
// many times over (2^40 paths to a handful of stacks), and ambiguity past the bound.
TEST(Gbnf, AmbiguityIsBoundedNotExponential) {
  std::string nested = "root ::=";
  for (int i = 0; i < 40; ++i) nested += " s";
  nested += " \"x\"\ns ::= \"\" | \"\"\n";
  EXPECT_TRUE(accepts(nested, "x"));
  std::string wide = "root ::= (a)*\na ::= ";
  for (int i = 0; i < 5000; ++i)
    wide += (i ? " | " : "") + std::string("\"x\" [0-9]{") + std::to_string(i % 7 + 1) + "}";
  bool refused = false;
  try {
    accepts(wide, "x1");
  } catch (const GrammarError& e) {
    refused = std::string(e.what()).find("too ambiguous") != std::string::npos;
  }
  EXPECT_TRUE(refused);
}

}  // namespace
}  // namespace skainet::grammar
