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
    if (!tensors) continue;
    for (const size_t i : g.tensors) {
      const placement::Decision& d = p.tensors[i];
      const std::string by = d.decided_by == placement::DecidedBy::Resolver
                                 ? ""
                                 : fmt::format("  [{}]", placement::decided_by_name(d.decided_by));
      out += fmt::format("    {:<32} {:<5} {:<18} {:>10}  {}{}\n", d.tensor, type_name(d.file_type),
                         shape_text(d.shape), format_bytes(d.spec.bytes), placement::plain_words(d), by);
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
  const Totals& t = p.totals;
  out += fmt::format("domains   weights mapped {} | copied to the heap {} | copied to dedicated pages {}\n",
                     format_bytes(t.mapped), format_bytes(t.heap), format_bytes(t.pages));
  for (const auto& s : p.suggestions)
    out += fmt::format("  suggestion: {:<40} saves {}\n", s.action, format_bytes(s.saves));
  for (const auto& w : p.warnings) out += fmt::format("warning: {}\n", describe(w));
  return out;
}

}  // namespace skainet::plan
