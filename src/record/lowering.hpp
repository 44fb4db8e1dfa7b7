// Lowering of one ComputeGraph to one StableHLO function (emit.cpp drives it; lower_ops.cpp holds
// the per-op rules). Internal to the record module.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "skainet/record.hpp"
#include "skainet/stablehlo.hpp"

namespace skainet::record::detail {

namespace hlo = stablehlo;

hlo::Elem elem_of(GgmlType t);  // dense types only; Error otherwise
std::vector<int64_t> dims_of(const Shape& s);

class Lowering {
 public:
  Lowering(const ComputeGraph& g, hlo::FunctionBuilder& f);
  // Emits every node and the return; the signature text (for the report).
  std::string run();

 private:
  void lower(int i);
  hlo::Value op(const Node& n);
  hlo::Value view(const Node& n);
  void cache_write(const Node& n);
  hlo::Value cache_read(const Node& n);

  // lower_ops.cpp
  hlo::Value matmul(const Node& n);
  hlo::Value binary(const Node& n, std::string_view name);
  hlo::Value rms_norm(const Node& n);
  hlo::Value rope(const Node& n);
  hlo::Value attention(const Node& n);
  hlo::Value gather(const Node& n);
  hlo::Value silu(const hlo::Value& x);
  hlo::Value gelu(const hlo::Value& x);
  hlo::Value softcap(const hlo::Value& x, float cap);

  const hlo::Value& value(int node) const;
  hlo::Value raw_weight(int node);
  hlo::Value dense_weight(int node);  // f32 [rows, cols] (or [d])
  hlo::Value operand(int node);       // a weight's dense form, or an earlier node's value
  hlo::Value splat(float v, const hlo::TensorType& like);
  // The i32 scalar position `relative` to the entry's first position.
  hlo::Value position(int64_t relative);
  hlo::Value& cache(SourceKind kind) { return kind == SourceKind::KCache ? k_ : v_; }

  const ComputeGraph& g_;
  const Tape& tape_;
  hlo::FunctionBuilder& f_;
  std::vector<std::optional<hlo::Value>> values_;
  std::map<int, hlo::Value> raw_, dense_;
  std::optional<hlo::Value> tokens_, position_;
  hlo::Value k_, v_;
};

}  // namespace skainet::record::detail
