// Entry point: CLI11 subcommands; every library error becomes "skainet: error: <message>" and exit
// code 1, a command-line mistake exit code 2, so scripts can tell the two apart. llama.cpp's
// multi-letter short flags are rewritten to long ones and every word checked against the commands'
// options (command_line.hpp) before CLI11 parses them.
#include <algorithm>
#include <cstdio>
#include <exception>

#include <fmt/format.h>

#include "cli.hpp"
#include "command_line.hpp"
#include "llama_compat.hpp"
#include "skainet/model/load.hpp"

#ifndef SKAINET_VERSION
#define SKAINET_VERSION "unknown"
#endif

int main(int argc, char** argv) {
  CLI::App app{
      "skainet: plan, run and chat with GGUF language models on the CPU; inspect, synthesize, quantize, export",
      "skainet"};
  app.set_version_flag("--version", "skainet " SKAINET_VERSION);
  // --help shows every default. A single-value option given twice takes the last, as llama.cpp does
  // (`-n 16 --n-predict 5` is 5); the repeatable ones (--stop, -ot, bench's lists) keep collecting,
  // since CLI11 trims only to the values an option holds. Subcommands inherit both.
  app.option_defaults()->always_capture_default()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.require_subcommand(1);
  const skainet::cli::Subcommand commands[] = {
      skainet::cli::add_inspect(app), skainet::cli::add_synth(app),    skainet::cli::add_quantize(app),
      skainet::cli::add_plan(app),    skainet::cli::add_run(app),      skainet::cli::add_chat(app),
      skainet::cli::add_serve(app),   skainet::cli::add_tokenize(app), skainet::cli::add_bench(app),
      skainet::cli::add_export(app),
  };
  try {
    std::vector<std::string> args = skainet::cli::read_command_line(app, argc, argv);
    std::reverse(args.begin(), args.end());  // CLI11 takes its vector of arguments last to first
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    for (const auto& command : commands)
      if (command.app->parsed()) return command.run();
  } catch (const skainet::load::BudgetError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "skainet: error: {}\n", e.what());
    return skainet::cli::kExitDoesNotFit;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "skainet: error: {}\n", e.what());
    return 1;
  }
  return 2;
}
