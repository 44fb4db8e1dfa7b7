// skainet::opset — the op vocabulary: the one list of ops, what a call of one carries, and the
// recording seam (DESIGN.md §4). Every op checks its inputs and draws its output as usual, then
// either runs its kernel or, when the context has a Recorder, hands the call to it instead. Under a
// recorder the model code runs unchanged on symbolic tensors (shapes, formats, identities; no bytes),
// so the recorded program is the eager one, op for op.
//
//   const Tensor* in[] = {&x};
//   const opset::OpCall call{.kind = opset::OpKind::Softcap, .inputs = in, .output = out,
//                            .attrs = {.cap = cap}};
//   if (opset::Recorder* r = ctx.recorder()) r->record(call);   // ops/checks.hpp: detail::recorded
//
// The layer above memory (whose ExecutionContext holds a Recorder by pointer only) and below ops
// and record, which both speak it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "skainet/compute/kernel_ops.hpp"
#include "skainet/core/tensor.hpp"

namespace skainet::opset {

// The op list, one row per op: X(Enumerator, name, min_inputs, max_inputs). It generates OpKind,
// the names, the arity a recording checks, and the StableHLO lowering's dispatch (one
// `Lowering::lower_<name>` per row, record/lowering.hpp). The attributes a row reads are named in
// OpAttributes. Inputs are tensors; an optional one (rms_norm's weight, rope's frequency factors)
// widens the range.
#define SKAINET_OPS(X)             \
  X(Matmul, matmul, 2, 2)          \
  X(Add, add, 2, 2)                \
  X(Mul, mul, 2, 2)                \
  X(Scale, scale, 1, 1)            \
  X(Silu, silu, 1, 1)              \
  X(Swiglu, swiglu, 2, 2)          \
  X(Geglu, geglu, 2, 2)            \
  X(Softcap, softcap, 1, 1)        \
  X(RmsNorm, rms_norm, 1, 2)       \
  X(Rope, rope, 1, 2)              \
  X(Softmax, softmax, 1, 1)        \
  X(Attention, attention, 3, 3)    \
  X(GatherRows, gather_rows, 1, 1) \
  X(Copy, copy, 1, 1)              \
  X(WriteRows, write_rows, 1, 1)

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

// What an op call carries beside its tensors: one field per meaning, set only by the ops that name
// it (the rest keep their defaults).
struct OpAttributes {
  float eps = 0;        // rms_norm
  float scale = 1;      // scale: the multiplier
  float cap = 0;        // softcap: cap * tanh(x / cap)
  // rope's first position, attention's offset, write_rows' first row: always a position of the
  // forward pass, so a recorder may make it the runtime position argument.
  int64_t position = 0;
  kernels::RopeParams rope{};
  kernels::SoftmaxParams softmax{};
  kernels::AttentionParams attention{};
};

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

}  // namespace skainet::opset
