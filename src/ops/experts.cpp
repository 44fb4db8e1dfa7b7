// The mixture-of-experts ops: routing (which experts each row chose, and their weights) and the
// product of each row with the experts it chose. Three ops rather than one FFN call, so that a
// recording sees the routing as values it can compute (StableHLO top-k and gather) instead of
// host-side decisions, and the eager path still reads only the experts some row chose.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "ops/checks.hpp"
#include "skainet/compute/kernels.hpp"
#include "skainet/compute/op_constants.hpp"

namespace skainet::ops {

using namespace detail;

namespace {

// softmax(logits)[e], computed as llama.cpp's routing does: in double from the row's maximum.
struct Softmax {
  explicit Softmax(std::span<const float> logits) : l(logits) {
    top = *std::max_element(l.begin(), l.end());
    for (float x : l) total += std::exp(static_cast<double>(x - top));
  }
  float operator()(int32_t e) const {
    return static_cast<float>(std::exp(static_cast<double>(l[static_cast<size_t>(e)] - top)) / total);
  }
  std::span<const float> l;
  float top = 0;
  double total = 0;
};

void require_routing(const Tensor& logits, int64_t k, std::string_view op) {
  require_f32(logits, op, "logits");
  require_inner_contiguous(logits, op, "logits");
  if (logits.rank() != 2 || k < 1 || k > logits.dim(1))
    throw InvalidArgument(
        fmt::format("{}: {} experts chosen of router logits {} ([rows, experts])", op, k, logits.shape().to_string()));
}

void require_ids(const Tensor& ids, int64_t rows, int64_t experts, std::string_view op) {
  require_live(ids, op, "ids");
  if (ids.type() != GgmlType::I32 || ids.rank() != 2 || ids.dim(0) != rows || !ids.is_contiguous())
    throw InvalidArgument(fmt::format("{}: ids {} must be contiguous I32 [{}, k]", op, ids.describe(), rows));
  if (ids.storage().symbolic()) return;  // a recording: the values are computed later
  const int32_t* p = ids.data<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i)
    if (p[i] < 0 || p[i] >= experts)
      throw InvalidArgument(
          fmt::format("{}: expert id {} at index {} is outside the {} experts", op, p[i], i, experts));
}

// One chosen expert's share of a matmul_experts call: its rows, gathered at [first, first + m).
struct Group {
  int64_t expert = 0, first = 0, m = 0;
  size_t scratch_at = 0;  // where its prepared rows start in the context's scratch
};
constexpr size_t kMaxGroupsAtOnce = 32;

// The groups' products in two parallel regions in all (every group's rows prepared, then all their
// weight rows split over the threads as one range), instead of two regions per expert: a decode row
// times one expert's matrix is too little work to hand to the pool on its own, and k experts' small
// regions each end in a wait. Only where the scratch already holds every group's prepared rows (a
// decode step's few rows; the plan prices the largest single matmul, so a prefill chunk's k-fold rows
// take the per-expert path instead of growing it). False: nothing done.
bool products_at_once(ExecutionContext& ctx, std::span<const Group> groups, const Tensor& gathered, const Tensor& stack,
                      const Tensor& products) {
  if (stack.block_order() != BlockOrder::RowMajor) return false;
  const kernels::KernelTable& kt = ctx.kernels();
  const auto x_of = [&](const Group& g) { return gathered.rows(g.first, g.m); };
  const auto w_of = [&](const Group& g) { return stack.select(0, g.expert); };
  std::array<Group, kMaxGroupsAtOnce> at{};
  size_t need = 0, rows = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    at[i] = groups[i];
    at[i].scratch_at = need;
    const size_t bytes = kt.matmul_scratch ? kt.matmul_scratch(x_of(groups[i]), w_of(groups[i])) : 0;
    need += (bytes + 63) / 64 * 64;  // each group's prepared rows 64-byte aligned, as the scratch is
    rows += static_cast<size_t>(groups[i].m);
  }
  if (need > ctx.scratch_stats().held) return false;
  std::byte* scratch = need ? ctx.scratch(need).data() : nullptr;
  const std::span<const Group> gs(at.data(), groups.size());
  const int64_t out_dim = stack.dim(1), in_dim = stack.dim(2);
  const auto threads = static_cast<int64_t>(ctx.pool().size());
  if (need) {
    auto* prepare = kt.matmul_prepare;
    ctx.pool().parallel_for(static_cast<int64_t>(gs.size()), 1, [&](int64_t b, int64_t e) noexcept {
      for (int64_t i = b; i < e; ++i) {
        const Group& g = gs[static_cast<size_t>(i)];
        prepare(x_of(g), w_of(g), scratch + g.scratch_at, 0, g.m);
      }
    });
  }
  // The same chunking as ops::matmul, each unit one output row of one expert.
  const int64_t units = static_cast<int64_t>(gs.size()) * out_dim;
  const int64_t grain = matmul_grain(units, threads, static_cast<int64_t>(rows / gs.size()) * in_dim);
  auto* kernel = kt.matmul;
  auto* prepared = kt.matmul_prepared;
  ctx.pool().parallel_for(units, grain, [&](int64_t b, int64_t e) noexcept {
    while (b < e) {  // a chunk may span the end of one expert's rows and the start of the next's
      const Group& g = gs[static_cast<size_t>(b / out_dim)];
      const int64_t r0 = b % out_dim, r1 = std::min(out_dim, r0 + (e - b));
      const Tensor x = x_of(g), w = w_of(g), y = products.rows(g.first, g.m);
      if (need) {
        prepared(x, w, y, r0, r1, scratch + g.scratch_at);
      } else {
        kernel(x, w, y, r0, r1);
      }
      b += r1 - r0;
    }
  });
  return true;
}

}  // namespace

