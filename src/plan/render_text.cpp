#include <map>
#include <tuple>

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

// The reason text of a group is the one-line explanation with the tensor name and size stripped.
std::string group_reason(const placement::Decision& d) {
  std::string line = placement::explain(d);
  const size_t open = line.find(" (");
  return open == std::string::npos ? line : line.substr(open + 2, line.size() - open - 3);
}

}  // namespace

std::string render_text(const MemoryPlan& p) {
  std::string out;
  out += fmt::format("file      {} ({}, {} tensors; plan read {} of header)\n", p.file, format_bytes(p.file_size),
                     p.tensors.size(), format_bytes(p.header_bytes_read));
  out += fmt::format("profile   {}\n", p.profile);
  if (p.model) {
    const arch::ModelShape& m = *p.model;
    out += fmt::format("model     {}: {} layers, dim {}, {}/{} heads (head dim {}), ffn {}, vocab {}, trained ctx {}\n",
                       m.architecture, m.layers, m.dim, m.heads, m.kv_heads, m.head_dim, m.ffn, m.vocab, m.ctx_train);
  }

  // Group by (domain, held type, reason text), keeping first-seen order.
  using Key = std::tuple<int, std::string, std::string>;
  std::map<Key, std::vector<const placement::Decision*>> groups;
  std::vector<Key> order;
  for (const auto& d : p.tensors) {
    Key k{static_cast<int>(d.spec.domain), std::string(type_name(d.held_type)), group_reason(d)};
    auto [it, inserted] = groups.try_emplace(k);
    if (inserted) order.push_back(k);
    it->second.push_back(&d);
  }
  for (const Key& k : order) {
    const auto& members = groups[k];
    uint64_t bytes = 0;
    for (const auto* d : members) bytes += d->spec.bytes;
    out += fmt::format("\n{} {}  {} tensor{}, {}  ({})\n", domain_name(members.front()->spec.domain), std::get<1>(k),
                       members.size(), members.size() == 1 ? "" : "s", format_bytes(bytes), std::get<2>(k));
    for (const auto* d : members) {
      const std::string by = d->decided_by == placement::DecidedBy::Resolver
                                 ? ""
                                 : fmt::format("  [{}]", placement::decided_by_name(d->decided_by));
      out += fmt::format("  {:<32} {:<5} {:<18} {:>10}{}\n", d->tensor, type_name(d->file_type), shape_text(d->shape),
                         format_bytes(d->spec.bytes), by);
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
  out += fmt::format("totals    mapped {} | heap {} | pages {} | kv {} | slab {} | scratch {}\n",
                     format_bytes(t.mapped), format_bytes(t.heap), format_bytes(t.pages), format_bytes(t.kv),
                     format_bytes(t.slab), format_bytes(t.scratch));
  out += fmt::format("resident  {}", format_bytes(t.resident()));
  if (p.budget)
    out +=
        fmt::format("  budget {}: {}", format_bytes(*p.budget),
                    p.fits ? "fits" : fmt::format("does NOT fit (over by {})", format_bytes(t.resident() - *p.budget)));
  out += "\n";
  for (const auto& s : p.suggestions)
    out += fmt::format("  suggestion: {:<40} saves {}\n", s.action, format_bytes(s.saves));
  for (const auto& w : p.warnings) out += fmt::format("warning: {}\n", describe(w));
  return out;
}

}  // namespace skainet::plan
