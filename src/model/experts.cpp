// The mixture-of-experts FFN: routing as llama.cpp's softmax gating, then the rows grouped by the
// experts they chose, each chosen expert's matmuls run once over its group. Eager only: the groups
// come from the router's logits, read as they are computed.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "skainet/compute/ops.hpp"
#include "skainet/model/model.hpp"

namespace skainet::model {
namespace {

// llama.cpp divides by the chosen probabilities' sum clamped below at the smallest normal F16.
constexpr float kMinChosenSum = 6.103515625e-5f;

// Expert e's 2-D matrix of a stack [experts, rows, cols]: a view, no copy.
Tensor expert(const Tensor& stack, uint32_t e) { return stack.select(0, e); }

// y + expert e's bias row (gpt-oss; llama.cpp's ggml_add_id), or y where the stack has no biases.
Tensor biased(memory::ExecutionContext& ctx, const Tensor& y, const Tensor& bias, uint32_t e) {
  return bias.defined() ? ops::add(ctx, y, expert(bias, e)) : y;
}

}  // namespace

void route_experts(std::span<const float> logits, std::span<ExpertChoice> chosen) {
  if (chosen.empty() || chosen.size() > logits.size())
    throw InvalidArgument(fmt::format("route_experts: {} experts chosen of {}", chosen.size(), logits.size()));
  const float top = *std::max_element(logits.begin(), logits.end());
  double total = 0;
  for (float l : logits) total += std::exp(static_cast<double>(l - top));
  size_t filled = 0;
  for (size_t e = 0; e < logits.size(); ++e) {
    const float p = static_cast<float>(std::exp(static_cast<double>(logits[e] - top)) / total);
    if (filled == chosen.size() && p <= chosen.back().weight) continue;  // ties keep the lower expert
    size_t at = std::min(filled, chosen.size() - 1);
    while (at > 0 && chosen[at - 1].weight < p) {
      chosen[at] = chosen[at - 1];
      --at;
    }
    chosen[at] = {static_cast<uint32_t>(e), p};
    filled = std::min(filled + 1, chosen.size());
  }
  float sum = 0;
  for (const ExpertChoice& c : chosen) sum += c.weight;
  sum = std::max(sum, kMinChosenSum);
  for (ExpertChoice& c : chosen) c.weight /= sum;
}

namespace {

// Each row's choices, routed into the step's buffers: experts [n, k] (I32) and weights [n, k].
struct Routes {
  Tensor experts, weights;
};
Routes route_rows(memory::ExecutionContext& ctx, const Tensor& logits, std::span<ExpertChoice> chosen,
                  std::span<uint64_t> routed) {
  const int64_t n = logits.dim(0), k = static_cast<int64_t>(chosen.size());
  const Routes r{ctx.scope().allocate({n, k}, GgmlType::I32, "experts of each row"),
                 ctx.scope().allocate({n, k}, GgmlType::F32, "weights of each row's experts")};
  int32_t* experts = r.experts.mutable_data<int32_t>();
  float* weights = r.weights.mutable_data<float>();
  for (int64_t t = 0; t < n; ++t) {
    route_experts({logits.row(t).data<float>(), static_cast<size_t>(logits.dim(1))}, chosen);
    for (int64_t j = 0; j < k; ++j) {
      experts[t * k + j] = static_cast<int32_t>(chosen[static_cast<size_t>(j)].expert);
      weights[t * k + j] = chosen[static_cast<size_t>(j)].weight;
      if (!routed.empty()) ++routed[chosen[static_cast<size_t>(j)].expert];
    }
  }
  return r;
}

// The rows that chose one expert: their indices in h, their weights [m, 1] and their slots (row * k + j)
// in the [n * k, dim] buffer of every row's experts' outputs. Buffers of n rows, the first m used.
struct Group {
  Tensor rows, weights, slots;
  int64_t m = 0;
};
void gather_group(const Routes& r, int32_t expert, Group& g) {
  const int64_t n = r.experts.dim(0), k = r.experts.dim(1);
  const int32_t* experts = r.experts.data<int32_t>();
  int32_t* rows = g.rows.mutable_data<int32_t>();
  int32_t* slots = g.slots.mutable_data<int32_t>();
  float* weights = g.weights.mutable_data<float>();
  g.m = 0;
  for (int64_t i = 0; i < n * k; ++i)
    if (experts[i] == expert) {
      rows[g.m] = static_cast<int32_t>(i / k), slots[g.m] = static_cast<int32_t>(i);
      weights[g.m++] = r.weights.data<float>()[i];
    }
}

}  // namespace

// Grouped by expert: each expert chosen by any row runs once over all its rows (gathered from h), so
// a prefill chunk reads each chosen expert's matrices once; a decode row reads only its k experts'.
// Each output row lands in its (row, choice) slot; a row's k slots are then summed in choice order.
Tensor experts_ffn(memory::ExecutionContext& ctx, const Tensor& h, const ExpertWeights& w,
                   std::span<ExpertChoice> chosen) {
  const int64_t n = h.dim(0), dim = h.dim(1), k = static_cast<int64_t>(chosen.size());
  Tensor logits = ops::matmul(ctx, h, w.router);
  if (w.router_bias.defined()) logits = ops::add(ctx, logits, w.router_bias);
  const Routes routes = route_rows(ctx, logits, chosen, w.routed);
  Group g{ctx.scope().allocate({n}, GgmlType::I32, "rows of one expert"),
          ctx.scope().allocate({n, 1}, GgmlType::F32, "weights of one expert's rows"),
          ctx.scope().allocate({n}, GgmlType::I32, "slots of one expert's rows")};
  const Tensor slots = ctx.scope().allocate({n * k, dim}, GgmlType::F32, "each row's experts' outputs");
  for (int64_t e = 0; e < w.router.dim(0); ++e) {
    gather_group(routes, static_cast<int32_t>(e), g);
    if (g.m == 0) continue;  // an expert no row chose is not read
    const Tensor x = ops::gather_rows(ctx, h, {g.rows.data<int32_t>(), static_cast<size_t>(g.m)});
    const auto e32 = static_cast<uint32_t>(e);
    const Tensor gate = biased(ctx, ops::matmul(ctx, x, expert(w.gate, e32)), w.gate_bias, e32);
    const Tensor up = biased(ctx, ops::matmul(ctx, x, expert(w.up, e32)), w.up_bias, e32);
    const Tensor act = w.oai_swiglu ? ops::swiglu_oai(ctx, gate, up) : ops::swiglu(ctx, gate, up);
    const Tensor down = biased(ctx, ops::matmul(ctx, act, expert(w.down, e32)), w.down_bias, e32);
    const Tensor weighted = ops::mul(ctx, down, g.weights.rows(0, g.m));
    for (int64_t i = 0; i < g.m; ++i) ops::write_rows(ctx, weighted.rows(i, 1), slots, g.slots.data<int32_t>()[i]);
  }
  const Tensor by_row = slots.reshape({n, k * dim});  // row t's choice j: columns [j * dim, (j + 1) * dim)
  Tensor sum = by_row.narrow(1, 0, dim);
  for (int64_t j = 1; j < k; ++j) sum = ops::add(ctx, sum, by_row.narrow(1, j * dim, dim));
  return sum;
}

}  // namespace skainet::model