void choose_experts(std::span<const float> logits, std::span<int32_t> ids) {
  if (ids.empty() || ids.size() > logits.size())
    throw InvalidArgument(fmt::format("ops::choose_experts: {} experts chosen of {}", ids.size(), logits.size()));
  const Softmax p(logits);
  size_t filled = 0;
  for (size_t e = 0; e < logits.size(); ++e) {
    const auto id = static_cast<int32_t>(e);
    const float pe = p(id);
    if (filled == ids.size() && pe <= p(ids.back())) continue;  // ties keep the lower expert
    size_t at = std::min(filled, ids.size() - 1);
    while (at > 0 && p(ids[at - 1]) < pe) {
      ids[at] = ids[at - 1];
      --at;
    }
    ids[at] = id;
    filled = std::min(filled + 1, ids.size());
  }
}

void weigh_experts(std::span<const float> logits, std::span<const int32_t> ids, std::span<float> weights) {
  if (ids.size() != weights.size())
    throw InvalidArgument(fmt::format("ops::weigh_experts: {} ids for {} weights", ids.size(), weights.size()));
  const Softmax p(logits);
  float sum = 0;
  for (size_t j = 0; j < ids.size(); ++j) sum += weights[j] = p(ids[j]);
  sum = std::max(sum, kernels::kMinChosenExpertSum);
  for (float& w : weights) w /= sum;
}

Tensor expert_ids(ExecutionContext& ctx, const Tensor& logits, int64_t k) {
  constexpr std::string_view kOp = "ops::expert_ids";
  require_routing(logits, k, kOp);
  Tensor out = output(ctx, Shape{logits.dim(0), k}, kOp, GgmlType::I32);
  const Tensor* in[] = {&logits};
  if (recorded(ctx, {.kind = OpKind::ExpertIds, .inputs = in, .output = out})) return out;
  const auto e = static_cast<size_t>(logits.dim(1));
  for (int64_t t = 0; t < logits.dim(0); ++t)
    choose_experts({logits.row(t).data<float>(), e}, {out.row(t).mutable_data<int32_t>(), static_cast<size_t>(k)});
  return out;
}

Tensor expert_weights(ExecutionContext& ctx, const Tensor& logits, const Tensor& ids) {
  constexpr std::string_view kOp = "ops::expert_weights";
  require_routing(logits, 1, kOp);
  require_ids(ids, logits.dim(0), logits.dim(1), kOp);
  const int64_t k = ids.dim(1);
  Tensor out = output(ctx, Shape{logits.dim(0), k}, kOp);
  const Tensor* in[] = {&logits, &ids};
  if (recorded(ctx, {.kind = OpKind::ExpertWeights, .inputs = in, .output = out})) return out;
  const auto e = static_cast<size_t>(logits.dim(1)), ku = static_cast<size_t>(k);
  for (int64_t t = 0; t < logits.dim(0); ++t)
    weigh_experts({logits.row(t).data<float>(), e}, {ids.row(t).data<int32_t>(), ku},
                  {out.row(t).mutable_data<float>(), ku});
  return out;
}

