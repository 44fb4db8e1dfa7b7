// The plan summed up: the resident split, the layers, the biggest consumers, the summary's lines,
// and the plan re-priced at other contexts and slot counts. Pure functions of the plan.
#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>

#include "skainet/model/plan.hpp"

namespace skainet::plan {
namespace {

using base::format_bytes;

// "blk.12.ffn_up.weight" -> 12 and "ffn_up.weight"; anything else is outside the layers.
std::optional<std::pair<uint32_t, std::string_view>> layer_of(std::string_view name) {
  constexpr std::string_view kPrefix = "blk.";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  const char* first = name.data() + kPrefix.size();
  const char* last = name.data() + name.size();
  uint32_t layer = 0;
  const auto [end, ec] = std::from_chars(first, last, layer);
  if (ec != std::errc() || end == first || end == last || *end != '.') return std::nullopt;
  return std::pair{layer, name.substr(static_cast<size_t>(end + 1 - name.data()))};
}

// A decision's element count, by the shape type's own product (which checks rank and overflow).
uint64_t elements_of(const placement::Decision& d) { return static_cast<uint64_t>(Shape::from_ggml(d.shape).numel()); }

std::string plural(uint64_t n, std::string_view word) { return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s"); }

}  // namespace

ResidentSplit split(const MemoryPlan& p) {
  ResidentSplit s;
  for (const auto& d : p.tensors) {
    // A mapped expert stack counts as an evictable tensor, its pinned experts' pages as pinned bytes.
    const uint64_t pinned = placement::pinned_bytes(d);
    s.pinned += pinned;
    s.evictable += d.spec.bytes - pinned;
    ++(placement::is_pinned(d) ? s.pinned_tensors : s.evictable_tensors);
  }
  s.kv = p.totals.kv;
  s.slabs = p.totals.slab;
  s.scratch = p.totals.scratch;
  s.prompt_cache = p.totals.prompt_cache;
  return s;
}

uint64_t matmul_ops_per_token(const MemoryPlan& p) {
  static const arch::ModelShape kNoModel;
  const arch::ModelShape& m = p.model ? *p.model : kNoModel;
  uint64_t elements = 0;
  bool output_matrix = false;
  const placement::Decision* embedding = nullptr;
  for (const auto& d : p.tensors) {
    if (d.role == placement::TensorRole::Embedding) embedding = &d;
    if (d.role != placement::TensorRole::MatmulWeight) continue;
    // ggml order: [in, out], or an expert stack's [in, out, experts] of which a token reads experts_used.
    const bool stack = d.shape.size() == 3 && m.experts > 0;
    elements += stack ? elements_of(d) / m.experts * m.experts_used : elements_of(d);
    output_matrix |= d.shape.size() == 2 && d.shape[1] == m.vocab;
  }
  if (embedding && !output_matrix) elements += elements_of(*embedding);
  return 2 * elements;
}

std::string LayerGroup::name() const { return layer ? fmt::format("layer {}", *layer) : "outside the layers"; }

std::vector<LayerGroup> group_by_layer(const MemoryPlan& p) {
  std::vector<LayerGroup> layers;
  LayerGroup outside;
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const placement::Decision& d = p.tensors[i];
    LayerGroup* g = &outside;
    if (const auto at = layer_of(d.tensor)) {
      auto it = std::find_if(layers.begin(), layers.end(), [&](const LayerGroup& l) { return *l.layer == at->first; });
      if (it == layers.end()) {
        layers.emplace_back().layer = at->first;
        it = layers.end() - 1;
      }
      g = &*it;
    }
    g->tensors.push_back(i);
    g->bytes += d.spec.bytes;
    g->pinned += placement::pinned_bytes(d);
    g->evictable += d.spec.bytes - placement::pinned_bytes(d);
    const std::string form = fmt::format("{} {}", placement::held_how(d), type_name(d.held_type));
    auto f = std::find_if(g->forms.begin(), g->forms.end(), [&](const auto& e) { return e.first == form; });
    if (f == g->forms.end())
      g->forms.emplace_back(form, 1);
    else
      ++f->second;
  }
  std::stable_sort(layers.begin(), layers.end(), [](const auto& a, const auto& b) { return *a.layer < *b.layer; });
  if (!outside.tensors.empty()) layers.push_back(std::move(outside));
  return layers;
}

std::vector<Consumer> biggest_consumers(const MemoryPlan& p, size_t n) {
  std::vector<Consumer> all;
  for (const auto& d : p.tensors) {
    const auto at = layer_of(d.tensor);
    const std::string name(at ? at->second : std::string_view(d.tensor));
    auto it = std::find_if(all.begin(), all.end(), [&](const Consumer& c) { return c.name == name; });
    if (it == all.end()) {
      all.push_back({name, 0, 0});
      it = all.end() - 1;
    }
    ++it->tensors;
    it->bytes += d.spec.bytes;
  }
  if (p.totals.kv > 0) all.push_back({"kv cache", 0, p.totals.kv});
  std::stable_sort(all.begin(), all.end(), [](const Consumer& a, const Consumer& b) { return a.bytes > b.bytes; });
  if (all.size() > n) all.resize(n);
  return all;
}

namespace {

// The resident total and its parts; the prompt cache's only where serve keeps one (--cache-ram).
std::string resident_line(const ResidentSplit& s) {
  const std::string prompt_cache =
      s.prompt_cache > 0 ? fmt::format(" + prompt cache {}", format_bytes(s.prompt_cache)) : std::string();
  return fmt::format("resident  {} = pinned {} + evictable {} + kv cache {} + slabs {} + scratch {}{}\n",
                     format_bytes(s.total()), format_bytes(s.pinned), format_bytes(s.evictable), format_bytes(s.kv),
                     format_bytes(s.slabs), format_bytes(s.scratch), prompt_cache);
}

}  // namespace

std::vector<std::string> summary_lines(const MemoryPlan& p) {
  const ResidentSplit s = split(p);
  const uint64_t resident = s.total();
  std::vector<std::string> lines;

  std::string verdict;
  const PlanWarning* short_of_memory = nullptr;
  for (const auto& w : p.warnings)
    if (w.kind == PlanWarningKind::ExceedsAvailableMemory) short_of_memory = &w;
  if (p.budget && !p.fits)
    verdict = fmt::format("does NOT fit the budget of {}: {} resident, over by {}", format_bytes(*p.budget),
                          format_bytes(resident), format_bytes(resident - *p.budget));
  else if (const uint64_t dropped = evictable_by_budget(p); p.budget && dropped > 0)
    verdict = fmt::format(
        "fits the budget of {}: {} held, {} to spare, and {} of experts left evictable (file pages the "
        "kernel may drop and read back, not counted)",
        format_bytes(*p.budget), format_bytes(resident - dropped),
        format_bytes(*p.budget - std::min(*p.budget, resident - dropped)), format_bytes(dropped));
  else if (p.budget)
    verdict = fmt::format("fits the budget of {}: {} resident, {} to spare", format_bytes(*p.budget),
                          format_bytes(resident), format_bytes(*p.budget - std::min(*p.budget, resident)));
  else
    verdict = fmt::format("{} resident; no budget given (--budget SIZE checks one)", format_bytes(resident));
  if (short_of_memory)
    verdict += fmt::format("; does NOT fit the memory available now, {}, by {}", format_bytes(short_of_memory->limit),
                           format_bytes(short_of_memory->value - short_of_memory->limit));
  lines.push_back(fmt::format("verdict   {}\n", verdict));

  lines.push_back(resident_line(s));

  lines.push_back(
      fmt::format("weights   pinned {} ({} copied into memory) + evictable {} ({} mapped from the file, pages the "
                  "kernel can drop and read back)\n",
                  format_bytes(s.pinned), plural(s.pinned_tensors, "tensor"), format_bytes(s.evictable),
                  plural(s.evictable_tensors, "tensor")));

  std::string biggest;
  for (const Consumer& c : biggest_consumers(p, 3)) {
    if (!biggest.empty()) biggest += ", ";
    biggest += c.tensors > 1 ? fmt::format("{} x {} {}", c.name, c.tensors, format_bytes(c.bytes))
                             : fmt::format("{} {}", c.name, format_bytes(c.bytes));
  }
  lines.push_back(fmt::format("biggest   {}\n", biggest.empty() ? "nothing" : biggest));

  std::string context;
  if (p.kv) context = fmt::format("; ctx {} x {}", p.kv->n_ctx, plural(p.slots, "slot"));
  if (p.model) {
    const arch::ModelShape& m = *p.model;
    lines.push_back(fmt::format("model     {}, {} layers, dim {}, vocab {}, trained ctx {}; profile {}{}\n",
                                m.architecture, m.layers, m.dim, m.vocab, m.ctx_train, p.profile, context));
  } else {
    lines.push_back(fmt::format("model     none (no llama-family hyper-parameters); profile {}\n", p.profile));
  }
  return lines;
}

std::vector<uint32_t> context_steps(const MemoryPlan& p) {
  if (!p.model || !p.kv) return {};
  const uint32_t top = std::max(p.model->ctx_train, p.kv->n_ctx);
  std::set<uint32_t> steps{p.kv->n_ctx};
  for (uint64_t c = 128; c <= top; c *= 2) steps.insert(static_cast<uint32_t>(c));
  return {steps.begin(), steps.end()};
}

std::vector<ResidentPoint> resident_by_context(const gguf::Header& header, const placement::MemoryProfile& profile,
                                               const placement::Platform& platform,
                                               const placement::FormOverrides& overrides, const PlanOptions& options,
                                               const std::vector<uint32_t>& contexts,
                                               const std::vector<uint32_t>& slots) {
  std::vector<ResidentPoint> points;
  for (const uint32_t n_slots : slots) {
    for (const uint32_t n_ctx : contexts) {
      PlanOptions o = options;
      o.n_ctx = n_ctx;
      o.slots = n_slots;
      o.batch_slots = options.batch_slots || n_slots > 1;
      if (o.batch && *o.batch < n_slots) o.batch.reset();
      o.available_memory.reset();
      const MemoryPlan p = make_plan(header, profile, platform, overrides, o);
      points.push_back({n_ctx, n_slots, p.totals.resident(), p.totals.kv});
    }
  }
  return points;
}

}  // namespace skainet::plan
