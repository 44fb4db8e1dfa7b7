// The `skainet` command: each subcommand registers its options on the CLI11 app and hands back
// the function that runs it once the command line has been parsed.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "skainet/model/convert.hpp"

namespace skainet::cli {

struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Subcommand add_inspect(CLI::App& app);
Subcommand add_synth(CLI::App& app);
Subcommand add_quantize(CLI::App& app);
Subcommand add_plan(CLI::App& app);
Subcommand add_run(CLI::App& app);
Subcommand add_tokenize(CLI::App& app);
Subcommand add_bench(CLI::App& app);
Subcommand add_export(CLI::App& app);
Subcommand add_chat(CLI::App& app);
Subcommand add_serve(CLI::App& app);

// Exit code of plan/run/bench when the plan does not fit its budget (1: an error, 2: a usage mistake).
inline constexpr int kExitDoesNotFit = 3;

// "1.1M", "260.0K": parameter counts for people.
std::string human_count(uint64_t n);
// "4096 x 32000"
std::string shape_text(const std::vector<uint64_t>& shape);
// The end-of-run summary shared by synth and quantize: types used, fallbacks with their reasons,
// and with `verbose` every tensor's decision.
void print_report(const convert::Report& report, bool verbose);

}  // namespace skainet::cli
