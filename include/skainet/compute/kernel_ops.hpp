// skainet::kernels — the plain scalar reference kernels of the ops, and the table the
// ExecutionContext calls them through (the SIMD tables replace the slots they accelerate).
//
//   const kernels::KernelTable& k = kernels::reference_table();
//   k.add(a, b, out);                          // views already checked by the op; out preallocated
//   k.matmul(x, w, out, 0, w.dim(-2));         // weight rows [0, out) of every x row
//   const kernels::KernelTable& fast = kernels::best_table();   // AVX2 / AVX-512 where the CPU has them
//
// Kernels are noexcept and never allocate. They receive views that the op has validated (types,
// shapes, liveness, writability) and write straight into the output view. They read through byte
// strides, so any view (narrowed, transposed, at any offset) works; where a packed row or a dot
// product needs contiguous floats the op checks that the innermost dimension is contiguous.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "skainet/core/tensor.hpp"

namespace skainet::kernels {

// ggml_rope_ext's parameters. With ext_factor 0 the angle of pair i is pos * freq_scale *
// base^(-2i/dims); YaRN (ext_factor > 0) blends, pair by pair, that interpolated angle with the
// unscaled one by a ramp between the correction dims of beta_fast and beta_slow rotations over
// orig_ctx positions, and raises the magnitude by 1 + 0.1 ln(1 / freq_scale). Every cos and sin is
// multiplied by attn_factor (llama.cpp's yarn_attn_factor, 1 without scaling).
struct RopeParams {
  float base = 10000.0f;
  int64_t dims = 0;         // rotated leading dims of each head (0: the whole innermost dim); even
  bool neox = false;        // rotate pairs (i, i + dims/2) (GPT-NeoX, Qwen2) instead of (2i, 2i+1)
  float freq_scale = 1.0f;  // linear RoPE scaling: the angle uses pos * freq_scale
  float ext_factor = 0.0f;  // YaRN's extrapolation mix (1 for YaRN files, 0: none)
  float attn_factor = 1.0f;
  int64_t orig_ctx = 0;  // YaRN's original training context
  float beta_fast = 32.0f, beta_slow = 1.0f;
};

// The per-pair frequencies and the one magnitude of a RoPE, ggml's rope_yarn folded into them: the
// reference kernel and the StableHLO lowering both take their angles from here. Pair i of a token at
// position p turns by p * frequency(i) (divided by freq_factors[i] when the op has them, as ggml
// divides the unscaled angle; YaRN's blend is linear in it, so the division commutes), and its cos
// and sin are multiplied by mscale().
class RopeAngles {
 public:
  // dims: the rotated dims (RopeParams::dims resolved against the head size).
  RopeAngles(const RopeParams& p, int64_t dims) noexcept;
  double frequency(int64_t pair) const noexcept;
  float mscale() const noexcept { return mscale_; }

 private:
  RopeParams p_;
  int64_t dims_;
  float corr_low_ = 0.0f, corr_high_ = 0.0f;  // ggml_rope_yarn_corr_dims
  float mscale_ = 1.0f;
};

// Row i (second-innermost index) is the query at position p = i + offset. The scores are s = x * scale,
// capped to softcap * tanh(s / softcap) when softcap > 0 (Gemma 2's attn_logit_softcapping), and the
// softmax runs over the columns the query sees: with `causal` those j <= p, with a `window` > 0 those
// p - j < window (llama.cpp's LLAMA_SWA_TYPE_STANDARD); the others come out 0. A finite `sink` is one
// more score in the softmax's maximum and denominator that takes no column (gpt-oss's attention
// sinks, ggml_soft_max_add_sinks): the probabilities then sum to less than 1.
struct SoftmaxParams {
  float scale = 1.0f;
  bool causal = false;
  int64_t offset = 0;
  int64_t window = 0;                                    // 0: no sliding window
  float softcap = 0;                                     // 0: no capping
  float sink = -std::numeric_limits<float>::infinity();  // -inf: none
};

// Attention over a KV cache (ops::attention): query head h reads KV head h / (heads / kv_heads); query
// t (of n) is at position offset + t and sees the cells its SoftmaxParams would (causal; within
// `window` when that is > 0), with the scores capped when softcap > 0.
struct AttentionParams {
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 1.0f;
  int64_t offset = 0;
  int64_t window = 0;  // 0: no sliding window
  float softcap = 0;   // 0: no capping
};

// The part of ops::attention one task runs: query heads [h0, h1), which all read KV head h0 / group,
// over keys and values [cells, kv_heads * head_dim] that hold only the visible cells (the op narrows
// them; `softmax.offset` counts positions from their first cell). q [n, heads * head_dim] F32.
// sinks, when not null, holds one sink score per query head (indexed by h), each head's softmax.sink.
struct AttentionHeads {
  int64_t head_dim = 0, group = 1, h0 = 0, h1 = 0;
  SoftmaxParams softmax;
  const float* sinks = nullptr;
};

// The reference kernels (src/kernels/ref/): each KernelTable slot's default, so the reference table
// is KernelTable{} and a SIMD table fills only the slots it accelerates.
namespace ref {
void matmul(const Tensor& x, const Tensor& w, const Tensor& out, int64_t begin, int64_t end) noexcept;
void add(const Tensor& a, const Tensor& b, const Tensor& out) noexcept;
void mul(const Tensor& a, const Tensor& b, const Tensor& out) noexcept;
void scale(const Tensor& x, float s, const Tensor& out) noexcept;
void silu(const Tensor& x, const Tensor& out) noexcept;
void swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) noexcept;
void geglu(const Tensor& gate, const Tensor& up, const Tensor& out) noexcept;
void swiglu_oai(const Tensor& gate, const Tensor& up, const Tensor& out) noexcept;
void softcap(const Tensor& x, float cap, const Tensor& out) noexcept;
void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) noexcept;
void rope(const Tensor& x, int64_t pos0, const RopeParams& p, const Tensor& freq_factors, const Tensor& out) noexcept;
void softmax(const Tensor& x, const SoftmaxParams& p, const Tensor& out) noexcept;
void gather_rows(const Tensor& table, const int32_t* ids, int64_t n, const Tensor& out) noexcept;
void copy(const Tensor& src, const Tensor& dst) noexcept;
void attention_heads(const Tensor& q, const Tensor& keys, const Tensor& values, const AttentionHeads& a,
                     const Tensor& scores, const Tensor& out) noexcept;
}  // namespace ref

