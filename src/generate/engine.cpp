#include <chrono>

#include <fmt/format.h>

#include "skainet/model/engine.hpp"

namespace skainet::generate {

std::unique_ptr<Engine> Engine::open(const std::filesystem::path& path, const EngineOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<Engine> e(new Engine());
  e->header = gguf::read_header(path);
  e->profile = placement::MemoryProfile::preset(options.profile);
  e->plan = plan::make_plan(e->header, e->profile, placement::Platform::detect(), options.overrides, options.plan);
  if (!e->plan.model || !e->plan.kv)
    throw Error(fmt::format("{}: not a llama-family model (no general.architecture with hyper-parameters and tensors)",
                            path.string()));
  if (!e->plan.model->family)
    throw Error(fmt::format("{}: architecture '{}' is not supported (supported: {})", path.string(),
                            e->plan.model->architecture, arch::supported_architectures()));
  if (!options.force && e->plan.has_warning(plan::PlanWarningKind::ExceedsAvailableMemory)) {
    const uint64_t available = *options.plan.available_memory;
    throw load::BudgetError(
        fmt::format("{}: the plan{} needs {} resident but the machine has {} available now (MemAvailable); "
                    "refusing before loading anything (lower --ctx{}, or give --force to load anyway)",
                    path.string(), e->plan.slots > 1 ? fmt::format(" for {} slots", e->plan.slots) : std::string(),
                    base::format_bytes(e->plan.totals.resident()), base::format_bytes(available),
                    e->plan.slots > 1 ? " or --slots" : ""),
        e->plan.totals.resident(), available);
  }
  // ResolvedGguf refuses a plan over budget here, before any payload is read.
  load::ResolvedGguf loader(e->header, e->plan);
  e->loaded = loader.load(e->scope, {.progress = options.progress, .threads = options.threads});
  e->tokenizer.emplace(text::Tokenizer::from_gguf(e->header));
  if (options.sequence) e->sequence = e->new_sequence(options.threads);
  e->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return e;
}

std::unique_ptr<Sequence> Engine::new_sequence(int threads, SequenceParts parts) {
  return std::make_unique<Sequence>(plan, scope, loaded, *tokenizer, threads, parts);
}

}  // namespace skainet::generate
