// The mixture-of-experts FFN as ops of the op list: the router's logits, the experts each row chose
// and their weights (ops::expert_ids, ops::expert_weights), each row times its experts' gate, up and
// down matrices (ops::matmul_experts, grouped by expert: an expert no row chose is never read; gpt-oss
// adds each chosen expert's bias row there), the k products weighted and summed in choice order. The
// same code runs eagerly and under a recorder (record/), which lowers the routing and the products to
// StableHLO.
#include "skainet/compute/ops.hpp"
#include "skainet/model/model.hpp"

namespace skainet::model {

Tensor experts_ffn(memory::ExecutionContext& ctx, const Tensor& h, const ExpertWeights& w, int64_t k) {
  const int64_t n = h.dim(0), dim = h.dim(1);
  Tensor logits = ops::matmul(ctx, h, w.router);
  if (w.router_bias.defined()) logits = ops::add(ctx, logits, w.router_bias);
  const Tensor ids = ops::expert_ids(ctx, logits, k);
  if (!w.routed.empty()) {  // --record-expert-stats: eager only (a recording never asks)
    const int32_t* chosen = ids.data<int32_t>();
    for (int64_t i = 0; i < n * k; ++i) ++w.routed[static_cast<size_t>(chosen[i])];
  }
  const Tensor weights = ops::expert_weights(ctx, logits, ids);
  const Tensor gate = ops::matmul_experts(ctx, h, w.gate, ids, w.gate_bias);
  const Tensor up = ops::matmul_experts(ctx, h, w.up, ids, w.up_bias);
  const Tensor act = w.oai_swiglu ? ops::swiglu_oai(ctx, gate, up) : ops::swiglu(ctx, gate, up);
  const Tensor down = ops::matmul_experts(ctx, act, w.down, ids, w.down_bias);  // [n, k, dim]
  const Tensor weighted = ops::mul(ctx, down, weights.reshape({n, k, 1}));
  const Tensor by_row = weighted.reshape({n, k * dim});  // row t's choice j: columns [j * dim, (j + 1) * dim)
  Tensor sum = by_row.narrow(1, 0, dim);
  for (int64_t j = 1; j < k; ++j) sum = ops::add(ctx, sum, by_row.narrow(1, j * dim, dim));
  return sum;
}

}  // namespace skainet::model