namespace {

void require_expert_operands(const Tensor& x, const Tensor& stack, const Tensor& ids, const Tensor& bias,
                             std::string_view op) {
  require_f32(x, op, "x");
  require_inner_contiguous(x, op, "x");
  require_live(stack, op, "stack");
  if (stack.rank() != 3 || stack.dim(2) != x.dim(-1))
    throw InvalidArgument(fmt::format("{}: stack {} must be [experts, out, {}] for x {}", op, stack.shape().to_string(),
                                      x.dim(-1), x.shape().to_string()));
  require_ids(ids, x.dim(0), stack.dim(0), op);
  const int64_t n = ids.dim(0), k = ids.dim(1), in_dim = stack.dim(2), out_dim = stack.dim(1);
  if (!(x.rank() == 2 || (x.rank() == 3 && x.dim(1) == k)))
    throw InvalidArgument(
        fmt::format("{}: x {} must be [{}, {}] or [{}, {}, {}]", op, x.shape().to_string(), n, in_dim, n, k, in_dim));
  if (bias.defined()) {
    require_f32(bias, op, "bias");
    require_inner_contiguous(bias, op, "bias");
    if (bias.rank() != 2 || bias.dim(0) != stack.dim(0) || bias.dim(1) != out_dim)
      throw InvalidArgument(fmt::format("{}: bias {} must be [{}, {}] (a row per expert)", op, bias.shape().to_string(),
                                        stack.dim(0), out_dim));
  }
}

// The (row, choice) slots of a call grouped by expert, in expert order, with each slot's row of x
// gathered: group g's slots are slot[first, first + m) and its rows gathered[first, first + m).
struct ExpertGroups {
  Tensor slots;     // I32 [n * k]: slot i is row i / k's choice i % k
  Tensor gathered;  // [n * k, in]
  int64_t filled = 0;
  std::array<Group, kMaxGroupsAtOnce> few{};  // the first groups, enough for a decode step's
  size_t count = 0;                           // groups in all (more than `few` holds: a prefill chunk)
};

ExpertGroups group_by_expert(ExecutionContext& ctx, const Tensor& x, const Tensor& ids, int64_t experts) {
  const int64_t n = ids.dim(0), k = ids.dim(1), in_dim = x.dim(-1);
  ExpertGroups groups{.slots = output(ctx, Shape{n * k}, "slots of one expert's rows", GgmlType::I32),
                      .gathered = output(ctx, Shape{n * k, in_dim}, "rows of one expert")};
  const int32_t* chosen = ids.data<int32_t>();
  int32_t* slot = groups.slots.mutable_data<int32_t>();
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t first = groups.filled;
    for (int64_t i = 0; i < n * k; ++i)
      if (chosen[i] == e) slot[groups.filled++] = static_cast<int32_t>(i);
    if (groups.filled == first) continue;  // an expert no row chose is not read
    for (int64_t r = first; r < groups.filled; ++r) {
      const int64_t t = slot[r] / k, j = slot[r] % k;
      const Tensor src = x.rank() == 2 ? x.row(t) : x.row(t).row(j);
      std::memcpy(groups.gathered.row(r).mutable_data<float>(), src.data<float>(), static_cast<size_t>(in_dim) * 4);
    }
    if (groups.count < groups.few.size())
      groups.few[groups.count] = {.expert = e, .first = first, .m = groups.filled - first};
    ++groups.count;
  }
  return groups;
}

// A group's products back to their slots of out [n, k, out], plus the expert's bias row (gpt-oss).
void scatter_products(const Group& g, const ExpertGroups& groups, const Tensor& products, const Tensor& bias,
                      const Tensor& out) {
  const int64_t k = out.dim(1), out_dim = out.dim(2);
  const int32_t* slot = groups.slots.data<int32_t>();
  const float* b = bias.defined() ? bias.row(g.expert).data<float>() : nullptr;
  for (int64_t r = g.first; r < g.first + g.m; ++r) {
    float* to = out.row(slot[r] / k).row(slot[r] % k).mutable_data<float>();
    const float* from = products.row(r).data<float>();
    if (b == nullptr) {
      std::memcpy(to, from, static_cast<size_t>(out_dim) * 4);
    } else {
      for (int64_t i = 0; i < out_dim; ++i) to[i] = from[i] + b[i];
    }
  }
}

}  // namespace

// Grouped by expert: the (row, choice) slots that chose expert e are gathered into consecutive rows,
// multiplied by e's matrix in one matmul (so a prefill chunk reads each chosen expert once, a decode
// row only its k experts), and the products scattered back to their slots. An expert no row chose is
// never read. The buffers (slot list, gathered rows, products) come from the scope, sized for n * k.
Tensor matmul_experts(ExecutionContext& ctx, const Tensor& x, const Tensor& stack, const Tensor& ids,
                      const Tensor& bias) {
  constexpr std::string_view kOp = "ops::matmul_experts";
  require_expert_operands(x, stack, ids, bias, kOp);
  const int64_t n = ids.dim(0), k = ids.dim(1), out_dim = stack.dim(1);
  Tensor out = output(ctx, Shape{n, k, out_dim}, kOp);
  const Tensor* in[] = {&x, &stack, &ids, &bias};
  if (recorded(ctx, {.kind = OpKind::MatmulExperts, .inputs = {in, bias.defined() ? 4u : 3u}, .output = out}))
    return out;

  const ExpertGroups groups = group_by_expert(ctx, x, ids, stack.dim(0));
  const Tensor products = output(ctx, Shape{n * k, out_dim}, "products of one expert");
  const std::span<const Group> few(groups.few.data(), std::min(groups.count, groups.few.size()));
  if (groups.count <= groups.few.size() && products_at_once(ctx, few, groups.gathered, stack, products)) {
    for (const Group& g : few) scatter_products(g, groups, products, bias, out);
    return out;
  }
  // Many experts chosen (a prefill chunk): one matmul per expert over its gathered rows.
  const int32_t* chosen = ids.data<int32_t>();
  const int32_t* slot = groups.slots.data<int32_t>();
  for (int64_t r = 0; r < groups.filled;) {
    Group g{.expert = chosen[slot[r]], .first = r};
    while (r < groups.filled && chosen[slot[r]] == g.expert) ++r;
    g.m = r - g.first;
    matmul_into(ctx, groups.gathered.rows(g.first, g.m), stack.select(0, g.expert), products.rows(g.first, g.m));
    scatter_products(g, groups, products, bias, out);
  }
  return out;
}

}  // namespace skainet::ops
