// skainet::ops — the recording seam (DESIGN.md §4), built from the op list in ops.hpp: OpKind, the
// ops' names and arities, what a call of one carries, and the Recorder. Every op checks its inputs
// and draws its output as usual, then either runs its kernel or, when the context has a Recorder,
// hands the call to it instead. Under a recorder the model code runs unchanged on symbolic tensors
// (shapes, formats, identities; no bytes), so the recorded program is the eager one, op for op.
//
//   const Tensor* in[] = {&x};
//   const ops::OpCall call{.kind = ops::OpKind::Softcap, .inputs = in, .output = out, .attrs = {.cap = cap}};
//   if (ops::Recorder* r = ctx.recorder()) r->record(call);   // ops/checks.hpp: detail::recorded
//
// A header of its own so that the model code, which includes ops.hpp, never sees the seam; memory's
// ExecutionContext holds a Recorder by pointer only. The ops (src/ops) and the recorder (record)
// include it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "skainet/compute/ops.hpp"

namespace skainet::ops {

enum class OpKind : uint8_t {
#define SKAINET_OP_ENUMERATOR(kind, name, min_in, max_in) kind,
  SKAINET_OPS(SKAINET_OP_ENUMERATOR)
#undef SKAINET_OP_ENUMERATOR
};

struct OpInfo {
  std::string_view name;  // as ops:: spells the function
  uint8_t min_inputs, max_inputs;
};

inline constexpr std::array kOps = {
#define SKAINET_OP_INFO(kind, name, min_in, max_in) OpInfo{#name, min_in, max_in},
    SKAINET_OPS(SKAINET_OP_INFO)
#undef SKAINET_OP_INFO
};

constexpr const OpInfo& op_info(OpKind k) noexcept { return kOps[static_cast<size_t>(k)]; }
constexpr std::string_view op_kind_name(OpKind k) noexcept { return op_info(k).name; }
constexpr bool takes_inputs(OpKind k, size_t n) noexcept {
  return n >= op_info(k).min_inputs && n <= op_info(k).max_inputs;
}

struct OpCall {
  OpKind kind;
  std::span<const Tensor* const> inputs;
  const Tensor& output;  // the op's output, or the destination it writes into (copy, write_rows)
  OpAttributes attrs{};
  std::span<const int32_t> ids{};  // gather_rows: the row ids (a host array, not a tensor)
};

// Receives every op call while installed on a context (memory::ExecutionContext::record_with).
class Recorder {
 public:
  virtual ~Recorder() = default;
  virtual void record(const OpCall& call) = 0;
};

}  // namespace skainet::ops
