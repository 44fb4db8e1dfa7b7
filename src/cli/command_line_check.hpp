// The words of a command line checked against the commands and options CLI11 was given, before
// CLI11 parses them: CLI11 takes an unknown option's value for a positional (`run -m M --tmep 0.5`:
// "--model excludes MODEL") and an unknown command for a missing one ("A subcommand is required").
// Each unknown word is named, with the nearest real one when one is close enough to be a typo:
//
//   unknown option '--tmep' for 'run'; did you mean '--temp'?
//   unknown command 'runn'; did you mean 'run'?
//
// llama.cpp's flags that are not implemented (kLlamaFlags' Refuse entries) are refused by name, and
// other tools' command words answered: `help [COMMAND]` is --help, Ollama's `list` and `pull` say that
// a model is a file.
//
//   args = cli::check_command_line(app, std::move(args));   // throws CLI::ExtrasError (exit code 2)
//   app.parse(args);                                        // (reversed: CLI11 reads it last to first)
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace skainet::cli {

// `args` as CLI11 should parse them (`help run` becomes `run --help`); throws on the first unknown word.
std::vector<std::string> check_command_line(const CLI::App& app, std::vector<std::string> args);

// The number of one-letter insertions, deletions, substitutions and swaps of neighbours that turn `a`
// into `b` (a swap is one edit: `--tmep` is one from `--temp`).
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace skainet::cli
