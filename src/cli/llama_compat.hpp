// llama.cpp's command-line habits, in one place: its multi-letter short flags (-ngl, -cnv, -ctk, ...),
// which CLI11 would split into single letters (`-ngl 99` read as `-n gl`), mapped to our long names
// before CLI11 sees them; the flags that mean nothing on a CPU (--mlock, -ngl) accepted and answered;
// -ctk/-ctv/--no-mmap mapped onto the plan's options; the model given as -m or as a positional in
// every command that reads one.
//
//   std::vector<std::string> args = cli::rewrite_llama_args(argc, argv);   // throws UnknownShortFlag
//   CompatFlags compat;  cli::add_placement_compat(cmd, compat);
//   cli::apply_placement_compat(compat, placement);                         // after parsing
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "placement_args.hpp"

namespace skainet::cli {

// llama.cpp's multi-letter short spellings and the long options they mean here.
struct LlamaAlias {
  std::string_view llama;
  std::string_view ours;
};
inline constexpr LlamaAlias kLlamaAliases[] = {
    {"-cnv", "--conversation"},       {"-sys", "--system-prompt"},  {"-ctk", "--cache-type-k"},
    {"-ctv", "--cache-type-v"},       {"-ot", "--override-tensor"}, {"-ngl", "--n-gpu-layers"},
    {"-no-cnv", "--no-conversation"}, {"-np", "--parallel"},        {"-md", "--spec-draft-model"},
};

// argv without the program name, the aliases replaced by their long names. A single-dash word of
// several letters that is neither an alias nor the value of the option before it is refused by its
// full name (CLI11 would read `-xyz` as `-x yz` when -x takes a value and blame the value).
std::vector<std::string> rewrite_llama_args(int argc, char** argv);

// -ctk/-ctv/--no-mmap/--mlock/-ngl for the commands that plan a model.
struct CompatFlags {
  std::string cache_type_k, cache_type_v;
  bool no_mmap = false, mlock = false;
  std::optional<std::string> n_gpu_layers;
};
void add_placement_compat(CLI::App* cmd, CompatFlags& flags);
// Folds them into the plan's options; CLI::ValidationError (exit code 2) for a combination the plan
// cannot honour (-ctk f16 -ctv f32: one cache type for K and V). Prints the "ignored" answers.
void apply_placement_compat(const CompatFlags& flags, PlacementArgs& placement);

// -m/--model and a MODEL positional writing the same string; call require_model after parsing.
void add_model_option(CLI::App* cmd, std::string& model, std::string_view help = "GGUF model");
void require_model(const std::string& model);  // CLI::RequiredError when neither was given

// llama.cpp's -e: \n \r \t \a \b \f \v \\ \' \" \? and \xHH become the characters; others stay as written.
std::string process_escapes(std::string_view text);

}  // namespace skainet::cli
