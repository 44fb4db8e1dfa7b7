// `skainet export`: records the model `run` executes to StableHLO + its parameters for IREE
// (docs/export.md). Nothing is written until the whole module has been recorded and emitted.
#include <fmt/format.h>

#include "cli.hpp"
#include "placement_args.hpp"
#include "skainet/model/record.hpp"

namespace skainet::cli {
namespace {

struct ExportArgs {
  std::string file, model, out;
  PlacementArgs placement;
  int64_t seq_len = 0;
  std::string entries = "prefill,decode";
  std::string params = "irpa";
  std::string kernels = "engine";
  bool quiet = false;
};

int run_export(const ExportArgs& a) {
  const std::string file = !a.model.empty() ? a.model : a.file;
  if (file.empty()) throw InvalidArgument("export: no model given (MODEL or -m MODEL)");
  record::ExportOptions o;
  o.out_dir = a.out;
  o.profile = a.placement.profile;
  o.plan = a.placement.plan_options();
  o.overrides = a.placement.form_overrides();
  o.seq_len = a.seq_len;
  o.prefill = o.decode = false;
  for (std::string_view rest = a.entries; !rest.empty();) {
    const size_t comma = rest.find(',');
    const std::string_view word = rest.substr(0, comma);
    if (word == "prefill")
      o.prefill = true;
    else if (word == "decode")
      o.decode = true;
    else
      throw InvalidArgument(fmt::format("--entry: unknown function '{}' (prefill, decode)", word));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  if (a.params == "irpa")
    o.params = record::ParamsMode::Irpa;
  else if (a.params == "gguf")
    o.params = record::ParamsMode::Gguf;
  else
    throw InvalidArgument(fmt::format("--params: '{}' is neither irpa nor gguf", a.params));
  const auto form = record::parse_kernel_form(a.kernels);
  if (!form)
    throw InvalidArgument(fmt::format("--kernels: '{}' is none of engine, stablehlo, stablehlo-flat", a.kernels));
  o.kernels = *form;
  o.progress = !a.quiet;
  const record::ExportReport r = record::export_model(file, o);
  // The plan's warnings, as `run` prints them: a --ctx beyond the trained context, a resident size
  // beyond MemAvailable. Export records symbolically and holds none of it now, so it warns where
  // `run` would refuse the second without --force: the module will need that memory where it runs.
  for (const std::string& w : r.warnings) fmt::print(stderr, "skainet: warning: {}\n", w);
  if (!a.quiet) fmt::print("{}", r.text());
  return 0;
}

}  // namespace

Subcommand add_export(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand("export", "Record the model to StableHLO MLIR + an IREE parameter archive");
  // No ExistingFile check: a missing model is an error (exit 1) like in every command, not a usage mistake.
  cmd->add_option("file", args->file, "GGUF model");
  cmd->add_option("-m,--model", args->model, "GGUF model (same as the positional)");
  cmd->add_option("-o,--out", args->out, "output folder: model.mlir, model.irpa, report.txt")->required();
  CLI::Option* seq_len =
      cmd->add_option("--seq-len", args->seq_len, "tokens of the prefill function, 1 to --ctx (default: min(ctx, 64))");
  cmd->add_option("--entry", args->entries, "functions to export: prefill,decode")->capture_default_str();
  cmd->add_option("--params", args->params, "irpa (write model.irpa) or gguf (IREE reads the GGUF in place)")
      ->capture_default_str();
  cmd->add_option("--kernels", args->kernels,
                  "engine (matmuls and attention call this CPU's kernels: llvm-cpu), stablehlo (any IREE target) or "
                  "stablehlo-flat (no fused one-row products: IREE's Vulkan backend)")
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", args->quiet, "no progress bar and no report on stdout");
  args->placement.add_to(cmd);
  // An explicit --seq-len is a token count: -5 or 0 used to become the default, 64, silently. One
  // above --ctx is refused by export_model, which knows the planned context.
  cmd->parse_complete_callback([args, seq_len] {
    if (seq_len->count() > 0 && args->seq_len <= 0)
      throw CLI::ValidationError(
          "--seq-len",
          fmt::format("'{}' is not a positive token count (leave it out for min(ctx, 64))", seq_len->results().back()));
  });
  return {cmd, [args] { return run_export(*args); }};
}

}  // namespace skainet::cli
