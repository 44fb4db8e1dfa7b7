// `skainet plan`: the memory plan from the header alone. Exit code 3 when it does not fit the budget.
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "llama_compat.hpp"
#include "placement_args.hpp"

namespace skainet::cli {
namespace {

struct PlanArgs {
  std::string file;
  PlacementArgs placement;
  CompatFlags compat;
  std::string explain;
  std::string svg;
  bool json = false;
  bool tensors = false;
  bool check_tensors = false;
};

// The drawing, with the resident total re-priced at other contexts and slot counts.
void write_svg(const PlanArgs& a, const gguf::Header& header, const placement::MemoryProfile& profile,
               const placement::Platform& platform, const plan::MemoryPlan& p) {
  // AtomicFile renames over its target: never over the model being described.
  std::error_code ec;
  if (std::filesystem::equivalent(a.file, a.svg, ec) && !ec)
    throw InvalidArgument(
        fmt::format("--svg {} is the model file {} (same device and inode); write to another path", a.svg, a.file));
  std::vector<uint32_t> slots{1, 2, 4, 8};
  if (std::find(slots.begin(), slots.end(), p.slots) == slots.end()) slots.push_back(p.slots);
  std::sort(slots.begin(), slots.end());
  const plan::PlanOptions options = a.placement.plan_options();
  const std::vector<plan::ResidentPoint> curve = plan::resident_by_context(
      header, profile, platform, a.placement.form_overrides(), options, plan::context_steps(p), slots);
  const std::string svg = plan::render_svg(p, curve);
  base::AtomicFile out(a.svg);
  out.write(svg.data(), svg.size());
  out.commit();
}

int run_plan(const PlanArgs& a) {
  const placement::MemoryProfile profile = placement::MemoryProfile::preset(a.placement.profile);
  const gguf::Header header = gguf::read_header(a.file);
  const placement::Platform platform = placement::Platform::detect();
  const plan::MemoryPlan p =
      plan::make_plan(header, profile, platform, a.placement.form_overrides(), a.placement.plan_options());

  if (!a.svg.empty()) write_svg(a, header, profile, platform, p);
  if (!a.explain.empty()) {
    // One expert of a stack: "blk.3.ffn_up_exps.weight[7]".
    if (const auto ref = placement::parse_expert_ref(a.explain)) {
      for (const auto& d : p.tensors)
        if (d.tensor == ref->first) {
          const std::string text = placement::explain_expert(d, ref->second);
          if (a.json) {
            nlohmann::json j = nlohmann::json::parse(plan::to_json(d));
            j["expert"] = j.at("experts").at(ref->second);
            j.erase("experts");
            j["explanation"] = text;
            fmt::print("{}\n", j.dump(2));
          } else {
            fmt::print("{}", text);
          }
          return 0;
        }
      throw InvalidArgument(fmt::format("{}: no tensor named '{}'", a.file, ref->first));
    }
    for (const auto& d : p.tensors)
      if (d.tensor == a.explain) {
        const std::string text = placement::explain_long(d, profile, platform);
        if (a.json) {
          nlohmann::json j = nlohmann::json::parse(plan::to_json(d));
          j["explanation"] = text;
          fmt::print("{}\n", j.dump(2));
        } else {
          fmt::print("{}", text);
        }
        return 0;
      }
    throw InvalidArgument(fmt::format("{}: no tensor named '{}'", a.file, a.explain));
  }
  fmt::print("{}", a.json ? plan::to_json(p) + "\n" : plan::render_text(p, a.tensors));
  if (a.check_tensors) {
    // Reads every payload byte, unlike the rest of plan: the summary says what that cost.
    std::fflush(stdout);
    const convert::ValueCheck check = convert::check_values(header);
    fmt::print(a.json ? stderr : stdout, "{}{}\n", a.json ? "skainet: " : "", check.summary());
    check.throw_if_bad(a.file);
  }
  return p.fits ? 0 : kExitDoesNotFit;
}

}  // namespace

Subcommand add_plan(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* cmd =
      app.add_subcommand("plan", "Where every tensor will live and why, KV cache and slabs, from the header alone");
  add_model_option(cmd, args->file);  // a missing file is exit code 1, as in every command
  args->placement.add_to(cmd);
  args->placement.add_slots_to(cmd);
  args->placement.add_batch_to(cmd);
  add_placement_compat(cmd, args->compat);
  cmd->parse_complete_callback([args] {
    require_model(args->file);
    apply_placement_compat(args->compat, args->placement);
  });
  cmd->add_option("--explain", args->explain,
                  fmt::format("print one tensor's full decision, or one expert of a 3-D expert stack's: NAME[N] "
                              "({}[7])",
                              arch::layer_tensor_name(3, arch::Role::FfnUpExps)));
  cmd->add_flag("--json", args->json, "machine-readable plan");
  cmd->add_flag("--tensors", args->tensors, "list every tensor under its layer (default: one line per layer)");
  cmd->add_option("--svg", args->svg,
                  "also draw the plan into this SVG file: the resident split, the layers, and resident memory "
                  "against --ctx and --slots (written atomically)");
  cmd->add_flag("--check-tensors", args->check_tensors,
                "also decode every tensor and fail on NaN or infinity (reads the whole file; prints what it cost)");
  return {cmd, [args] { return run_plan(*args); }};
}

}  // namespace skainet::cli
