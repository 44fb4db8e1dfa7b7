#include <cmath>

#include <fmt/format.h>

#include "ops/checks.hpp"

namespace skainet::ops::detail {

void symbolic_in_eager_op(const OpCall& call, const Tensor& t) {
  throw InvalidArgument(fmt::format("ops::{}: {} is a recorded value (shapes only) and the context is not recording",
                                    op_kind_name(call.kind), t.describe()));
}

void inputs_off_the_list(const OpCall& call) {
  const OpInfo& op = op_info(call.kind);
  throw InvalidArgument(fmt::format("ops::{}: recorded with {} inputs; the op list gives it {} to {}", op.name,
                                    call.inputs.size(), op.min_inputs, op.max_inputs));
}

void require_live(const Tensor& t, std::string_view op, std::string_view arg) {
  if (!t.defined()) throw InvalidArgument(fmt::format("{}: argument '{}' is an undefined tensor", op, arg));
  t.check_alive(op);
}

void require_f32(const Tensor& t, std::string_view op, std::string_view arg) {
  require_live(t, op, arg);
  if (t.type() != GgmlType::F32)
    throw InvalidArgument(fmt::format("{}: argument '{}' must be F32, found {}", op, arg, t.describe()));
}

void require_writable(const Tensor& t, std::string_view op) {
  require_live(t, op, "out");
  if (!t.storage().writable())
    throw InvalidArgument(
        fmt::format("{}: output {} is read-only ({})", op, t.describe(), domain_name(t.storage().domain())));
}

void require_same_shape(const Tensor& a, const Tensor& b, std::string_view op) {
  if (!(a.shape() == b.shape()))
    throw InvalidArgument(fmt::format("{}: shapes differ: {} vs {}", op, a.shape().to_string(), b.shape().to_string()));
}

void require_broadcast(const Tensor& a, const Tensor& b, std::string_view op) {
  bool ok = b.rank() <= a.rank();
  for (int i = 0; ok && i < b.rank(); ++i) {
    const int64_t bd = b.dim(i), ad = a.dim(i + a.rank() - b.rank());
    ok = bd == ad || bd == 1;
  }
  if (!ok)
    throw InvalidArgument(
        fmt::format("{}: {} does not broadcast to {}", op, b.shape().to_string(), a.shape().to_string()));
}

void require_inner_contiguous(const Tensor& t, std::string_view op, std::string_view arg) {
  if (t.rank() > 0 && t.dim(-1) > 1 && !t.packed() && t.stride(-1) != static_cast<int64_t>(t.element_size()))
    throw InvalidArgument(
        fmt::format("{}: argument '{}' needs a contiguous innermost dimension; {} has stride {} (copy it first)", op,
                    arg, t.describe(), t.stride(-1)));
}

void require_softcap(float cap, std::string_view op, bool zero_means_none) {
  if (zero_means_none && cap == 0) return;
  if (!std::isfinite(cap) || cap <= 0)
    throw InvalidArgument(fmt::format("{}: soft-capping value {} should be finite and > 0{}", op, cap,
                                      zero_means_none ? " (0: none)" : ""));
}

void require_window(int64_t window, std::string_view op) {
  if (window < 0) throw InvalidArgument(fmt::format("{}: sliding window {} should be >= 0 (0: none)", op, window));
}

}  // namespace skainet::ops::detail
