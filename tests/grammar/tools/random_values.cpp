// Writes, for each vocabulary file and each schema of tests/grammar/data/schemas.json, values generated
// under the schema's grammar from random logits, as JSON lines {vocab, schema, text, complete}:
// check_random_values.py parses each and validates it with Python's jsonschema. Tokens that close a
// value (holding '"', ']' or '}') get a bonus, so unbounded strings and lists end soon.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "skainet/text/grammar.hpp"

using namespace skainet;

namespace {

constexpr int kSamples = 2;
constexpr int kMaxTokens = 4000;

nlohmann::json generate(const text::Tokenizer& tok, const std::shared_ptr<const grammar::Vocabulary>& vocab,
                        const std::shared_ptr<const grammar::Grammar>& g, uint64_t seed) {
  text::Sampler sampler(tok.vocab_size(), {.temperature = 1.0f, .seed = seed});
  sampler.constrain(std::make_unique<grammar::Matcher>(g, vocab));
  text::Rng rng(seed * 31 + 1);
  std::vector<float> logits(static_cast<size_t>(tok.vocab_size()));
  std::vector<int32_t> ids;
  bool complete = false;
  for (int i = 0; i < kMaxTokens && !complete; ++i) {
    for (int32_t id = 0; id < tok.vocab_size(); ++id) {
      const std::string_view piece = vocab->bytes(id);
      const bool closes = piece.find_first_of("\"]}") != std::string_view::npos;
      logits[static_cast<size_t>(id)] =
          static_cast<float>(rng.uniform() * 2.0) + (closes || tok.is_eog(id) ? 4.0f : 0.0f);
    }
    const int32_t id = sampler.sample(logits);
    if (tok.is_eog(id))
      complete = true;
    else
      ids.push_back(id);
  }
  return {{"text", tok.decode(ids, {.strip_leading_space = false})}, {"complete", complete}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SCHEMAS.json VOCAB.gguf...\n", argv[0]);
    return 2;
  }
  const auto schemas = nlohmann::ordered_json::parse(std::ifstream(argv[1]));
  for (int a = 2; a < argc; ++a) {
    const text::Tokenizer tok = text::Tokenizer::from_file(argv[a]);
    const auto vocab = std::make_shared<const grammar::Vocabulary>(tok);
    for (const auto& s : schemas) {
      const auto g =
          std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(grammar::json_schema_gbnf(s["schema"])));
      for (int k = 0; k < kSamples; ++k) {
        nlohmann::json line = generate(tok, vocab, g, static_cast<uint64_t>(k) + 1);
        line["vocab"] = std::filesystem::path(argv[a]).filename().string();
        line["schema"] = s["name"];
        std::cout << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      }
    }
  }
  return 0;
}
