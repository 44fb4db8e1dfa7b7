// Experts as decisions of their own: the routing statistics file (ExpertStats) and the pass that
// pins the hottest experts a budget can hold (place_experts).
#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "skainet/model/plan.hpp"

namespace skainet::plan {
namespace {

using json = nlohmann::json;
using placement::Decision;
using placement::ExpertReason;
using placement::ExpertSlice;

constexpr std::string_view kFormat = "skainet-expert-stats";

bool is_expert_stack(const Decision& d, const arch::ModelShape& m) {
  const auto name = arch::parse_tensor_name(d.tensor);
  if (!name || !name->layer || *name->layer >= m.layers) return false;
  const bool stack = name->role == arch::Role::FfnGateExps || name->role == arch::Role::FfnUpExps ||
                     name->role == arch::Role::FfnDownExps;
  return stack && d.shape.size() == 3 && m.experts > 0 && d.shape[2] == m.experts && d.file_bytes % m.experts == 0;
}

}  // namespace

ExpertStats ExpertStats::for_model(const arch::ModelShape& m, std::string model) {
  ExpertStats s;
  s.model = std::move(model);
  s.architecture = m.architecture;
  s.layers = m.layers, s.experts = m.experts, s.experts_used = m.experts_used;
  s.routed.assign(uint64_t{m.layers} * m.experts, 0);
  return s;
}

double ExpertStats::share(uint32_t layer, uint32_t expert) const noexcept {
  if (tokens == 0 || layer >= layers || expert >= experts) return 0;
  return static_cast<double>(routed[uint64_t{layer} * experts + expert]) / static_cast<double>(tokens);
}

std::string ExpertStats::to_json() const {
  json j = {{"format", kFormat},
            {"version", kVersion},
            {"model", model},
            {"architecture", architecture},
            {"layers", layers},
            {"experts", experts},
            {"experts_used", experts_used},
            {"tokens", tokens}};
  j["routed"] = json::array();
  for (uint32_t l = 0; l < layers; ++l)
    j["routed"].push_back(
        std::vector<uint64_t>(routed.begin() + uint64_t{l} * experts, routed.begin() + uint64_t{l + 1} * experts));
  return j.dump(1);
}

ExpertStats ExpertStats::from_json(std::string_view text, std::string_view origin) {
  const auto bad = [&](std::string_view what) {
    return InvalidArgument(fmt::format("{}: not an expert statistics file: {}", origin, what));
  };
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw bad(fmt::format("malformed JSON ({})", e.what()));
  }
  if (!j.is_object() || j.value("format", std::string()) != kFormat)
    throw bad(fmt::format("\"format\" is not \"{}\"", kFormat));
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != kVersion)
    throw bad(fmt::format("version {} (this build reads version {})",
                          j.contains("version") ? j["version"].dump() : "none", kVersion));
  ExpertStats s;
  try {
    s.model = j.at("model").get<std::string>();
    s.architecture = j.at("architecture").get<std::string>();
    s.layers = j.at("layers").get<uint32_t>();
    s.experts = j.at("experts").get<uint32_t>();
    s.experts_used = j.at("experts_used").get<uint32_t>();
    s.tokens = j.at("tokens").get<uint64_t>();
    const json& routed = j.at("routed");
    if (!routed.is_array() || routed.size() != s.layers)
      throw bad(
          fmt::format("\"routed\" has {} layers, \"layers\" says {}", routed.is_array() ? routed.size() : 0, s.layers));
    for (uint32_t l = 0; l < s.layers; ++l) {
      const auto counts = routed[l].get<std::vector<uint64_t>>();
      if (counts.size() != s.experts)
        throw bad(fmt::format("layer {} has {} counts, \"experts\" says {}", l, counts.size(), s.experts));
      const uint64_t sum = std::accumulate(counts.begin(), counts.end(), uint64_t{0});
      if (sum != s.tokens * s.experts_used)
        throw bad(fmt::format("layer {}'s counts sum to {}, not tokens x experts_used = {} x {}", l, sum, s.tokens,
                              s.experts_used));
      s.routed.insert(s.routed.end(), counts.begin(), counts.end());
    }
  } catch (const json::exception& e) {
    throw bad(fmt::format("a field is missing or of the wrong type ({})", e.what()));
  }
  return s;
}

ExpertStats ExpertStats::read(const std::string& path) {
  // A few KiB per thousand experts; anything past 64 MiB is not a statistics file.
  return from_json(base::read_text_file(path, "expert statistics file", 64u << 20), path);
}

