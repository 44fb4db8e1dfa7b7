// Entry checks shared by the eager ops: the only place liveness, types and shapes are validated
// before a kernel runs. Messages are built only when throwing (no allocation on the success path).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "skainet/compute/ops.hpp"
#include "skainet/compute/opset.hpp"

namespace skainet::ops::detail {

// Liveness (StorageClosedException) and definedness of an input.
void require_live(const Tensor& t, std::string_view op, std::string_view arg);
void require_f32(const Tensor& t, std::string_view op, std::string_view arg);  // live, dense F32
void require_writable(const Tensor& t, std::string_view op);                   // live, writable
void require_same_shape(const Tensor& a, const Tensor& b, std::string_view op);
void require_broadcast(const Tensor& a, const Tensor& b, std::string_view op);  // b → a's shape
void require_inner_contiguous(const Tensor& t, std::string_view op, std::string_view arg);
// A soft-capping value: finite and > 0 (or 0, "none", where `zero_means_none`).
void require_softcap(float cap, std::string_view op, bool zero_means_none);
// A sliding window: >= 0 (0: none).
void require_window(int64_t window, std::string_view op);

// The grain of a matmul's parallel split over `items` output rows: about four chunks per thread, and
// each chunk at least 2^16 multiply-adds, since a hand-off to another thread costs microseconds
// (attention's per-head products are far smaller than that, and run inline).
inline int64_t matmul_grain(int64_t items, int64_t threads, int64_t macs_per_item) {
  constexpr int64_t kMinChunkMacs = int64_t{1} << 16;
  return std::max<int64_t>({items / (threads * 4), kMinChunkMacs / std::max<int64_t>(macs_per_item, 1), 1});
}

// A recorded (symbolic) tensor reaching a kernel: it has no bytes.
[[noreturn]] void symbolic_in_eager_op(const OpCall& call, const Tensor& t);
// A call with more or fewer inputs than the op list gives its op (InvalidArgument, while recording).
[[noreturn]] void inputs_off_the_list(const OpCall& call);

// The recording seam: when the context records, the call goes to its recorder and the op skips its
// kernel (returns true); otherwise the kernel runs (false), which symbolic tensors cannot feed. A
// recorder may rely on the op list's arity (the lowering reads inputs by index).
inline bool recorded(ExecutionContext& ctx, const OpCall& call) {
  if (Recorder* r = ctx.recorder()) {
    if (!takes_inputs(call.kind, call.inputs.size())) inputs_off_the_list(call);
    r->record(call);
    return true;
  }
  for (const Tensor* t : call.inputs)
    if (t->defined() && t->storage().symbolic()) symbolic_in_eager_op(call, *t);
  if (call.output.storage().symbolic()) symbolic_in_eager_op(call, call.output);
  return false;
}

// Output of an op from the active scope.
inline Tensor output(ExecutionContext& ctx, const Shape& shape, std::string_view op, GgmlType type = GgmlType::F32) {
  return ctx.scope().allocate(shape, type, op);
}

}  // namespace skainet::ops::detail
