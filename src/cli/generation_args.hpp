// The options `run`, `chat` and `serve` share (and `run -cnv`, which is `chat`): model, prompt, sampling,
// stop strings, conversation settings and the plan's options, registered once so they cannot drift.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "llama_compat.hpp"
#include "placement_args.hpp"
#include "skainet/model/engine.hpp"
#include "skainet/model/speculative.hpp"
#include "skainet/text/grammar.hpp"

namespace skainet::cli {

enum class Command : uint8_t { Run, Chat, Serve };

struct GenerationArgs {
  std::string model;
  ModelAndPrompt model_and_prompt;  // run and chat (serve: -m or MODEL only)
  std::string prompt;
  std::string prompt_file;
  bool escape = false;
  int32_t n_predict = 128;
  int threads = static_cast<int>(base::default_threads());
  int64_t seed = -1;
  text::SamplerConfig sampling{.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f};
  PlacementArgs placement;
  CompatFlags compat;
  std::vector<std::string> stops;  // -r/--reverse-prompt and --stop
  bool no_display_prompt = false;
  bool ignore_eos = false;
  bool force = false;
  bool check_tensors = false;
  // Conversation (chat, run -cnv).
  bool conversation = false;
  std::string system_prompt;
  std::string chat_template;
  // Control-token text in a message's content becomes the token (the old behaviour; default: text).
  bool special_in_content = false;
  // A stats line on stderr after every reply (default: only on /stats).
  bool show_stats = false;
  // Speculative decoding (--spec-type, -md, --draft-max/--draft-min, --spec-ngram-size-n/-m).
  std::string spec_type = "none";
  generate::SpecOptions spec;
  // Output constrained to a grammar: --grammar, --grammar-file, -j/--json-schema, -jf/--json-schema-file
  // (llama.cpp's spellings); compiled by finish_parse.
  std::string grammar_text, grammar_file, json_schema, json_schema_file;
  std::shared_ptr<const grammar::Grammar> output_grammar;
  CLI::Option* prompt_option = nullptr;
  CLI::Option* n_predict_option = nullptr;

  // `chat`: the command is a conversation, so -cnv is not offered and -n defaults to -1. `serve`: no
  // prompt options (requests bring them); the sampling options are the defaults of absent fields.
  void add_to(CLI::App* cmd, Command command);
  // Before running: -f read, -e applied (the parse itself checked the model and folded in -ctk/--no-mmap...).
  void finish_parse();
  generate::EngineOptions engine_options() const;
  // The seed used (a random one for -1), written into sampling.seed.
  uint64_t resolve_seed();
};

// Shared by run and chat: --check-tensors, then Engine::open, plan warnings on stderr.
std::unique_ptr<generate::Engine> open_engine(const GenerationArgs& args);
// The drafter the speculation options ask for (none: an empty Speculation), set on `gen`.
generate::Speculation start_speculation(const GenerationArgs& args, const generate::Engine& engine,
                                        generate::Generator& gen);
// The sampler of `sequence` held to --grammar/--json-schema where one was given (after sample_with).
void constrain_output(const GenerationArgs& args, const generate::Engine& engine, generate::Sequence& sequence);
// run's stats lines on stderr (the speculation's when it drafted).
void print_run_stats(const generate::Engine& e, const generate::Stats& s, uint64_t seed);

// The largest user-named text files the CLI reads (docs/cli.md): a chat template (--chat-template
// FILE) and a prompt file (-f FILE). Larger ones, and anything not a regular file, are refused.
inline constexpr uint64_t kChatTemplateMaxBytes = uint64_t{1} << 20;  // 1 MiB
inline constexpr uint64_t kPromptFileMaxBytes = uint64_t{64} << 20;   // 64 MiB
inline constexpr uint64_t kGrammarFileMaxBytes = uint64_t{1} << 20;   // 1 MiB: --grammar-file, -jf

// The chat template a conversation renders with: --chat-template (a file or a built-in name), else the
// model's, else the built-in chatml; end_of_turn is a stop string for a built-in one (cmd_chat.cpp).
struct ChosenTemplate {
  std::string source;
  std::string description;  // for the stats line and messages
  std::optional<std::string> end_of_turn;
};
ChosenTemplate choose_template(const GenerationArgs& a, const gguf::Header& header);

// The conversation loop of `skainet chat` and `skainet run -cnv` (cmd_chat.cpp).
int run_chat(GenerationArgs& args);

}  // namespace skainet::cli
