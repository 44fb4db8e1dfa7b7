// Options shared by every command that plans a model (plan, run, bench): profile, context, KV type,
// budget, forms. One definition so the commands cannot drift apart in names or meaning.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "skainet/model/placement.hpp"
#include "skainet/model/plan.hpp"

namespace skainet::cli {

struct PlacementArgs {
  std::string profile = "default";
  uint32_t n_ctx = 0;
  std::string budget;
  std::string kv_type;         // K and V
  std::string k_type, v_type;  // -ctk/-ctv (llama.cpp's), over --kv-type for their own cache
  uint32_t prefill_chunk = 0;
  std::string weight_form;
  std::vector<std::string> overrides;
  uint32_t slots = 1;
  uint32_t batch = 0;        // 0: the plan's default
  std::string prompt_cache;  // --cache-ram: llama-server's MiB, or a size ("512M"); empty or 0: none
  std::string expert_stats;  // --expert-stats FILE: routing statistics to place experts by

  void add_to(CLI::App* cmd);
  // --slots and --cache-ram: only the commands that price or serve several sequences (plan, serve).
  void add_slots_to(CLI::App* cmd);
  // --batch: only the command that prices a batched step without running one (plan).
  void add_batch_to(CLI::App* cmd);
  placement::FormOverrides form_overrides() const;
  plan::PlanOptions plan_options() const;
};

}  // namespace skainet::cli
