// skainet::ops — eager ops. Each checks its inputs where they enter (liveness, types, shapes),
// draws its output from the context's active scope and has the context's kernel write straight into
// it. Inputs may be any strided view at any offset.
//
//   memory::ExecutionContext ctx(2);
//   Tensor h = ops::rms_norm(ctx, x, attn_norm, 1e-5f);           // x [n, d]
//   Tensor q = ops::rope(ctx, ops::matmul(ctx, h, wq).reshape(Shape{n, heads, hd}), pos, {10000.0f});
//   Tensor p = ops::softmax(ctx, scores, {.scale = 0.125f, .causal = true, .offset = pos});
//   x = ops::add(ctx, x, ops::matmul(ctx, attn, wo));
//
// Weights follow ggml: a weight of GGUF shape {k, out} is the view [out, k] (see tensor.hpp), and
// matmul(x [.., n, k], w [out, k]) = x · wᵀ → [.., n, out].
#pragma once

#include <cstdint>
#include <span>

#include "skainet/compute/memory.hpp"

namespace skainet::ops {

using kernels::AttentionParams;
using kernels::RopeParams;
using kernels::SoftmaxParams;
using memory::ExecutionContext;

// The op list, one row per op declared below: X(Enumerator, name, min_inputs, max_inputs). It
// generates OpKind, the names, the arity a recording checks (opset.hpp), and the StableHLO
// lowering's dispatch (one `Lowering::lower_<name>` per row, record/lowering.hpp). The attributes a
// row reads are named in OpAttributes. Inputs are tensors; an optional one (rms_norm's weight,
// rope's frequency factors) widens the range.
#define SKAINET_OPS(X)                   \
  X(Matmul, matmul, 2, 2)                \
  X(Add, add, 2, 2)                      \
  X(Mul, mul, 2, 2)                      \
  X(Scale, scale, 1, 1)                  \
  X(Silu, silu, 1, 1)                    \
  X(Swiglu, swiglu, 2, 2)                \
  X(Geglu, geglu, 2, 2)                  \
  X(SwigluOai, swiglu_oai, 2, 2)         \
  X(Softcap, softcap, 1, 1)              \
  X(RmsNorm, rms_norm, 1, 2)             \
  X(Rope, rope, 1, 2)                    \
  X(Softmax, softmax, 1, 1)              \
  X(Attention, attention, 3, 4)          \
  X(GatherRows, gather_rows, 1, 1)       \
  X(Copy, copy, 1, 1)                    \
  X(WriteRows, write_rows, 1, 1)         \
  X(ExpertIds, expert_ids, 1, 1)         \
  X(ExpertWeights, expert_weights, 2, 2) \
  X(MatmulExperts, matmul_experts, 3, 4)

// What a recorded call of an op carries beside its tensors (opset.hpp's OpCall): one field per
// meaning, set only by the ops that name it (the rest keep their defaults).
struct OpAttributes {
  float eps = 0;    // rms_norm
  float scale = 1;  // scale: the multiplier
  float cap = 0;    // softcap: cap * tanh(x / cap)
  // rope's first position, attention's offset, write_rows' first row: always a position of the
  // forward pass, so a recorder may make it the runtime position argument.
  int64_t position = 0;
  kernels::RopeParams rope{};
  kernels::SoftmaxParams softmax{};
  kernels::AttentionParams attention{};
};

// x F32 [.., n, k]; w [out, k] in F32/F16/BF16 or a packed type with reference kernels (innermost dim
// of x contiguous then), or w [B, out, k] with x [B, n, k]. Threaded over output columns.
Tensor matmul(ExecutionContext& ctx, const Tensor& x, const Tensor& w);
void matmul_into(ExecutionContext& ctx, const Tensor& x, const Tensor& w, const Tensor& out);

// F32; b broadcasts to a's shape (right-aligned, dims of 1 repeat).
Tensor add(ExecutionContext& ctx, const Tensor& a, const Tensor& b);
Tensor mul(ExecutionContext& ctx, const Tensor& a, const Tensor& b);
Tensor scale(ExecutionContext& ctx, const Tensor& x, float s);
Tensor silu(ExecutionContext& ctx, const Tensor& x);
Tensor swiglu(ExecutionContext& ctx, const Tensor& gate, const Tensor& up);  // silu(gate) * up
// gelu(gate) * up, GELU's tanh approximation as ggml_gelu_f32 writes it (Gemma's feed-forward).
Tensor geglu(ExecutionContext& ctx, const Tensor& gate, const Tensor& up);
// gpt-oss's clamped SwiGLU, as ggml_swiglu_oai computes it (op_constants.hpp: alpha, limit).
Tensor swiglu_oai(ExecutionContext& ctx, const Tensor& gate, const Tensor& up);
// cap * tanh(x / cap) (computed as llama.cpp does, x * (1 / cap)); cap finite and > 0 (Gemma 2's
// final logits).
Tensor softcap(ExecutionContext& ctx, const Tensor& x, float cap);

// y = x / sqrt(mean(x²) + eps) * weight over the innermost dim; weight F32 [d] or undefined.
Tensor rms_norm(ExecutionContext& ctx, const Tensor& x, const Tensor& weight, float eps);
// x F32 [n, d] or [n, heads, d]: token t (index in dim 0) at position pos0 + t. freq_factors, when
// defined, is F32 [dims / 2]: pair i's angle is divided by freq_factors[i] (ggml_rope_ext's freq
// factors: Llama 3.1's rope_freqs.weight, Phi-3's rope factors).
Tensor rope(ExecutionContext& ctx, const Tensor& x, int64_t pos0, const RopeParams& params,
            const Tensor& freq_factors = Tensor());
// window >= 0 and softcap finite and >= 0 (0: none), see SoftmaxParams.
Tensor softmax(ExecutionContext& ctx, const Tensor& x, const SoftmaxParams& params = {});

// softmax(q kᵀ · scale) v per head, causal (query t sees cells up to offset + t; with a window only the
// last `window` of them), the scores capped first when softcap > 0, grouped-query: query head h reads
// KV head h / (heads / kv_heads). q F32 [n, heads * head_dim]; keys and values dense
// [cells, kv_heads * head_dim] (e.g. F16 cache rows; the whole cache may be passed: only cells from
// the first query's window start to offset + n - 1 are read). Draws scores [heads, n, seen cells]
// (turned into probabilities in place) and the output [n, heads * head_dim]; heads run in parallel.
// sinks, when defined, is F32 [heads]: head h's softmax has one more score, sinks[h], that takes no
// value (gpt-oss's attention sinks; SoftmaxParams::sink).
Tensor attention(ExecutionContext& ctx, const Tensor& q, const Tensor& keys, const Tensor& values,
                 const AttentionParams& params, const Tensor& sinks = Tensor());

// Embedding lookup: table [vocab, d] (any format with reference kernels) → F32 [ids.size(), d].
Tensor gather_rows(ExecutionContext& ctx, const Tensor& table, std::span<const int32_t> ids);

// dst = src (same shape): dense float ↔ dense float, packed → F32, F32 → packed, same type → same.
void copy(ExecutionContext& ctx, const Tensor& src, const Tensor& dst);
// dst[row, row + n) = src [n, …] (converted as copy does): a KV cache write. `row` is a position of the
// forward pass, which a recording makes the runtime position argument.
void write_rows(ExecutionContext& ctx, const Tensor& src, const Tensor& dst, int64_t row);
Tensor convert(ExecutionContext& ctx, const Tensor& src, GgmlType to);

// A mixture of experts' routing, as llama.cpp's softmax gating: p = softmax(router logits) over every
// expert (in double from the row's maximum), the k most probable experts chosen (most probable first;
// of equal probabilities the lower expert first), their p renormalized to sum 1 (the sum clamped
// below at the smallest normal F16). Split in two ops, ids then weights, so each has one output.
// logits F32 [n, experts] → I32 [n, k].
Tensor expert_ids(ExecutionContext& ctx, const Tensor& logits, int64_t k);
// logits F32 [n, experts], ids I32 [n, k] (expert_ids') → F32 [n, k]: the chosen experts' weights.
Tensor expert_weights(ExecutionContext& ctx, const Tensor& logits, const Tensor& ids);
// One row's routing, the kernels of the two ops above (1 <= ids.size() <= logits.size()). Allocate nothing.
void choose_experts(std::span<const float> logits, std::span<int32_t> ids);
void weigh_experts(std::span<const float> logits, std::span<const int32_t> ids, std::span<float> weights);
// Each row times the experts it chose: x F32 [n, in] (every choice of row t reads x[t]) or [n, k, in]
// (choice j reads x[t, j]), stack [experts, out, in] (a 3-D expert stack, any matmul weight type),
// ids I32 [n, k] → F32 [n, k, out], [t, j] = x[t(, j)] · stack[ids[t, j]]ᵀ. Grouped by expert: each
// expert some row chose is multiplied once over all its rows; one no row chose is never read.
// bias F32 [experts, out] (gpt-oss; llama.cpp's add_id), when defined, adds the chosen expert's row.
Tensor matmul_experts(ExecutionContext& ctx, const Tensor& x, const Tensor& stack, const Tensor& ids,
                      const Tensor& bias = {});

}  // namespace skainet::ops
