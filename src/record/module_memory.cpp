// What the compiled module will hold at run time, from the graphs alone: the export's counterpart of
// `skainet plan`. IREE maps the parameter file and reads the weights in place; the caches are one K
// and one V tensor (prefill returns them, decode updates them in place: iree.abi.output); each call
// allocates its transient values, which IREE packs by liveness, so a function's transient is the
// largest set of its values alive at once plus what its ops need beside their operands.
#include <algorithm>

#include <fmt/format.h>

#include "record/lowering.hpp"
#include "skainet/compute/kernels.hpp"

namespace skainet::record {
namespace {

uint64_t f32_bytes(int64_t elements) { return static_cast<uint64_t>(elements) * sizeof(float); }

// What op i needs beside its operands and result while it runs.
uint64_t working_bytes(const ComputeGraph& g, const Node& n, KernelForm form) {
  if (n.kind != NodeKind::Op) return 0;
  const TapeOp& op = *n.op;
  if (op.kind == ops::OpKind::Matmul) {
    const Node& x = g.nodes[static_cast<size_t>(n.inputs[0])];
    const Node& w = g.nodes[static_cast<size_t>(n.inputs[1])];
    const int64_t k = x.shape[x.shape.rank() - 1], rows = x.shape.numel() / k, out = w.shape[0];
    if (form == KernelForm::Engine)
      return detail::matmul_scratch_bytes(w.type, detail::held_order(g, n.inputs[1]), rows, k);
    // StableHLO: one row fuses the dequantization into the product; many rows (and every product
    // of the flat form) write the weight in f32 once per call.
    return rows == 1 && form == KernelForm::StableHlo ? 0 : f32_bytes(out * k);
  }
  if (op.kind == ops::OpKind::MatmulExperts) {
    // Both forms (lower_matmul_experts): one row dequantizes its k chosen experts, many rows the
    // whole stack, in f32.
    const Node& stack = g.nodes[static_cast<size_t>(n.inputs[1])];
    const int64_t matrix = stack.shape[1] * stack.shape[2];
    return f32_bytes(n.shape[0] == 1 ? n.shape[1] * matrix : stack.shape[0] * matrix);
  }
  if (op.kind == ops::OpKind::Attention && form != KernelForm::Engine) {
    // Keys and values of the cells read, in f32, and the scores of every head.
    const Node& keys = g.nodes[static_cast<size_t>(n.inputs[1])];
    const Node& q = g.nodes[static_cast<size_t>(n.inputs[0])];
    const int64_t tokens = q.shape[0];
    const int64_t cells = g.tape->entry.dynamic_position ? keys.shape[0] : op.attrs.position + tokens;
    return 2 * f32_bytes(cells * keys.shape[1]) + f32_bytes(op.attrs.attention.heads * tokens * cells);
  }
  return 0;
}

uint64_t transient_bytes(const ComputeGraph& g, KernelForm form) {
  const size_t count = g.nodes.size();
  std::vector<size_t> last_use(count, 0);
  for (size_t i = 0; i < count; ++i)
    for (int in : g.nodes[i].inputs) last_use[static_cast<size_t>(in)] = i;
  last_use[static_cast<size_t>(g.result)] = count;  // the logits are returned
  // Op results are new f32 tensors; views alias their source, parameters and caches are counted apart.
  auto value_bytes = [&](const Node& n) { return n.kind == NodeKind::Op ? f32_bytes(n.shape.numel()) : 0; };
  uint64_t live = 0, peak = 0;
  for (size_t i = 0; i < count; ++i) {
    const Node& n = g.nodes[i];
    live += value_bytes(n);
    peak = std::max(peak, live + working_bytes(g, n, form));
    for (int in : n.inputs)
      if (last_use[static_cast<size_t>(in)] == i) live -= value_bytes(g.nodes[static_cast<size_t>(in)]);
  }
  return peak;
}

}  // namespace

uint64_t ModuleMemory::total() const {
  uint64_t transient = 0;
  for (const FunctionMemory& f : functions) transient = std::max(transient, f.transient);
  return parameters + caches + transient;
}

ModuleMemory module_memory(const std::vector<const ComputeGraph*>& functions, uint64_t parameter_bytes,
                           KernelForm form) {
  ModuleMemory m;
  m.parameters = parameter_bytes;
  for (const ComputeGraph* g : functions) {
    const plan::KvCachePlan& kv = g->tape->kv;
    const uint64_t width = static_cast<uint64_t>(kv.kv_heads) * kv.head_dim;
    m.caches = uint64_t{kv.layers} * kv.n_ctx * (row_bytes(kv.k_type, width) + row_bytes(kv.v_type, width));
    m.functions.push_back({g->tape->entry.name, transient_bytes(*g, form)});
  }
  return m;
}

std::string ModuleMemory::text() const {
  std::string s = "memory at run time (what IREE holds; checked against its measured peak):\n";
  s += fmt::format("  parameters  {:>10}  mapped from the parameter file and read in place\n",
                   base::format_bytes(parameters));
  s += fmt::format("  KV caches   {:>10}  K and V: prefill returns them, decode updates them in place\n",
                   base::format_bytes(caches));
  for (const FunctionMemory& f : functions)
    s += fmt::format("  transient   {:>10}  {}: its largest set of live values and op workspace\n",
                     base::format_bytes(f.transient), f.name);
  s += fmt::format("  total       {:>10}  parameters + caches + the largest transient\n", base::format_bytes(total()));
  return s;
}

}  // namespace skainet::record