struct KernelTable {
  // out[..., r, o] = sum_k x[..., r, k] * w[(b,) o, k] for weight rows o in [begin, end) (batch-major
  // when w is 3-D: item = b * out + o). x F32; w F32/F16/BF16 or any packed type with reference kernels.
  void (*matmul)(const Tensor& x, const Tensor& w, const Tensor& out, int64_t begin,
                 int64_t end) noexcept = &ref::matmul;
  // Elementwise F32, b broadcast to a's shape (right-aligned; dims of 1 repeat).
  void (*add)(const Tensor& a, const Tensor& b, const Tensor& out) noexcept = &ref::add;
  void (*mul)(const Tensor& a, const Tensor& b, const Tensor& out) noexcept = &ref::mul;
  void (*scale)(const Tensor& x, float s, const Tensor& out) noexcept = &ref::scale;
  void (*silu)(const Tensor& x, const Tensor& out) noexcept = &ref::silu;
  void (*swiglu)(const Tensor& gate, const Tensor& up, const Tensor& out) noexcept = &ref::swiglu;
  // gelu(gate) * up, GELU the tanh approximation (ggml_gelu_f32, computed in F32: see the reference).
  void (*geglu)(const Tensor& gate, const Tensor& up, const Tensor& out) noexcept = &ref::geglu;
  // gpt-oss's clamped SwiGLU (ggml_swiglu_oai; op_constants.hpp). Reference only: one expert FFN's
  // activation, next to whose matmuls it costs nothing.
  void (*swiglu_oai)(const Tensor& gate, const Tensor& up, const Tensor& out) noexcept = &ref::swiglu_oai;
  // cap * tanh(x * (1 / cap)) elementwise (Gemma 2's final logit soft-capping); cap > 0.
  void (*softcap)(const Tensor& x, float cap, const Tensor& out) noexcept = &ref::softcap;
  // Over the innermost dim. weight may be undefined (no scaling).
  void (*rms_norm)(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) noexcept = &ref::rms_norm;
  // Adjacent pairs (2i, 2i+1) (NeoX: (i, i + dims/2)) rotated by pos * freq_scale * base^(-2i/dims),
  // divided by freq_factors[i] when freq_factors (F32 [dims/2]) is defined (ggml_rope_ext's freq
  // factors: Llama 3.1's rope_freqs, Phi-3's rope factors); the token of a row is its index in dim 0
  // (rank >= 2) plus pos0.
  void (*rope)(const Tensor& x, int64_t pos0, const RopeParams& p, const Tensor& freq_factors,
               const Tensor& out) noexcept = &ref::rope;
  void (*softmax)(const Tensor& x, const SoftmaxParams& p, const Tensor& out) noexcept = &ref::softmax;
  // out[i, :] = table[ids[i], :] as F32 (packed rows dequantized). out inner dim contiguous.
  void (*gather_rows)(const Tensor& table, const int32_t* ids, int64_t n,
                      const Tensor& out) noexcept = &ref::gather_rows;
  // Same shape; dense<->dense any float type, packed->F32, F32->packed, packed->same packed.
  void (*copy)(const Tensor& src, const Tensor& dst) noexcept = &ref::copy;
  // Attention of the heads `a` names: out[t, h * head_dim + d] for t < n, h in [h0, h1), the softmax
  // of q_h keys_gᵀ (SoftmaxParams' scores and visible columns) times values_g. scores: F32 scratch
  // [h1 - h0, n, cells] with contiguous rows. keys and values dense with contiguous rows.
  void (*attention_heads)(const Tensor& q, const Tensor& keys, const Tensor& values, const AttentionHeads& a,
                          const Tensor& scores, const Tensor& out) noexcept = &ref::attention_heads;

