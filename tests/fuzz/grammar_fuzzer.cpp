// Fuzz target: grammars as a client sends them (skainet::grammar). The first byte picks the reading:
// even, the rest is GBNF text; odd, it is a JSON Schema turned into GBNF. A grammar that compiles is
// then followed: a matcher on stories260K's vocabulary computes a mask, takes a few allowed tokens and
// a short text. GrammarError (or InvalidArgument, its base) naming what is wrong is the one answer to
// a grammar it cannot use; a crash, another exception or a hang is a finding. Seeds: the schemas of
// tests/grammar/data/schemas.json, their GBNF, and hand-written grammars.
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_target.hpp"
#include "skainet/text/grammar.hpp"

namespace skainet::fuzz {
namespace {

const std::filesystem::path kSchemas = std::filesystem::path(SKAINET_SOURCE_DIR) / "tests/grammar/data/schemas.json";

const std::shared_ptr<const grammar::Vocabulary>& vocabulary() {
  static const auto v = std::make_shared<const grammar::Vocabulary>(
      text::Tokenizer::from_file(std::string(SKAINET_SHARED_MODELS) + "/stories260K.gguf"));
  return v;
}

void follow(const std::shared_ptr<const grammar::Grammar>& g) {
  grammar::Matcher m(g, vocabulary());
  std::vector<text::Candidate> c(static_cast<size_t>(vocabulary()->size()));
  for (int step = 0; step < 4; ++step) {
    for (int32_t id = 0; id < vocabulary()->size(); ++id) c[static_cast<size_t>(id)] = {id, 0.0f, 0.0f};
    m.mask(c);
    int32_t pick = -1;
    for (const text::Candidate& x : c)
      if (x.logit == 0.0f && !vocabulary()->bytes(x.id).empty()) pick = x.id;  // the last allowed text token
    if (pick < 0) return;
    if (!m.allows(pick)) fail("grammar_fuzzer", "a token in the mask is not allowed alone");
    m.accept(pick);
  }
  m.accept_text("{\"a\": 1}");
}

}  // namespace

int grammar_one_input(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text = as_text(data + 1, size - 1);
  try {
    std::string gbnf(text);
    if (data[0] & 1) {
      const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (schema.is_discarded()) return 0;
      gbnf = grammar::json_schema_gbnf(schema);
    }
    follow(std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(gbnf)));
  } catch (const InvalidArgument& e) {
    if (std::string_view(e.what()).empty()) fail("grammar_fuzzer", "a refusal without a message");
  }
  return 0;
}

std::vector<Bytes> grammar_seeds() {
  std::vector<Bytes> seeds;
  const auto with = [](char mode, std::string_view s) {
    Bytes b{static_cast<uint8_t>(mode)};
    b.insert(b.end(), s.begin(), s.end());
    return b;
  };
  std::ifstream f(kSchemas);
  for (const auto& s : nlohmann::ordered_json::parse(f)) {
    seeds.push_back(with(1, s["schema"].dump()));
    seeds.push_back(with(0, grammar::json_schema_gbnf(s["schema"])));
  }
  for (const char* g : {"root ::= \"a\"{2,4} [^\"\\\\]* (\"x\" | \"y\")+ .?", "root ::= s s \"x\"\ns ::= \"\" | \"\"",
                        "# c\nroot ::= (\n  item\n)*\nitem ::= [a-z\\u00e9-\\U0001F600]"})
    seeds.push_back(with(0, g));
  return seeds;
}

}  // namespace skainet::fuzz

SKAINET_FUZZ_ENTRY(skainet::fuzz::grammar_one_input, skainet::fuzz::grammar_seeds)
