// `skainet tokenize`: as llama-tokenize, for checking tokenizers against other engines.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli.hpp"
#include "skainet/text.hpp"

namespace skainet::cli {
namespace {

struct TokenizeArgs {
  std::string model;
  std::string prompt;
  bool ids = false;
  bool no_bos = false;
  bool no_parse_special = false;
};

int run(const TokenizeArgs& a) {
  // Only the header: the vocabulary is metadata, the weights are never touched.
  const text::Tokenizer tok = text::Tokenizer::from_file(a.model);
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
  cmd->add_option("-m,--model", a->model, "GGUF model or vocabulary file")->required()->check(CLI::ExistingFile);
  cmd->add_option("-p,--prompt", a->prompt, "text")->required();
  cmd->add_flag("--ids", a->ids, "print only the ids, as a list");
  cmd->add_flag("--no-bos", a->no_bos, "do not add the BOS token");
  cmd->add_flag("--no-parse-special", a->no_parse_special, "treat '<s>' and friends as plain text");
  return {cmd, [a] { return run(*a); }};
}

}  // namespace skainet::cli