  // Optional two-phase matmul (null in the reference table): when matmul_scratch(x, w) = n > 0, the op
  // hands over n bytes of 64-byte aligned scratch, runs matmul_prepare over x's rows once per call (the
  // activation converted once, e.g. quantized to 8 bits; rows split across threads), then
  // matmul_prepared over chunks of weight rows reading it. Same contract as `matmul` otherwise.
  size_t (*matmul_scratch)(const Tensor& x, const Tensor& w) noexcept = nullptr;
  // The same from shapes alone, for the plan: the scratch of `rows` contiguous x rows of `k` against
  // a rank-2 weight of `type` held in `order` (null in the reference table: none).
  size_t (*matmul_scratch_for)(GgmlType type, BlockOrder order, int64_t rows, int64_t k) noexcept = nullptr;
  void (*matmul_prepare)(const Tensor& x, const Tensor& w, std::byte* scratch, int64_t row_begin,
                         int64_t row_end) noexcept = nullptr;
  void (*matmul_prepared)(const Tensor& x, const Tensor& w, const Tensor& out, int64_t begin, int64_t end,
                          const std::byte* scratch) noexcept = nullptr;
  // Whether this table reads weights of `type` in the kernel-feed `order` faster than in file order
  // (null: never). Every table reads such weights (the reference does, block by block); the platform
  // offers the load-time repack only where this says it pays.
  bool (*feeds)(GgmlType type, BlockOrder order) noexcept = nullptr;
  const char* name = "reference";
};

const KernelTable& reference_table() noexcept;

// SIMD levels with tables of their own (src/kernels/x86/). Entries a level does not accelerate are
// the reference ones.
// Amx is Avx512's table with AMX-INT8 tiles for prefill on kernel-feed weights.
enum class IsaLevel : uint8_t { Reference, Avx2, Avx512, Amx };
inline constexpr IsaLevel kIsaLevels[] = {IsaLevel::Reference, IsaLevel::Avx2, IsaLevel::Avx512, IsaLevel::Amx};
const char* isa_level_name(IsaLevel level) noexcept;
// The table of `level`, or null when this build or this CPU lacks it (Reference always exists).
const KernelTable* table_for(IsaLevel level) noexcept;
// The fastest table this CPU runs (base::CpuFeatures::detected()); the ExecutionContext default.
// The environment variable SKAINET_ISA=reference|avx2|avx512|amx picks a lower level (read once).
const KernelTable& best_table() noexcept;
IsaLevel best_level() noexcept;  // the level of best_table()

// ---- The matrix peak: what the multiply units of a level can do, for reports ---------------------
// Which multiply a weight's products use: quantized weights are int8 dot products (activations
// quantized to 8 bits), F16/BF16 can use 16-bit tiles, F32 (and anything else) f32 multiply-adds.
enum class Arithmetic : uint8_t { Int8, Half, F32 };
Arithmetic arithmetic_of(GgmlType weights) noexcept;

// The nominal issue rate of the unit a level's matmuls use: multiply instructions per cycle times
// multiply-adds per instruction, a multiply-add counted as 2 operations (matrix_peak.cpp says where
// each number comes from). A bound no kernel reaches; reports give the fraction of it.
struct MatrixUnit {
  const char* name = "";     // "avx2 int8 (vpmaddubsw)"
  double ops_per_cycle = 0;  // per core
};
MatrixUnit matrix_unit(IsaLevel level, Arithmetic arithmetic, const base::CpuFeatures& cpu) noexcept;

// The peak of `threads` threads, one per physical core at most, at the nominal clock: ops_per_second
// is 0 when the clock cannot be read (base::nominal_clock_hz).
struct MatrixPeak {
  MatrixUnit unit;
  unsigned cores = 0;
  double clock_hz = 0;
  double ops_per_second() const noexcept { return unit.ops_per_cycle * cores * clock_hz; }
};
MatrixPeak matrix_peak(IsaLevel level, Arithmetic arithmetic, unsigned threads) noexcept;

}  // namespace skainet::kernels
