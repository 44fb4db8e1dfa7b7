// Each recorded op as StableHLO, computing what the eager kernel computes (src/kernels/ref) in f32.
// Builder calls are sequenced one per statement: the emitted text must not depend on the order in
// which a compiler evaluates function arguments.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "record/lowering.hpp"
#include "skainet/compute/op_constants.hpp"

namespace skainet::record::detail {

hlo::Value Lowering::op(const Node& n) {
  using Rule = hlo::Value (Lowering::*)(const Node&);
  static constexpr Rule kRules[] = {
#define SKAINET_LOWERING_RULE(kind, name, min_inputs, max_inputs) &Lowering::lower_##name,
      SKAINET_OPS(SKAINET_LOWERING_RULE)
#undef SKAINET_LOWERING_RULE
  };
  return (this->*kRules[static_cast<size_t>(n.op->kind)])(n);
}

void Lowering::no_lowering(const Node& n) const {
  throw Error(
      fmt::format("record {}: op {} has no StableHLO lowering", tape_.entry.name, ops::op_kind_name(n.op->kind)));
}

hlo::Value Lowering::lower_add(const Node& n) { return binary(n, "add"); }
hlo::Value Lowering::lower_mul(const Node& n) { return binary(n, "multiply"); }

hlo::Value Lowering::lower_scale(const Node& n) {
  const hlo::Value& x = value(n.inputs[0]);
  const hlo::Value s = splat(n.op->attrs.scale, x.type);
  return f_.multiply(x, s);
}

hlo::Value Lowering::lower_silu(const Node& n) { return silu(value(n.inputs[0])); }

hlo::Value Lowering::lower_swiglu(const Node& n) {
  const hlo::Value g = silu(value(n.inputs[0]));
  return f_.multiply(g, value(n.inputs[1]));
}

hlo::Value Lowering::lower_geglu(const Node& n) {
  const hlo::Value g = gelu(value(n.inputs[0]));
  return f_.multiply(g, value(n.inputs[1]));
}

// ggml_swiglu_oai (the reference kernel's expression; op_constants.hpp):
// min(g, limit) * logistic(alpha * min(g, limit)) * (clamp(u, -limit, limit) + 1).
hlo::Value Lowering::lower_swiglu_oai(const Node& n) {
  const hlo::Value g = value(n.inputs[0]), u = value(n.inputs[1]);
  const hlo::Value x = f_.binary("minimum", g, splat(kernels::kOaiSwigluLimit, g.type));
  const hlo::Value y_hi = f_.binary("minimum", u, splat(kernels::kOaiSwigluLimit, u.type));
  const hlo::Value y = f_.binary("maximum", y_hi, splat(-kernels::kOaiSwigluLimit, u.type));
  const hlo::Value ax = f_.multiply(splat(kernels::kOaiSwigluAlpha, x.type), x);
  const hlo::Value glu = f_.multiply(x, f_.unary("logistic", ax));
  const hlo::Value y1 = f_.add(y, splat(1.0f, y.type));
  return f_.multiply(glu, y1);
}

hlo::Value Lowering::lower_softcap(const Node& n) { return softcap(value(n.inputs[0]), n.op->attrs.cap); }

// A fourth input is gpt-oss's sinks (F32 [heads]), which both forms carry.
hlo::Value Lowering::lower_attention(const Node& n) {
  return form_ == KernelForm::Engine ? engine_attention(n) : stablehlo_attention(n);
}

hlo::Value Lowering::lower_copy(const Node& n) {
  const Node& src = g_.nodes[static_cast<size_t>(n.inputs[0])];
  if (src.kind == NodeKind::Parameter) return f_.convert(raw_weight(n.inputs[0]), elem_of(n.type));
  return f_.convert(value(n.inputs[0]), elem_of(n.type));
}

// A recorded model runs softmax only inside attention, which lowers its own.
hlo::Value Lowering::lower_softmax(const Node& n) { no_lowering(n); }
// write_rows becomes a CacheWrite node (graph.cpp), which emit.cpp lowers; never an Op node.
hlo::Value Lowering::lower_write_rows(const Node& n) { no_lowering(n); }

hlo::Value Lowering::silu(const hlo::Value& x) {
  const hlo::Value sig = f_.unary("logistic", x);
  return f_.multiply(x, sig);
}

// ggml_gelu_f32 (the reference kernel's gelu_of), with its constants (op_constants.hpp).
hlo::Value Lowering::gelu(const hlo::Value& x) {
  const hlo::Value ax = f_.multiply(splat(kernels::kGeluCoefA, x.type), x);
  const hlo::Value ax2 = f_.multiply(ax, x);
  const hlo::Value inner = f_.add(splat(1.0f, x.type), ax2);
  const hlo::Value cx = f_.multiply(splat(kernels::kSqrt2OverPi, x.type), x);
  const hlo::Value arg = f_.multiply(cx, inner);
  const hlo::Value t = f_.unary("tanh", arg);
  const hlo::Value one_t = f_.add(splat(1.0f, x.type), t);
  const hlo::Value half_x = f_.multiply(splat(0.5f, x.type), x);
  return f_.multiply(half_x, one_t);
}

// cap * tanh(x * (1 / cap)), as the reference kernel (and llama.cpp's graph) computes it.
hlo::Value Lowering::softcap(const hlo::Value& x, float cap) {
  const hlo::Value scaled = f_.multiply(x, splat(1.0f / cap, x.type));
  const hlo::Value t = f_.unary("tanh", scaled);
  return f_.multiply(t, splat(cap, x.type));
}

hlo::Value Lowering::binary(const Node& n, std::string_view name) {
  const hlo::Value& a = value(n.inputs[0]);
  hlo::Value b = operand(n.inputs[1]);
  // b broadcasts right-aligned to a's shape (its dims of 1 repeat), as the eager op does.
  std::vector<int64_t> mapping;
  for (int64_t i = 0; i < b.type.rank(); ++i) mapping.push_back(a.type.rank() - b.type.rank() + i);
  b = f_.broadcast_in_dim(b, a.type.dims, mapping);
  return f_.binary(name, a, b);
}

Lowering::MatmulOperands Lowering::matmul_operands(const Node& n) {
  const hlo::Value& x = value(n.inputs[0]);
  const Node& wn = g_.nodes[static_cast<size_t>(n.inputs[1])];
  if (wn.shape.rank() != 2)
    throw Error(
        fmt::format("record {}: batched matmul weights ({}) are not recorded", tape_.entry.name, wn.shape.to_string()));
  const int64_t k = x.type.dims.back(), rows = x.type.numel() / k;
  return {.x = f_.reshape(x, {rows, k}),
          .w = weight_bytes(n.inputs[1]),
          .type = wn.type,
          .order = held_order(g_, n.inputs[1]),
          .rows = rows,
          .k = k,
          .out = wn.shape[0]};
}

hlo::Value Lowering::lower_matmul(const Node& n) {
  const MatmulOperands m = matmul_operands(n);
  const hlo::Value y = form_ == KernelForm::Engine ? engine_matmul(m) : stablehlo_matmul(m);
  return f_.reshape(y, dims_of(n.shape));
}

hlo::Value Lowering::stablehlo_matmul(const MatmulOperands& m) {
  if (m.rows == 1 && form_ == KernelForm::StableHlo) {
    // One row (decode): multiply + reduce on the blocked dequantization, which IREE fuses into one
    // dispatch reading the packed bytes (a dot_general would first collapse the block dims, and that
    // reshape stops the fusion: every weight would be written out in f32 on every call).
    const hlo::Value x1 = f_.reshape(m.x, {m.k});
    return hlo::matvec(f_, m.type, m.w, x1);
  }
  // Many rows (prefill), or the flat form: the flat dequantization and one contraction; IREE writes
  // the weight in f32 once per call (a transient), which a matrix product amortizes over the rows.
  const hlo::Value dense = hlo::dequantize(f_, m.type, m.w);
  // One row: W · x (weight first). Written x · Wᵀ, IREE 3.13 materializes the dequantized weight
  // transposed on every call (measured: 13x slower decode on a 1.1B Q4_0 model).
  return m.rows == 1 ? f_.dot_general(dense, m.x, {}, {}, {1}, {1}, {{m.out, 1}, hlo::Elem::F32})
                     : f_.dot_general(m.x, dense, {}, {}, {1}, {1}, {{m.rows, m.out}, hlo::Elem::F32});
}

hlo::Value Lowering::lower_rms_norm(const Node& n) {
  const hlo::Value& x = value(n.inputs[0]);
  const int64_t r = x.type.rank(), d = x.type.dims.back();
  std::vector<int64_t> outer(x.type.dims.begin(), x.type.dims.end() - 1), outer_map;
  for (int64_t i = 0; i + 1 < r; ++i) outer_map.push_back(i);
  const hlo::Value sq = f_.multiply(x, x);
  const hlo::Value sum = f_.reduce_sum(sq, {r - 1});
  const hlo::Value inv_d = splat(1.0f / static_cast<float>(d), sum.type);
  const hlo::Value mean = f_.multiply(sum, inv_d);
  const hlo::Value eps = splat(n.op->attrs.eps, sum.type);
  const hlo::Value shifted = f_.add(mean, eps);
  const hlo::Value inv = f_.unary("rsqrt", shifted);
  const hlo::Value inv_b = f_.broadcast_in_dim(inv, x.type.dims, outer_map);
  hlo::Value y = f_.multiply(x, inv_b);
  if (n.inputs.size() > 1) {
    const hlo::Value w = operand(n.inputs[1]);
    const hlo::Value wb = f_.broadcast_in_dim(w, x.type.dims, {r - 1});
    y = f_.multiply(y, wb);
  }
  return y;
}

// Angles as the reference kernel takes them (kernels::RopeAngles: (pos0 + t) · frequency(i), YaRN's
// blend folded in), divided by the freq_factors weight's entry i when the op has one (inputs[1]), cos
// and sin times the one mscale; pairs (2i, 2i+1) or, NeoX-style, (i, i + dims/2); dims past the
// rotated ones pass through.
hlo::Value Lowering::lower_rope(const Node& n) {
  const kernels::RopeParams& p = n.op->attrs.rope;
  const hlo::Value& x_in = value(n.inputs[0]);
  const std::vector<int64_t> orig = x_in.type.dims;
  const int64_t tokens = orig[0], d = orig.back(), heads = x_in.type.numel() / (tokens * d);
  const int64_t dims = p.dims > 0 ? p.dims : d, half = dims / 2;
  const hlo::Value x = f_.reshape(x_in, {tokens, heads, d});

  const kernels::RopeAngles angles(p, dims);
  std::vector<float> inv_freq;
  for (int64_t i = 0; i < half; ++i) inv_freq.push_back(static_cast<float>(angles.frequency(i)));
  const hlo::Value t_iota = f_.iota({{tokens}, hlo::Elem::I32}, 0);
  const hlo::Value p0 = position(n.op->attrs.position);
  const hlo::Value p0b = f_.broadcast_in_dim(p0, {tokens}, {});
  const hlo::Value pos_i = f_.add(t_iota, p0b);
  const hlo::Value pos_f = f_.convert(pos_i, hlo::Elem::F32);
  const hlo::Value freq = f_.constant_floats(inv_freq);
  const hlo::Value pos_b = f_.broadcast_in_dim(pos_f, {tokens, half}, {0});
  const hlo::Value freq_b = f_.broadcast_in_dim(freq, {tokens, half}, {1});
  hlo::Value angle = f_.multiply(pos_b, freq_b);
  if (n.inputs.size() > 1) {
    const hlo::Value factors = operand(n.inputs[1]);
    const hlo::Value factors_b = f_.broadcast_in_dim(factors, {tokens, half}, {1});
    angle = f_.divide(angle, factors_b);
  }
  hlo::Value cos_t = f_.unary("cosine", angle);
  hlo::Value sin_t = f_.unary("sine", angle);
  if (angles.mscale() != 1.0f) {
    const hlo::Value m = f_.constant_f32(angles.mscale(), {tokens, half});
    cos_t = f_.multiply(cos_t, m);
    sin_t = f_.multiply(sin_t, m);
  }
  const hlo::Value c = f_.broadcast_in_dim(cos_t, {tokens, heads, half}, {0, 2});
  const hlo::Value s = f_.broadcast_in_dim(sin_t, {tokens, heads, half}, {0, 2});

  const hlo::Value rot = f_.slice(x, {0, 0, 0}, {tokens, heads, dims});
  hlo::Value x0, x1;
  if (p.neox) {
    x0 = f_.slice(rot, {0, 0, 0}, {tokens, heads, half});
    x1 = f_.slice(rot, {0, 0, half}, {tokens, heads, dims});
  } else {
    const hlo::Value pairs = f_.reshape(rot, {tokens, heads, half, 2});
    const hlo::Value a = f_.slice(pairs, {0, 0, 0, 0}, {tokens, heads, half, 1});
    const hlo::Value b = f_.slice(pairs, {0, 0, 0, 1}, {tokens, heads, half, 2});
    x0 = f_.reshape(a, {tokens, heads, half});
    x1 = f_.reshape(b, {tokens, heads, half});
  }
  const hlo::Value x0c = f_.multiply(x0, c), x1s = f_.multiply(x1, s);
  const hlo::Value x0s = f_.multiply(x0, s), x1c = f_.multiply(x1, c);
  const hlo::Value o0 = f_.subtract(x0c, x1s);
  const hlo::Value o1 = f_.add(x0s, x1c);
  hlo::Value out;
  if (p.neox) {
    out = f_.concatenate({o0, o1}, 2);
  } else {
    const hlo::Value a = f_.reshape(o0, {tokens, heads, half, 1});
    const hlo::Value b = f_.reshape(o1, {tokens, heads, half, 1});
    const hlo::Value joined = f_.concatenate({a, b}, 3);
    out = f_.reshape(joined, {tokens, heads, dims});
  }
  if (dims < d) {
    const hlo::Value pass = f_.slice(x, {0, 0, dims}, {tokens, heads, d});
    out = f_.concatenate({out, pass}, 2);
  }
  return f_.reshape(out, orig);
}

// softmax(q kᵀ · scale) v per head over the cache cells a query may see (cell j for query t when
// j <= pos + t and, with a window, pos + t - j < window), the scores capped first when softcap > 0;
// query head h reads KV head h / (heads / kv_heads). With sinks (gpt-oss, inputs[3]) head h's
// softmax has one more score, sinks[h] (neither scaled nor capped), in its maximum and denominator
// and no column: the probabilities sum to less than 1 (SoftmaxParams::sink).
hlo::Value Lowering::stablehlo_attention(const Node& n) {
  const kernels::AttentionParams& p = n.op->attrs.attention;
  const hlo::Value& q = value(n.inputs[0]);
  const int64_t tokens = q.type.dims[0], H = p.heads, KV = p.kv_heads, hd = p.head_dim, group = H / KV;
  // With a static position only the first pos + n cells can be seen: the rest are not even read.
  const int64_t all_cells = value(n.inputs[1]).type.dims[0];
  const int64_t cells = position_ ? all_cells : n.op->attrs.position + tokens;

  auto heads_of = [&](int input) {
    const hlo::Value& c = value(n.inputs[static_cast<size_t>(input)]);
    const hlo::Value seen = f_.slice(c, {0, 0}, {cells, c.type.dims[1]});
    const hlo::Value f32 = f_.convert(seen, hlo::Elem::F32);
    const hlo::Value kvh = f_.reshape(f32, {cells, KV, hd});
    if (group == 1) return kvh;
    const hlo::Value expanded = f_.broadcast_in_dim(kvh, {cells, KV, group, hd}, {0, 1, 3});
    return f_.reshape(expanded, {cells, H, hd});
  };
  const hlo::Value keys = heads_of(1);
  const hlo::Value values = heads_of(2);
  const hlo::Value q3 = f_.reshape(q, {tokens, H, hd});
  const hlo::Value raw_scores = f_.dot_general(q3, keys, {1}, {1}, {2}, {2}, {{H, tokens, cells}, hlo::Elem::F32});
  const hlo::Value scale = splat(p.scale, raw_scores.type);
  hlo::Value scores = f_.multiply(raw_scores, scale);
  if (p.softcap > 0) scores = softcap(scores, p.softcap);

  const hlo::Value query = f_.iota({{tokens, cells}, hlo::Elem::I32}, 0);
  const hlo::Value cell = f_.iota({{tokens, cells}, hlo::Elem::I32}, 1);
  const hlo::Value first = position(n.op->attrs.position);
  const hlo::Value first_b = f_.broadcast_in_dim(first, {tokens, cells}, {});
  const hlo::Value last_seen = f_.add(query, first_b);
  hlo::Value visible = f_.compare(cell, last_seen, "LE");
  if (p.window > 0) {
    // Every cell is read (no slicing from the window start): with a runtime position the start is
    // not static, and a masked cell costs only its share of the dot products.
    const hlo::Value behind = f_.subtract(last_seen, cell);
    const hlo::Value window = f_.constant_i32(static_cast<int32_t>(std::min<int64_t>(p.window, INT32_MAX)));
    const hlo::Value window_b = f_.broadcast_in_dim(window, {tokens, cells}, {});
    const hlo::Value in_window = f_.compare(behind, window_b, "LT");
    visible = f_.and_(visible, in_window);
  }
  const hlo::Value visible_b = f_.broadcast_in_dim(visible, {H, tokens, cells}, {1, 2});
  const hlo::Value hidden = splat(-std::numeric_limits<float>::infinity(), scores.type);
  const hlo::Value masked = f_.select(visible_b, scores, hidden);

  hlo::Value max = f_.reduce_max(masked, {2});  // [H, tokens]
  std::optional<hlo::Value> sink;
  if (n.inputs.size() > 3) {
    const hlo::Value sinks = operand(n.inputs[3]);
    sink = f_.broadcast_in_dim(sinks, {H, tokens}, {0});
    max = f_.maximum(max, *sink);
  }
  const hlo::Value max_b = f_.broadcast_in_dim(max, {H, tokens, cells}, {0, 1});
  const hlo::Value centered = f_.subtract(masked, max_b);
  const hlo::Value e = f_.unary("exponential", centered);
  hlo::Value sum = f_.reduce_sum(e, {2});
  if (sink) {
    const hlo::Value sink_centered = f_.subtract(*sink, max);
    const hlo::Value sink_e = f_.unary("exponential", sink_centered);
    sum = f_.add(sum, sink_e);
  }
  const hlo::Value sum_b = f_.broadcast_in_dim(sum, {H, tokens, cells}, {0, 1});
  const hlo::Value probs = f_.divide(e, sum_b);

  const hlo::Value out = f_.dot_general(probs, values, {0}, {1}, {2}, {0}, {{H, tokens, hd}, hlo::Elem::F32});
  const hlo::Value by_token = f_.transpose(out, {1, 0, 2});
  return f_.reshape(by_token, {tokens, H * hd});
}

hlo::Value Lowering::lower_gather_rows(const Node& n) {
  const TapeOp& o = *n.op;
  hlo::Value ids;
  int table = n.inputs[0];
  if (o.ids_are_tokens) {
    ids = value(n.inputs[0]);
    table = n.inputs[1];
  } else {
    std::vector<int64_t> v(o.ids.begin(), o.ids.end());
    ids = f_.constant_ints(v, {static_cast<int64_t>(v.size())}, hlo::Elem::I32);
  }
  const Node& tn = g_.nodes[static_cast<size_t>(table)];
  if (tn.kind != NodeKind::Parameter || tn.shape.rank() != 2)
    throw Error(fmt::format("record {}: gather_rows reads a table that is not a weight", tape_.entry.name));
  if (form_ == KernelForm::Engine) return engine_gather(table, ids);
  // Only the gathered rows are dequantized: the table stays packed.
  const hlo::Value raw = raw_weight(table);
  const hlo::Value rows = f_.gather_rows(raw, ids);
  return hlo::dequantize(f_, tn.type, rows);
}

}  // namespace skainet::record::detail

