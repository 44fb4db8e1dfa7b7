#include "placement_args.hpp"

#include <fmt/format.h>

#include "skainet/io/arch.hpp"

namespace skainet::cli {
namespace {

GgmlType kv_cache_type(const std::string& name, std::string_view flag) {
  const std::optional<GgmlType> t = parse_type_name(name);
  if (t && plan::is_kv_cache_type(*t)) return *t;
  throw InvalidArgument(fmt::format("{} '{}': a KV cache holds {}", flag, name, plan::kv_cache_type_list()));
}

// llama-server's --cache-ram N is in MiB (-1: no limit); a size with a unit is read as --budget's. The
// plan prices the bound, so an unbounded cache is refused.
uint64_t prompt_cache_bytes(const std::string& text) {
  if (text == "-1")
    throw InvalidArgument("--cache-ram -1 (no limit): the plan prices the prompt cache, so it needs a bound");
  try {
    const bool mib = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
    return placement::parse_bytes(mib ? text + "M" : text);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("--cache-ram: {}", e.what()));
  }
}

}  // namespace

void PlacementArgs::add_to(CLI::App* cmd) {
  cmd->add_option("--profile", profile, "memory profile: default | low-memory | throughput | in-memory | strict");
  cmd->add_option("-c,--ctx,--ctx-size", n_ctx, "context length (default: the model's, at most 4096)");
  cmd->add_option("--budget", budget, "resident memory allowed, e.g. 2G");
  cmd->add_option("--kv-type", kv_type,
                  "KV cache type of K and V: f16 (default), f32, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1");
  cmd->add_option("--cache-type-k", k_type, "llama.cpp's -ctk: the K cache's type (as --kv-type, K only)");
  cmd->add_option("--cache-type-v", v_type, "llama.cpp's -ctv: the V cache's type (as --kv-type, V only)");
  cmd->add_option("--prefill-chunk", prefill_chunk, "tokens per prefill step (default: the profile's)");
  cmd->add_option("--weight-form", weight_form, "uniform form for all weights, e.g. f32,heap");
  cmd->add_option("--override-tensor", overrides,
                  fmt::format("REGEX=FORM, first match wins, e.g. {}=f32,heap", arch::role_name(arch::Role::FfnDown)));
  cmd->add_option("--expert-stats", expert_stats,
                  "a mixture of experts' routing statistics (run --record-expert-stats writes them): under --budget "
                  "the hottest experts that fit are pinned");
}

void PlacementArgs::add_slots_to(CLI::App* cmd) {
  cmd->add_option(
         "--slots,--parallel", slots,
         "sequences served at once, each with its own KV cache, advanced together in one batch (llama.cpp: -np/--parallel)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--cache-ram", prompt_cache,
                  "prompt cache: slots' prefixes kept beyond the slots, up to this size, in MiB as llama-server's "
                  "(or e.g. 512M, 2G; default 0: none), priced by the plan");
}

void PlacementArgs::add_batch_to(CLI::App* cmd) {
  cmd->add_option("--batch", batch,
                  "rows of a batched step over the slots, at least --slots (default: prefill chunk + slots - 1)")
      ->check(CLI::Range(1, 65536));
}

placement::FormOverrides PlacementArgs::form_overrides() const {
  placement::FormOverrides o;
  for (const auto& text : overrides) o.per_tensor.push_back(placement::TensorOverride::parse(text));
  if (!weight_form.empty()) o.uniform = placement::WeightForm::parse(weight_form);
  return o;
}

plan::PlanOptions PlacementArgs::plan_options() const {
  plan::PlanOptions options;
  options.n_ctx = n_ctx;
  options.slots = slots;
  // `plan --slots N` prices serving N: one batch for all (serve sets it for one slot too).
  options.batch_slots = slots > 1;
  if (batch) options.batch = batch;
  options.available_memory = base::available_memory();
  if (!budget.empty()) options.budget = placement::parse_bytes(budget);
  if (prefill_chunk) options.prefill_chunk = prefill_chunk;
  if (!kv_type.empty()) options.k_type = options.v_type = kv_cache_type(kv_type, "--kv-type");
  if (!k_type.empty()) options.k_type = kv_cache_type(k_type, "-ctk/--cache-type-k");
  if (!v_type.empty()) options.v_type = kv_cache_type(v_type, "-ctv/--cache-type-v");
  if (!prompt_cache.empty()) options.prompt_cache = prompt_cache_bytes(prompt_cache);
  if (!expert_stats.empty()) options.expert_stats = plan::ExpertStats::read(expert_stats);
  return options;
}

}  // namespace skainet::cli
