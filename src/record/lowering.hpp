// Lowering of one ComputeGraph to one StableHLO function (emit.cpp drives it; lower_ops.cpp holds
// the per-op rules). Internal to the record module.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "skainet/model/record.hpp"
#include "skainet/compute/kernel_imports.hpp"
#include "skainet/io/stablehlo.hpp"

namespace skainet::record::detail {

namespace hlo = stablehlo;

hlo::Elem elem_of(GgmlType t);  // dense types only; Error otherwise
std::vector<int64_t> dims_of(const Shape& s);
// How a weight of `dims` is carried in the module: a 2-D one as stablehlo::raw_type, a 3-D expert stack
// [E, out, in] as the raw type of its E * out rows (the bytes as the file holds them), others dense.
hlo::TensorType carried_type(GgmlType type, const std::vector<int64_t>& dims);
// The first row and the row count of a View node that is a row range of a weight.
std::pair<int64_t, int64_t> weight_rows(const Node& view);
// The block order a weight node is held in: the parameter's, or for a row range the viewed parameter's.
BlockOrder held_order(const ComputeGraph& g, int node);
// The scratch binding of an engine-kernel matmul: what this machine's kernels ask, plus the slack
// that lets the plugin align it (engine_kernels.cpp).
uint64_t matmul_scratch_bytes(GgmlType type, BlockOrder order, int64_t rows, int64_t k);
// The module-level executables of the engine-kernel imports the functions used (engine_kernels.cpp).
std::string engine_executables(const std::set<std::string_view>& used);

class Lowering {
 public:
  Lowering(const ComputeGraph& g, hlo::FunctionBuilder& f, KernelForm form);
  // Emits every node and the return; the signature text (for the report).
  std::string run();
  // The engine-kernel imports the function calls (their executables go into the module).
  const std::set<std::string_view>& used_imports() const { return used_imports_; }

 private:
  void lower(int i);
  hlo::Value op(const Node& n);  // the rule of the node's op
  hlo::Value view(const Node& n);
  void cache_write(const Node& n);
  hlo::Value cache_read(const Node& n);

  // lower_ops.cpp: one rule per row of the op list (ops.hpp), which `op` dispatches to. An op with
  // no StableHLO form refuses in its rule, naming itself.
#define SKAINET_LOWERING_RULE(kind, name, min_inputs, max_inputs) hlo::Value lower_##name(const Node& n);
  SKAINET_OPS(SKAINET_LOWERING_RULE)
#undef SKAINET_LOWERING_RULE
  [[noreturn]] void no_lowering(const Node& n) const;

  // A matmul's x as [rows, k] and its weight as held (bytes, encoding, block order).
  struct MatmulOperands {
    hlo::Value x, w;
    GgmlType type;
    BlockOrder order;
    int64_t rows, k, out;
  };
  MatmulOperands matmul_operands(const Node& n);
  hlo::Value stablehlo_matmul(const MatmulOperands& m);
  hlo::Value binary(const Node& n, std::string_view name);
  hlo::Value stablehlo_attention(const Node& n);
  hlo::Value silu(const hlo::Value& x);
  hlo::Value gelu(const hlo::Value& x);
  hlo::Value softcap(const hlo::Value& x, float cap);

  // engine_kernels.cpp (KernelForm::Engine)
  hlo::Value dispatch(const kernels::imports::Import& import, const std::vector<hlo::Value>& inputs,
                      const std::vector<int64_t>& scalars, int64_t range, int64_t chunk, const hlo::TensorType& result);
  hlo::Value engine_matmul(const MatmulOperands& m);
  hlo::Value engine_attention(const Node& n);
  hlo::Value engine_gather(int table, const hlo::Value& ids);

  const hlo::Value& value(int node) const;
  hlo::Value raw_weight(int node);
  // A matmul's weight as held: the parameter's bytes, or a row range of them (engine_kernels.cpp).
  hlo::Value weight_bytes(int node);
  hlo::Value dense_weight(int node);  // f32 [rows, cols] (or [d])
  bool is_weight(int node) const;     // a parameter or a row range of one
  hlo::Value operand(int node);       // a weight's dense form (of its rows), or an earlier node's value
  hlo::Value splat(float v, const hlo::TensorType& like);
  // The i32 scalar position `relative` to the entry's first position.
  hlo::Value position(int64_t relative);
  hlo::Value& cache(SourceKind kind) { return kind == SourceKind::KCache ? k_ : v_; }

  const ComputeGraph& g_;
  const Tape& tape_;
  hlo::FunctionBuilder& f_;
  KernelForm form_;
  std::set<std::string_view> used_imports_;
  std::vector<std::optional<hlo::Value>> values_;
  std::map<int, hlo::Value> raw_, dense_;
  std::optional<hlo::Value> tokens_, position_;
  hlo::Value k_, v_;
};

}  // namespace skainet::record::detail
