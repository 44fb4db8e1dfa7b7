// `skainet tokenize`: as llama-tokenize, for checking tokenizers against other engines.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli.hpp"
#include "llama_compat.hpp"
#include "skainet/text/text.hpp"

namespace skainet::cli {
namespace {

struct TokenizeArgs {
  std::string model;
  std::string prompt;
  bool ids = false;
  bool no_bos = false;
  bool no_parse_special = false;
  std::string decode;  // "1,2,3": ids back to text (the IREE runner uses it)
  CLI::Option* prompt_option = nullptr;
};

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(at, end - at);
    try {
      size_t used = 0;
      const long v = std::stol(word, &used);
      if (used != word.size() || v < INT32_MIN || v > INT32_MAX) throw std::out_of_range(word);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::logic_error&) {
      throw InvalidArgument(fmt::format("--decode: '{}' is not a token id", word));
    }
    at = end + 1;
  }
  return ids;
}

int run(const TokenizeArgs& a) {
  // Only the header: the vocabulary is metadata, the weights are never touched.
  const text::Tokenizer tok = text::Tokenizer::from_file(a.model);
  if (!a.decode.empty()) {
    const std::vector<int32_t> ids = parse_ids(a.decode);
    for (int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size())
        throw InvalidArgument(
            fmt::format("--decode: token id {} is outside the vocabulary of {}", id, tok.vocab_size()));
    fmt::print("{}\n", tok.decode(ids));
    return 0;
  }
  if (a.prompt_option->count() == 0) throw InvalidArgument("tokenize: -p TEXT or --decode IDS is required");
  const std::vector<int32_t> ids = tok.encode(a.prompt, !a.no_bos, !a.no_parse_special);
  if (a.ids) {
    fmt::print("[{}]\n", fmt::join(ids, ", "));
    return 0;
  }
  for (int32_t id : ids) fmt::print("{:6} -> '{}'\n", id, tok.token_to_piece(id, true));
  return 0;
}

}  // namespace

Subcommand add_tokenize(CLI::App& app) {
  auto a = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Tokenize text with a model's vocabulary (as llama-tokenize)");
  add_model_option(cmd, a->model,
                   "GGUF model or vocabulary file");  // a missing file is exit code 1, as in every command
  cmd->parse_complete_callback([a] { require_model(a->model); });
  a->prompt_option = cmd->add_option("-p,--prompt", a->prompt, "text");
  cmd->add_option("--decode", a->decode, "comma-separated ids: print their text instead");
  cmd->add_flag("--ids", a->ids, "print only the ids, as a list");
  cmd->add_flag("--no-bos", a->no_bos, "do not add the BOS token");
  cmd->add_flag("--no-parse-special", a->no_parse_special, "treat '<s>' and friends as plain text");
  return {cmd, [a] { return run(*a); }};
}

}  // namespace skainet::cli
