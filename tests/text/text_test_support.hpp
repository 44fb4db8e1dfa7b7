// Helpers for the text tests: the shared vocabularies and llama.cpp's tokenizer test cases.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "skainet/text/text.hpp"

namespace skainet::text::testing {

inline std::filesystem::path text_data() { return std::filesystem::path(SKAINET_TEST_DATA); }
inline std::filesystem::path shared_models() { return std::filesystem::path(SKAINET_SHARED_MODELS); }
inline std::filesystem::path vocab_path(const std::string& name) {
  return shared_models() / "vocab" / ("ggml-vocab-" + name + ".gguf");
}

inline std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Loaded once per test binary: the big vocabularies take a moment to read.
inline const Tokenizer& shared_tokenizer(const std::string& name) {
  static std::map<std::string, Tokenizer> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, Tokenizer::from_file(vocab_path(name))).first;
  return it->second;
}

struct VocabCase {
  std::string input;
  std::vector<int32_t> expected;
};

// llama.cpp's test-tokenizer-0 format: inputs separated by "\n__ggml_vocab_test__\n" (the file ends
// with one), expected ids one line per input, space-separated.
inline std::vector<VocabCase> read_cases(const std::filesystem::path& inp_path, const std::filesystem::path& out_path) {
  const std::string inp = read_bytes(inp_path);
  const std::string out = read_bytes(out_path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<VocabCase> cases;
  for (size_t at = 0;;) {
    const size_t m = inp.find(sep, at);
    if (m == std::string::npos) break;
    cases.push_back({inp.substr(at, m - at), {}});
    at = m + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line) && i < cases.size()) {
    std::istringstream ids(line);
    int64_t id;
    while (ids >> id) cases[i].expected.push_back(static_cast<int32_t>(id));
    ++i;
  }
  return cases;
}

inline std::vector<VocabCase> read_cases(const std::string& name) {
  return read_cases(vocab_path(name).string() + ".inp", vocab_path(name).string() + ".out");
}

}  // namespace skainet::text::testing
