// skainet::generate::Engine — everything `skainet run` and `skainet bench` set up, in the order of
// DESIGN.md §7: header → plan → load (obeying the plan) → tokenizer → a Sequence (KV cache, model,
// context, generator).
//
//   generate::EngineOptions o;  o.plan.n_ctx = 512;  o.threads = 2;
//   auto e = generate::Engine::open("model.gguf", o);          // BudgetError before any payload read
//   generate::Generator& gen = e->sequence->sample_with(sampling);
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "skainet/model/sequence.hpp"

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
  // false: load the weights and the tokenizer only; the caller builds its own sequences over them
  // (serve's slots, plan.slots of them, with new_sequence). true: one sequence of its own.
  bool sequence = true;
};

class Engine {
 public:
  static std::unique_ptr<Engine> open(const std::filesystem::path& path, const EngineOptions& options);

  // A sequence over the loaded weights, its KV cache allocated in `scope`, its context `threads` wide
  // (SequenceParts::KvCache: a generate::Batch member, threads unused).
  std::unique_ptr<Sequence> new_sequence(int threads, SequenceParts parts = SequenceParts::Whole);

  gguf::Header header;
  placement::MemoryProfile profile;
  plan::MemoryPlan plan;
  memory::ModelScope scope{"model"};
  load::LoadedModel loaded;
  std::optional<text::Tokenizer> tokenizer;  // from the same header: metadata only
  std::unique_ptr<Sequence> sequence;        // null when opened with sequence = false
  double load_seconds = 0;

 private:
  Engine() = default;
};

}  // namespace skainet::generate
