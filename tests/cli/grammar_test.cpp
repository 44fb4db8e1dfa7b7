// `run` with llama.cpp's constrained-output flags: --grammar, --grammar-file, -j/--json-schema and
// -jf/--json-schema-file hold the generated text to the grammar; a grammar or schema that cannot be
// used is exit code 1 naming the option and where.
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_support.hpp"

namespace skainet::cli_test {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(RunGrammar, TheOutputFollowsTheGrammarOrTheSchema) {
  const RunResult g = run_skainet(greedy({"-n", "16", "--grammar", "root ::= (\"yes\" | \"no\") \"!\""}));
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_TRUE(g.out == "yes!" || g.out == "no!") << g.out;
  const char* schema =
      R"({"type":"object","properties":{"hero":{"type":"string","maxLength":12},"age":{"type":"integer"}},"required":["hero","age"]})";
  for (const char* option : {"-j", "--json-schema"}) {
    const RunResult j = run_skainet(greedy({"-n", "200", option, schema}));
    ASSERT_EQ(j.exit_code, 0) << j.err;
    const auto value = nlohmann::ordered_json::parse(j.out);
    EXPECT_EQ(value.begin().key(), "hero") << j.out;  // the schema's order
    EXPECT_TRUE(value["age"].is_number_integer()) << j.out;
  }
}

class RunGrammarFiles : public ScratchTest {};

TEST_F(RunGrammarFiles, FilesAndErrors) {
  const std::string gbnf = path("g.gbnf").string(), schema = path("s.json").string();
  std::ofstream(gbnf) << "# digits only\nroot ::= [0-9]{3}\n";
  std::ofstream(schema) << R"({"enum":["red","green"]})";
  const RunResult g = run_skainet(greedy({"--grammar-file", gbnf}));
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(g.out.size(), 3u) << g.out;
  const RunResult j = run_skainet(greedy({"-jf", schema}));
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const std::string value = j.out.substr(0, j.out.find_last_not_of(" \n\t") + 1);  // the schema's `space` may follow
  EXPECT_TRUE(value == "\"red\"" || value == "\"green\"") << j.out;
  EXPECT_TRUE(has(run_skainet(greedy({"--grammar", "root ::= x"})).err,
                  "--grammar: grammar rule 'x' is used but never defined"));
  EXPECT_TRUE(has(run_skainet(greedy({"-j", "{\"type\":\"string\",\"pattern\":\"a\"}"})).err,
                  "--json-schema: json schema at '/': 'pattern' is not supported"));
  EXPECT_TRUE(has(run_skainet(greedy({"-j", "{oops"})).err, "--json-schema: not JSON"));
  EXPECT_EQ(run_skainet(greedy({"--grammar", "root ::= \"a\"", "-j", "{}"})).exit_code, 2);  // one of them
}

}  // namespace
}  // namespace skainet::cli_test