namespace skainet::record::detail {

// Top-k as k rounds of argmax over the logits (the order of the probabilities, without their
// rounding): each round takes the lowest expert among the row's largest logits (the eager tie rule)
// and hides it from the next. k is small (2 to 8), so this beats a sort of every expert.
hlo::Value Lowering::lower_expert_ids(const Node& n) {
  const hlo::Value& logits = value(n.inputs[0]);
  const int64_t rows = logits.type.dims[0], experts = logits.type.dims[1], k = n.shape[1];
  const hlo::TensorType all{{rows, experts}, hlo::Elem::F32};
  const hlo::Value index = f_.iota(all, 1);
  const hlo::Value beyond = splat(static_cast<float>(experts), all);
  const hlo::Value hidden = splat(-std::numeric_limits<float>::infinity(), all);
  hlo::Value rest = logits;
  std::vector<hlo::Value> chosen;
  for (int64_t j = 0; j < k; ++j) {
    const hlo::Value max = f_.reduce_max(rest, {1});
    const hlo::Value max_b = f_.broadcast_in_dim(max, {rows, experts}, {0});
    const hlo::Value is_max = f_.compare(rest, max_b, "EQ");
    // The lowest index among the maxima: -max(-index) over them (reduce has max only; indices are
    // exact in f32).
    const hlo::Value candidates = f_.select(is_max, index, beyond);
    const hlo::Value negated = f_.unary("negate", candidates);
    const hlo::Value lowest_neg = f_.reduce_max(negated, {1});
    const hlo::Value lowest = f_.unary("negate", lowest_neg);
    const hlo::Value lowest_b = f_.broadcast_in_dim(lowest, {rows, experts}, {0});
    const hlo::Value taken = f_.compare(index, lowest_b, "EQ");
    rest = f_.select(taken, hidden, rest);
    const hlo::Value id = f_.convert(lowest, hlo::Elem::I32);
    chosen.push_back(f_.reshape(id, {rows, 1}));
  }
  return k == 1 ? chosen[0] : f_.concatenate(chosen, 1);
}

// The chosen experts' probabilities, divided by their sum clamped below as the eager kernel does.
// A probability is exp(l - max) / sum over the row (f32); the chosen exponentials are picked first
// (a one-hot select over the experts) and divided after: the same operations on the same values as
// dividing the whole row, but not a softmax, which IREE 3.13 (aggressive fusion) puts in one dispatch
// with a biased router's add (gpt-oss) and then cannot compile ("write affecting operations on global
// resources are restricted to workgroup distributed contexts").
hlo::Value Lowering::lower_expert_weights(const Node& n) {
  const hlo::Value& logits = value(n.inputs[0]);
  const hlo::Value& ids = value(n.inputs[1]);
  const int64_t rows = logits.type.dims[0], experts = logits.type.dims[1], k = n.shape[1];
  const hlo::Value max = f_.reduce_max(logits, {1});
  const hlo::Value max_b = f_.broadcast_in_dim(max, logits.type.dims, {0});
  const hlo::Value centered = f_.subtract(logits, max_b);
  const hlo::Value e = f_.unary("exponential", centered);
  const hlo::Value row_sum = f_.reduce_sum(e, {1});
  const hlo::Value e_b = f_.broadcast_in_dim(e, {rows, k, experts}, {0, 2});
  const hlo::Value ids_b = f_.broadcast_in_dim(ids, {rows, k, experts}, {0, 1});
  const hlo::Value index = f_.iota({{rows, k, experts}, hlo::Elem::I32}, 2);
  const hlo::Value is_chosen = f_.compare(index, ids_b, "EQ");
  const hlo::Value zeros = splat(0.0f, e_b.type);
  const hlo::Value picked = f_.select(is_chosen, e_b, zeros);
  const hlo::Value chosen_e = f_.reduce_sum(picked, {2});  // [rows, k]
  const hlo::Value row_sum_b = f_.broadcast_in_dim(row_sum, {rows, k}, {0});
  const hlo::Value chosen = f_.divide(chosen_e, row_sum_b);
  const hlo::Value sum = f_.reduce_sum(chosen, {1});
  const hlo::Value floor = splat(kernels::kMinChosenExpertSum, sum.type);
  const hlo::Value clamped = f_.maximum(sum, floor);
  const hlo::Value clamped_b = f_.broadcast_in_dim(clamped, {rows, k}, {0});
  return f_.divide(chosen, clamped_b);
}

// x [n, in] or [n, k, in] times the experts ids [n, k] chose, from a stack [E, out, in] carried as
// its raw bytes (E * out rows). Both kernel forms lower it to StableHLO (docs/export.md says why).
//  - One row (decode): the k chosen experts' packed rows are gathered from the stack (only their
//    bytes are read), dequantized and contracted with the row, one batched dot_general.
//  - Many rows (prefill): every expert's product over every row from the stack's flat
//    dequantization (as a many-row matmul does), then each (row, choice)'s expert picked by a one-hot
//    select; a prefill chunk chooses most experts anyway, and this keeps the transient one f32
//    stack instead of n * k gathered matrices.
hlo::Value Lowering::lower_matmul_experts(const Node& n) {
  const hlo::Value& x = value(n.inputs[0]);
  const Node& stack = g_.nodes[static_cast<size_t>(n.inputs[1])];
  const hlo::Value& ids = value(n.inputs[2]);
  if (stack.kind != NodeKind::Parameter || stack.shape.rank() != 3)
    throw Error(fmt::format("record {}: matmul_experts reads a stack that is not a 3-D weight", tape_.entry.name));
  if (stack.order != BlockOrder::RowMajor)
    throw Error(
        fmt::format("record {}: expert stack '{}' is held in a kernel-feed block order; the experts' "
                    "products read file order only",
                    tape_.entry.name, stack.name));
  const int64_t rows = n.shape[0], k = n.shape[1], out = n.shape[2], experts = stack.shape[0], in = stack.shape[2];
  const hlo::Value raw = raw_weight(n.inputs[1]);  // [E * out, …]
  std::vector<int64_t> per_expert{experts, out};
  per_expert.insert(per_expert.end(), raw.type.dims.begin() + 1, raw.type.dims.end());
  const hlo::Value by_expert = f_.reshape(raw, per_expert);
  // x as [n, k, in]: every choice of a row reads that row when x is [n, in].
  const hlo::Value xk = x.type.rank() == 3 ? x : f_.broadcast_in_dim(x, {rows, k, in}, {0, 2});
  // gpt-oss: each choice's expert bias row (llama.cpp's add_id), gathered by the same ids.
  const auto biased = [&](const hlo::Value& y) {
    if (n.inputs.size() < 4) return y;
    const hlo::Value rows_of_bias = f_.gather_rows(operand(n.inputs[3]), f_.reshape(ids, {rows * k}));  // [n * k, out]
    return f_.add(y, f_.reshape(rows_of_bias, {rows, k, out}));
  };
  if (rows == 1) {
    const hlo::Value flat_ids = f_.reshape(ids, {k});
    const hlo::Value picked = f_.gather_rows(by_expert, flat_ids);  // [k, out, …]
    std::vector<int64_t> picked_rows{k * out};
    picked_rows.insert(picked_rows.end(), raw.type.dims.begin() + 1, raw.type.dims.end());
    const hlo::Value as_rows = f_.reshape(picked, picked_rows);
    const hlo::Value dense = hlo::dequantize(f_, stack.type, as_rows);  // [k * out, in]
    const hlo::Value w = f_.reshape(dense, {k, out, in});
    const hlo::Value x2 = f_.reshape(xk, {k, in});
    const hlo::Value y = f_.dot_general(w, x2, {0}, {0}, {2}, {1}, {{k, out}, hlo::Elem::F32});
    return biased(f_.reshape(y, {1, k, out}));
  }
  const hlo::Value dense = hlo::dequantize(f_, stack.type, raw);  // [E * out, in]
  const hlo::Value all = f_.dot_general(xk, dense, {}, {}, {2}, {1}, {{rows, k, experts * out}, hlo::Elem::F32});
  const hlo::Value by_e = f_.reshape(all, {rows, k, experts, out});
  const hlo::Value ids_b = f_.broadcast_in_dim(ids, {rows, k, experts, out}, {0, 1});
  const hlo::Value index = f_.iota({{rows, k, experts, out}, hlo::Elem::I32}, 2);
  const hlo::Value is_chosen = f_.compare(index, ids_b, "EQ");
  const hlo::Value zeros = splat(0.0f, by_e.type);
  const hlo::Value picked = f_.select(is_chosen, by_e, zeros);
  return biased(f_.reduce_sum(picked, {2}));
}

}  // namespace skainet::record::detail
