// The mixture-of-experts FFN: routing as llama.cpp's softmax gating, then each row through the experts
// it chose. Row by row: a decode step reads only its k experts' matrices; a prefill chunk runs the
// same matmuls once per row (grouping a chunk's rows by expert is a later step).
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

Tensor experts_ffn(memory::ExecutionContext& ctx, const Tensor& h, const ExpertWeights& w,
                   std::span<ExpertChoice> chosen) {
  const int64_t n = h.dim(0), experts = w.router.dim(0);
  const Tensor logits = ops::matmul(ctx, h, w.router);  // [n, experts]
  const Tensor out = ctx.scope().allocate({n, h.dim(1)}, GgmlType::F32, "experts out");
  for (int64_t t = 0; t < n; ++t) {
    route_experts({logits.row(t).data<float>(), static_cast<size_t>(experts)}, chosen);
    const Tensor x = h.rows(t, 1);
    Tensor sum;
    for (const ExpertChoice& c : chosen) {
      const Tensor gate = ops::matmul(ctx, x, expert(w.gate, c.expert));
      const Tensor up = ops::matmul(ctx, x, expert(w.up, c.expert));
      const Tensor down = ops::matmul(ctx, ops::swiglu(ctx, gate, up), expert(w.down, c.expert));
      const Tensor weighted = ops::scale(ctx, down, c.weight);
      sum = sum.defined() ? ops::add(ctx, sum, weighted) : weighted;
    }
    ops::write_rows(ctx, sum, out, t);
  }
  return out;
}

}  // namespace skainet::model
