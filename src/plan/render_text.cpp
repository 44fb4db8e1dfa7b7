#include <fmt/format.h>

#include "skainet/model/plan.hpp"

namespace skainet::plan {
namespace {

using base::format_bytes;

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? " x " : "") + std::to_string(shape[i]);
  return "[" + s + "]";
}

// "0-5,9" for the experts of `d` whose pinned flag is `pinned`.
std::string expert_ranges(const placement::Decision& d, bool pinned) {
  std::string out;
  for (size_t i = 0; i < d.experts.size();) {
    if (d.experts[i].pinned != pinned) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j + 1 < d.experts.size() && d.experts[j + 1].pinned == pinned) ++j;
    out += fmt::format("{}{}", out.empty() ? "" : ",", i == j ? std::to_string(i) : fmt::format("{}-{}", i, j));
    i = j + 1;
  }
  return out;
}

// One layer's experts in a line: "experts 0-5,9 pinned; 58 evictable (ffn_gate_exps, ...)", once
// when the layer's stacks agree (place_experts pins an expert in all of them), else per stack.
std::string experts_line(const MemoryPlan& p, const LayerGroup& g) {
  std::vector<const placement::Decision*> stacks;
  for (const size_t i : g.tensors)
    if (!p.tensors[i].experts.empty()) stacks.push_back(&p.tensors[i]);
  if (stacks.empty()) return {};
  const auto describe = [](const placement::Decision& d) {
    size_t pinned = 0;
    for (const auto& e : d.experts) pinned += e.pinned;
    const std::string on = pinned > 0 ? expert_ranges(d, true) + " pinned" : std::string();
    const std::string off = pinned < d.experts.size() ? fmt::format("{} evictable", d.experts.size() - pinned) : "";
    const std::string why = fmt::format(" ({})", placement::expert_reason_name(d.experts.back().reason));
    return on + (!on.empty() && !off.empty() ? "; " : "") + off +
           (pinned == 0 || pinned == d.experts.size() ? why : "");
  };
  const std::string first = describe(*stacks.front());
  bool same = true;
  for (const auto* d : stacks) same &= describe(*d) == first;
  if (same) return fmt::format("    experts {}\n", first);
  std::string out;
  for (const auto* d : stacks) out += fmt::format("    experts of {}: {}\n", d->tensor, describe(*d));
  return out;
}

}  // namespace

std::string render_text(const MemoryPlan& p, bool tensors) {
  // The answer first: the verdict and the split in five lines, then where each layer's bytes go.
  std::string out;
  for (const std::string& line : summary_lines(p)) out += line;
  out += fmt::format("\nfile      {} ({}, {} tensors; plan read {} of header)\n", p.file, format_bytes(p.file_size),
                     p.tensors.size(), format_bytes(p.header_bytes_read));
  if (p.model) {
    const arch::ModelShape& m = *p.model;
    out += fmt::format("shape     {}/{} heads (head dim {}), ffn {}\n", m.heads, m.kv_heads, m.head_dim, m.ffn);
  }

  const std::vector<LayerGroup> groups = group_by_layer(p);
  if (!groups.empty()) out += fmt::format("\nby layer{}\n", tensors ? "" : " (--tensors for every tensor)");
  for (const LayerGroup& g : groups) {
    std::string forms;
    for (const auto& [form, count] : g.forms) forms += fmt::format("{}{} x {}", forms.empty() ? "" : ", ", form, count);
    std::string held;
    if (g.pinned > 0) held = "pinned " + format_bytes(g.pinned);
    if (g.evictable > 0) held += (held.empty() ? "" : ", ") + ("evictable " + format_bytes(g.evictable));
    out += fmt::format("  {:<18} {:>3} tensor{} {:>10}  ({})  {}\n", g.name(), g.tensors.size(),
                       g.tensors.size() == 1 ? " " : "s", format_bytes(g.bytes), held, forms);
    if (!tensors) {
      out += experts_line(p, g);
      continue;
    }
    for (const size_t i : g.tensors) {
      const placement::Decision& d = p.tensors[i];
      const std::string by = d.decided_by == placement::DecidedBy::Resolver
                                 ? ""
                                 : fmt::format("  [{}]", placement::decided_by_name(d.decided_by));
      out += fmt::format("    {:<32} {:<5} {:<18} {:>10}  {}{}\n", d.tensor, type_name(d.file_type),
                         shape_text(d.shape), format_bytes(d.spec.bytes), placement::plain_words(d), by);
      for (const placement::ExpertSlice& e : d.experts)
        out += fmt::format("      [{}] {:>10}  pinned {:>10}  {}\n", e.expert, format_bytes(e.bytes),
                           format_bytes(e.pinned_bytes), placement::expert_words(e));
    }
  }

  out += "\n";
  if (p.kv)
    out += fmt::format("kv cache  {} ({} x {} ctx x {} kv heads x {} dims, K {}, V {})\n", format_bytes(p.kv->bytes),
                       p.kv->layers, p.kv->n_ctx, p.kv->kv_heads, p.kv->head_dim, type_name(p.kv->k_type),
                       type_name(p.kv->v_type));
  if (p.decode && p.prefill)
    out += fmt::format("slabs     decode {} (step {} + layer {}); prefill of {} tokens {}\n",
                       format_bytes(p.decode->total()), format_bytes(p.decode->step_bytes),
                       format_bytes(p.decode->layer_bytes), p.prefill->tokens, format_bytes(p.prefill->total()));
  if (p.verify)
    out += fmt::format("          speculative verification of {} tokens (a draft of {} and its first) {}\n",
                       p.verify->tokens, p.verify->tokens - 1, format_bytes(p.verify->total()));
  if (p.scratch.bytes > 0)
    out += fmt::format("scratch   {} (matmul activation prepared once per call: {} x {} rows, the largest)\n",
                       format_bytes(p.scratch.bytes), p.scratch.tensor, p.scratch.rows);
  if (const std::optional<BatchPlan> b = p.batched(); b && p.serves_batched())
    out += fmt::format(
        "slots     {} x kv cache {} = {}, advanced together by one batch of {} rows per step: slabs {} (step {} + "
        "layer {}) + scratch {}, once; the weights are shared\n",
        p.slots, format_bytes(p.kv->bytes), format_bytes(p.totals.kv), b->rows, format_bytes(b->slab_bytes()),
        format_bytes(b->step_bytes), format_bytes(b->layer_bytes), format_bytes(b->scratch_bytes));
  else if (p.slots > 1 && p.kv)
    out += fmt::format("slots     {} x (kv cache {} + slabs {} + scratch {}) = {}, each running its own passes\n",
                       p.slots, format_bytes(p.kv->bytes), format_bytes(p.totals.slab / p.slots),
                       format_bytes(p.totals.scratch / p.slots),
                       format_bytes(p.totals.kv + p.totals.slab + p.totals.scratch));
  if (p.totals.prompt_cache > 0)
    out += fmt::format(
        "prompts   up to {} in the prompt cache (--cache-ram): what a new request would overwrite in a "
        "slot, kept for a request that comes back to it\n",
        format_bytes(p.totals.prompt_cache));
  const Totals& t = p.totals;
  out += fmt::format("domains   weights mapped {} | copied to the heap {} | copied to dedicated pages {}\n",
                     format_bytes(t.mapped), format_bytes(t.heap), format_bytes(t.pages));
  for (const auto& s : p.suggestions)
    out += fmt::format("  suggestion: {:<40} saves {}\n", s.action, format_bytes(s.saves));
  for (const auto& w : p.warnings) out += fmt::format("warning: {}\n", describe(w));
  return out;
}

}  // namespace skainet::plan
