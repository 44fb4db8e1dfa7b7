// Entry checks shared by the eager ops: the only place liveness, types and shapes are validated
// before a kernel runs. Messages are built only when throwing (no allocation on the success path).
#pragma once

#include <string_view>

#include "skainet/ops.hpp"

namespace skainet::ops::detail {

// Liveness (StorageClosedException) and definedness of an input.
void require_live(const Tensor& t, std::string_view op, std::string_view arg);
void require_f32(const Tensor& t, std::string_view op, std::string_view arg);  // live, dense F32
void require_writable(const Tensor& t, std::string_view op);                     // live, writable
void require_same_shape(const Tensor& a, const Tensor& b, std::string_view op);
void require_broadcast(const Tensor& a, const Tensor& b, std::string_view op);  // b → a's shape
void require_inner_contiguous(const Tensor& t, std::string_view op, std::string_view arg);

// The recording seam: when the context records, the call goes to its recorder and the op skips its
// kernel (returns true); otherwise nothing happens (false).
inline bool recorded(ExecutionContext& ctx, const memory::OpCall& call) {
  memory::Recorder* r = ctx.recorder();
  if (!r) return false;
  r->record(call);
  return true;
}

// Output of an op from the active scope.
inline Tensor output(ExecutionContext& ctx, const Shape& shape, std::string_view op, GgmlType type = GgmlType::F32) {
  return ctx.scope().allocate(shape, type, op);
}

}  // namespace skainet::ops::detail
