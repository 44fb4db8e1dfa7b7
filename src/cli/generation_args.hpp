// The options `run` and `chat` share (and `run -cnv`, which is `chat`): model, prompt, sampling,
// stop strings, conversation settings and the plan's options, registered once so the two cannot drift.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "llama_compat.hpp"
#include "placement_args.hpp"
#include "skainet/engine.hpp"

namespace skainet::cli {

struct GenerationArgs {
  std::string model;
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
  CLI::Option* prompt_option = nullptr;
  CLI::Option* n_predict_option = nullptr;

  // `chat`: the command is a conversation, so -cnv is not offered and -n defaults to -1.
  void add_to(CLI::App* cmd, bool chat_command);
  // Before running: -f read, -e applied (the parse itself checked the model and folded in -ctk/--no-mmap...).
  void finish_parse();
  generate::EngineOptions engine_options() const;
  // The seed used (a random one for -1), written into sampling.seed.
  uint64_t resolve_seed();
};

// Shared by run and chat: --check-tensors, then Engine::open, plan warnings on stderr.
std::unique_ptr<generate::Engine> open_engine(const GenerationArgs& args);
// run's three stats lines on stderr.
void print_run_stats(const generate::Engine& e, const generate::Stats& s, uint64_t seed);

// The conversation loop of `skainet chat` and `skainet run -cnv` (cmd_chat.cpp).
int run_chat(GenerationArgs& args);

}  // namespace skainet::cli
