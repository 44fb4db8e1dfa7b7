// The engine-kernel form (`--kernels engine`): every op that reads a packed weight, and attention,
// becomes an IREE dispatch of a hand-written executable whose workgroups call one of the engine's
// kernels through an import (include/skainet/compute/kernel_imports.hpp; resolved at run time by
// libskainet_iree_plugin.so). The weights reach the kernels as the bytes the plan decided — packed,
// in the plan's block order — so IREE never unpacks them; the rest of the model stays StableHLO.
//
// Why not IREE's own code for the products: its generated code for a fused dequantize-and-reduce
// does one horizontal reduction per 32-element block, one row at a time (~1.7 GB/s of packed bytes,
// docs/export.md), where the engine's kernels stream at the memory's pace.
#include <algorithm>
#include <bit>
#include <limits>

#include <fmt/format.h>

#include "record/lowering.hpp"
#include "skainet/compute/kernel_imports.hpp"
#include "skainet/compute/kernels.hpp"

namespace skainet::record::detail {

namespace imports = kernels::imports;

namespace {

int64_t bytes_of(const hlo::TensorType& t) { return t.numel() * std::max<int64_t>(hlo::elem_bits(t.elem) / 8, 1); }

// IREE links the executables into one library: their entry points need names of their own.
std::string executable_name(const imports::Import& i) { return fmt::format("{}_exe", i.name); }
std::string entry_name(const imports::Import& i) { return fmt::format("{}_entry", i.name); }

// Workgroups of `range` items in chunks of whole granules: about kWorkgroups of them, so that IREE's
// workers share the work evenly whatever their count, none smaller than one granule.
int64_t chunk_of(int64_t range, int64_t granule) {
  constexpr int64_t kWorkgroups = 32;
  const int64_t per = (range + kWorkgroups - 1) / kWorkgroups;
  return std::max<int64_t>((per + granule - 1) / granule * granule, granule);
}

}  // namespace

uint64_t matmul_scratch_bytes(GgmlType type, BlockOrder order, int64_t rows, int64_t k) {
  // What this machine's kernels ask (the plan's ScratchPlan asks the same); a machine that asks more
  // falls back to the one-phase kernel in the plugin.
  const kernels::KernelTable& table = kernels::best_table();
  const size_t need = table.matmul_scratch_for ? table.matmul_scratch_for(type, order, rows, k) : 0;
  return need + imports::kScratchSlack;
}

// `%r = flow.dispatch @<import>_exe::@<import>_entry[count](tensors…, byte sizes…, scalars…, chunk, range)`.
hlo::Value Lowering::dispatch(const imports::Import& import, const std::vector<hlo::Value>& inputs,
                              const std::vector<int64_t>& scalars, int64_t range, int64_t chunk,
                              const hlo::TensorType& result) {
  if (inputs.size() + 1 != import.bindings.size() || scalars.size() != import.scalars.size())
    throw Error(fmt::format("record {}: {} takes {} bindings and {} scalars", tape_.entry.name, import.name,
                            import.bindings.size(), import.scalars.size()));
  used_imports_.insert(import.name);
  std::vector<int64_t> indices;
  for (const hlo::Value& v : inputs) indices.push_back(bytes_of(v.type));
  indices.push_back(bytes_of(result));
  indices.insert(indices.end(), scalars.begin(), scalars.end());
  indices.push_back(chunk);
  indices.push_back(range);
  const std::string count = f_.index_constant((range + chunk - 1) / chunk);
  std::string operands, types;
  for (const hlo::Value& v : inputs) {
    operands.append(operands.empty() ? "" : ", ").append(v.name);
    types.append(types.empty() ? "" : ", ").append(v.type.str());
  }
  for (int64_t i : indices) {
    operands.append(", ").append(f_.index_constant(i));
    types.append(", index");
  }
  return f_.statement(fmt::format("flow.dispatch @{}::@{}[{}]({}) : ({}) -> {}", executable_name(import),
                                  entry_name(import), count, operands, types, result.str()),
                      result);
}

// The weight's bytes as held (a row range of them for a View: Phi-3's fused weights).
hlo::Value Lowering::weight_bytes(int node) {
  const Node& n = g_.nodes[static_cast<size_t>(node)];
  if (n.kind == NodeKind::Parameter) return raw_weight(node);
  const int param = n.inputs.at(0);
  const Node& p = g_.nodes[static_cast<size_t>(param)];
  const auto [first, count] = weight_rows(n);
  // A kernel-feed order keeps groups of kInterleaveRows rows together: a range of whole groups is
  // the same bytes as in file order, anything else is not a slice.
  if (p.order != BlockOrder::RowMajor && (first % kInterleaveRows != 0 || count % kInterleaveRows != 0))
    throw Error(fmt::format("record {}: rows [{}, {}) of '{}' split its {}-row groups ({} order)", tape_.entry.name,
                            first, first + count, p.name, kInterleaveRows, block_order_name(p.order)));
  const hlo::Value raw = raw_weight(param);
  std::vector<int64_t> start(static_cast<size_t>(raw.type.rank()), 0), limit = raw.type.dims;
  start[0] = first;
  limit[0] = first + count;
  return f_.slice(raw, start, limit);
}

hlo::Value Lowering::engine_matmul(const MatmulOperands& m) {
  const auto scratch_bytes = static_cast<int64_t>(matmul_scratch_bytes(m.type, m.order, m.rows, m.k));
  const std::vector<int64_t> scalars{
      m.rows, m.k, m.out, static_cast<int64_t>(m.type), static_cast<int64_t>(m.order), scratch_bytes};
  const hlo::TensorType scratch_type{{scratch_bytes}, hlo::Elem::I8};
  // Without a prepare phase the kernels take no scratch: a zeroed slack stands in for the binding.
  const hlo::Value scratch =
      scratch_bytes > imports::kScratchSlack
          ? dispatch(imports::kMatmulPrepare, {m.x, m.w}, scalars, m.rows, chunk_of(m.rows, 1), scratch_type)
          : f_.zeros(scratch_type);
  return dispatch(imports::kMatmulRows, {m.x, m.w, scratch}, scalars, m.out, chunk_of(m.out, kInterleaveRows),
                  {{m.rows, m.out}, hlo::Elem::F32});
}

hlo::Value Lowering::engine_attention(const Node& n) {
  const kernels::AttentionParams& p = n.op->attrs.attention;
  const hlo::Value& q = value(n.inputs[0]);
  const Node& keys = g_.nodes[static_cast<size_t>(n.inputs[1])];
  if (keys.kind != NodeKind::CacheRead)
    throw Error(fmt::format("record {}: attention reads keys that are not a cache layer", tape_.entry.name));
  const hlo::Value pos = position(n.op->attrs.position);
  const plan::KvCachePlan& kv = tape_.kv;
  const std::vector<int64_t> scalars{q.type.dims[0],
                                     p.heads,
                                     p.kv_heads,
                                     p.head_dim,
                                     keys.layer,
                                     static_cast<int64_t>(kv.n_ctx),
                                     static_cast<int64_t>(kv.k_type),  // export_model: K and V share it
                                     std::bit_cast<uint32_t>(p.scale),
                                     p.window,
                                     std::bit_cast<uint32_t>(p.softcap),
                                     0};
  // gpt-oss's sinks weight, or -inf for every head (no sink: kernel_imports.hpp).
  const hlo::Value sinks = n.inputs.size() > 3
                               ? operand(n.inputs[3])
                               : splat(-std::numeric_limits<float>::infinity(), {{p.heads}, hlo::Elem::F32});
  // One workgroup per KV head: its query heads share the keys and values it reads.
  return dispatch(imports::kAttention, {q, k_, v_, pos, sinks}, scalars, p.heads, p.heads / p.kv_heads, q.type);
}

hlo::Value Lowering::engine_gather(int table, const hlo::Value& ids) {
  const Node& t = g_.nodes[static_cast<size_t>(table)];
  const int64_t n = ids.type.dims[0];
  const std::vector<int64_t> scalars{n, t.shape[0], t.shape[1], static_cast<int64_t>(t.type),
                                     static_cast<int64_t>(t.order)};
  return dispatch(imports::kGatherRows, {raw_weight(table), ids}, scalars, n, n, {{n, t.shape[1]}, hlo::Elem::F32});
}

std::string engine_executables(const std::set<std::string_view>& used) {
  std::string s;
  for (const imports::Import* import : imports::kAll) {
    if (!used.contains(import->name)) continue;
    const size_t b = import->bindings.size();
    std::string decl_types, args, call_args, call_types;
    for (size_t i = 0; i < b; ++i) {
      decl_types.append(i ? ", " : "").append("memref<i8>, index");
      args += fmt::format("{}%b{}: !stream.binding", i ? ", " : "", i);
    }
    for (size_t i = 0; i < b; ++i) args += fmt::format(", %n{}: index", i);
    for (size_t i = 0; i < import->scalars.size(); ++i) args += fmt::format(", %s{}: index", i);
    args += ", %chunk: index, %range: index";
    std::string body;
    for (size_t i = 0; i < b; ++i) {
      body += fmt::format(
          "        %m{0} = stream.binding.subspan %b{0}[%c0] : !stream.binding -> memref<?xi8>{{%n{0}}}\n"
          "        %p{0}, %o{0}, %z{0}, %t{0} = iree_codegen.extract_strided_metadata %m{0} : memref<?xi8> -> memref<i8>, index, index, index\n",
          i);
      call_args += fmt::format("{}%p{}, %o{}", i ? ", " : "", i, i);
    }
    for (size_t i = 0; i < import->scalars.size(); ++i) call_args += fmt::format(", %s{}", i);
    call_args += ", %begin, %end";
    const size_t indices = import->scalars.size() + 2;
    std::string scalar_types;
    for (size_t i = 0; i < indices; ++i) scalar_types += ", index";
    s += fmt::format(
        "  stream.executable private @{0} {{\n"
        "    stream.executable.export public @{7} workgroups(%count: index) -> (index, index, index) {{\n"
        "      %c1 = arith.constant 1 : index\n"
        "      stream.return %count, %c1, %c1 : index, index, index\n"
        "    }}\n"
        "    builtin.module {{\n"
        "      func.func private @{1}({2}{3}) attributes {{llvm.bareptr = true}}\n"
        "      func.func @{7}({4}) {{\n"
        "        %c0 = arith.constant 0 : index\n"
        "        %id = stream.dispatch.workgroup.id[0] : index\n"
        "        %begin = arith.muli %id, %chunk : index\n"
        "        %next = arith.addi %begin, %chunk : index\n"
        "        %end = arith.minui %next, %range : index\n"
        "{5}"
        "        func.call @{1}({6}) : ({2}{3}) -> ()\n"
        "        return\n"
        "      }}\n"
        "    }}\n"
        "  }}\n",
        executable_name(*import), import->name, decl_types, scalar_types, args, body, call_args, entry_name(*import));
  }
  return s;
}

}  // namespace skainet::record::detail
