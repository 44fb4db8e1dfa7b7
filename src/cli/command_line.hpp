// The command line made ready for CLI11: llama.cpp's multi-letter short flags, which CLI11 would split
// into single letters (`-ngl 99` read as `-n gl`), rewritten to their long names (llama_compat.hpp),
// and every word checked against the commands and options CLI11 was given, because CLI11 takes an unknown option's
// value for a positional (`run -m M --tmep 0.5`:
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
//   std::vector<std::string> args = cli::read_command_line(app, argc, argv);  // CLI::ExtrasError: exit code 2
//   app.parse(args);                                        // (reversed: CLI11 reads it last to first)
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace skainet::cli {

// argv without the program name, as CLI11 should parse it (`-ngl 99`: `--n-gpu-layers 99`; `-fa on`:
// `--flash-attn=on`; `help run`: `run --help`); throws on the first unknown word. The word after an
// option that takes a value is that value, never rewritten nor checked (`-p -ngl` is the prompt "-ngl").
std::vector<std::string> read_command_line(const CLI::App& app, int argc, char** argv);

// The number of one-letter insertions, deletions, substitutions and swaps of neighbours that turn `a`
// into `b` (a swap is one edit: `--tmep` is one from `--temp`).
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace skainet::cli
