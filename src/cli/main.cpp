// Entry point: CLI11 subcommands; every library error becomes "skainet: error: <message>" and exit
// code 1, a command-line mistake exit code 2, so scripts can tell the two apart.
#include <cstdio>
#include <exception>

#include <fmt/format.h>

#include "cli.hpp"
#include "skainet/load.hpp"

int main(int argc, char** argv) {
  CLI::App app{"skainet: inspect, synthesize and quantize GGUF models"};
  app.require_subcommand(1);
  const skainet::cli::Subcommand commands[] = {
      skainet::cli::add_inspect(app),
      skainet::cli::add_synth(app),
      skainet::cli::add_quantize(app),
      skainet::cli::add_plan(app),
      skainet::cli::add_run(app),
      skainet::cli::add_tokenize(app),
      skainet::cli::add_bench(app),
      skainet::cli::add_export(app),
  };
  try {
    app.parse(argc, argv);
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
