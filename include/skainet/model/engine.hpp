// skainet::generate::Engine — everything `skainet run` and `skainet bench` set up, in the order of
// DESIGN.md §7: header → plan → load (obeying the plan) → KV cache → model → tokenizer.
//
//   generate::EngineOptions o;  o.plan.ctx = 512;  o.threads = 2;
//   auto e = generate::Engine::open("model.gguf", o);          // BudgetError before any payload read
//   generate::Generator gen = e->generator(sampler);
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "skainet/model/generate.hpp"

namespace skainet::generate {

struct EngineOptions {
  std::string profile = "default";
  plan::PlanOptions plan;
  placement::FormOverrides overrides;
  int threads = 2;
  bool progress = true;
  // open() refuses, before loading anything, a plan whose resident total exceeds
  // plan.available_memory (load::BudgetError) unless this is set.
  bool force = false;
  // false: load the weights and the tokenizer only; the caller builds its own KV caches, models and
  // contexts from the plan (serve's slots, plan.slots of them). true: one sequence (kv, llama, ctx).
  bool sequence = true;
};

class Engine {
 public:
  static std::unique_ptr<Engine> open(const std::filesystem::path& path, const EngineOptions& options);

  Generator generator(text::Sampler& sampler);
  // Slab sizes the plan gives for a step (the larger of decode and prefill).
  uint64_t step_slab_bytes() const noexcept;

  gguf::Header header;
  placement::MemoryProfile profile;
  plan::MemoryPlan plan;
  memory::ModelScope scope{"model"};
  load::LoadedModel loaded;
  std::optional<load::KvCacheStore> kv;
  std::optional<model::Llama> llama;
  std::optional<text::Tokenizer> tokenizer;  // from the same header: metadata only
  std::unique_ptr<memory::ExecutionContext> ctx;
  double load_seconds = 0;

 private:
  Engine() = default;
};

}  // namespace skainet::generate