void ExpertStats::check_fits(const arch::ModelShape& m, std::string_view model_file) const {
  if (m.experts == 0)
    throw InvalidArgument(fmt::format("--expert-stats ({}): {} is not a mixture of experts", model, model_file));
  if (layers != m.layers || experts != m.experts || experts_used != m.experts_used)
    throw InvalidArgument(fmt::format(
        "--expert-stats was recorded on {} ({} layers, {} experts, {} used), not on a model of the shape of {} "
        "({} layers, {} experts, {} used)",
        model, layers, experts, experts_used, model_file, m.layers, m.experts, m.experts_used));
}

void place_experts(MemoryPlan& p, const ExpertStats* stats, uint64_t page_size) {
  if (!p.model || p.model->experts == 0) return;
  const arch::ModelShape& m = *p.model;
  // Every stack gets its slices; a copied stack is pinned whole, a mapped one is evictable until the
  // budget says otherwise.
  uint64_t mapped_stacks = 0;
  for (Decision& d : p.tensors) {
    if (!is_expert_stack(d, m)) continue;
    const uint32_t layer = *arch::parse_tensor_name(d.tensor)->layer;
    d.experts.assign(m.experts, {});
    for (uint32_t e = 0; e < m.experts; ++e) {
      ExpertSlice& s = d.experts[e];
      s.expert = e;
      s.pinned = placement::is_pinned(d);
      s.reason = s.pinned ? ExpertReason::StackCopied : ExpertReason::NoBudget;
      s.routed = stats ? stats->share(layer, e) : -1;
      s.bytes = d.spec.bytes / m.experts;
    }
    if (!placement::is_pinned(d)) mapped_stacks += d.spec.bytes;
    placement::account_pinned_pages(d, page_size);
  }
  if (!p.budget || mapped_stacks == 0) return;

  // What the budget leaves for experts once everything else the run holds is counted.
  const uint64_t others = p.totals.resident() - mapped_stacks;
  uint64_t room = *p.budget > others ? *p.budget - others : 0;
  // (layer, expert) pairs, pinned together in all of the layer's mapped stacks: a routed token reads
  // the expert's gate, up and down matrices, so one of them pinned alone would save little.
  struct Candidate {
    uint32_t layer, expert;
    double routed;
    uint64_t cost = 0;
  };
  std::vector<Candidate> candidates;
  for (uint32_t l = 0; l < m.layers; ++l)
    for (uint32_t e = 0; e < m.experts; ++e) candidates.push_back({l, e, stats ? stats->share(l, e) : 0.0});
  for (const Decision& d : p.tensors)
    if (!d.experts.empty() && !placement::is_pinned(d)) {
      const uint32_t layer = *arch::parse_tensor_name(d.tensor)->layer;
      for (uint32_t e = 0; e < m.experts; ++e) candidates[uint64_t{layer} * m.experts + e].cost += d.experts[e].bytes;
    }
  // Hottest first; equal heat (always, without statistics) in expert index order across the layers,
  // so each layer keeps the same experts and no layer is starved for an earlier one.
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.routed != b.routed) return a.routed > b.routed;
    return a.expert != b.expert ? a.expert < b.expert : a.layer < b.layer;
  });
  std::vector<char> pinned(uint64_t{m.layers} * m.experts, 0);
  for (const Candidate& c : candidates)
    if (c.cost <= room) {
      room -= c.cost;
      pinned[uint64_t{c.layer} * m.experts + c.expert] = 1;
    }
  for (Decision& d : p.tensors) {
    if (d.experts.empty() || placement::is_pinned(d)) continue;
    const uint32_t layer = *arch::parse_tensor_name(d.tensor)->layer;
    for (ExpertSlice& s : d.experts) {
      s.pinned = pinned[uint64_t{layer} * m.experts + s.expert] != 0;
      s.reason = s.pinned ? ExpertReason::HotFits : ExpertReason::OverBudget;
    }
    placement::account_pinned_pages(d, page_size);
  }
}

uint64_t evictable_by_budget(const MemoryPlan& p) noexcept {
  uint64_t n = 0;
  for (const Decision& d : p.tensors)
    for (const ExpertSlice& s : d.experts)
      if (s.reason == ExpertReason::OverBudget || s.reason == ExpertReason::HotFits) n += s.bytes - s.pinned_bytes;
  return n;
}

}  // namespace skainet::plan
