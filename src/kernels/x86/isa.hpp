// The contract between the x86 dispatch (x86/level.cpp and x86/dispatch.cpp, compiled for the
// baseline CPU) and the per-ISA translation units (matmul_avx2.cpp, matmul_avx512.cpp, matmul_amx.cpp,
// compiled with -mavx2 / -mavx512* / -mamx-*): each level's kernels as one row per weight type, plus
// the entries that do not depend on the weight's format.
// Private to src/kernels.
//
// The ISA units see raw pointers only, never a Tensor: an inline function of a shared header that
// a -mavx512f unit emits out of line may be the copy the linker keeps for every caller, and would
// then run AVX-512 code on a CPU without it. So the functions here have internal linkage (anonymous
// namespace), the rest is plain data, and the ISA units include only this, <immintrin.h>, C headers,
// <utility>'s index sequences (types only) and the type ids of skainet/format.hpp (an enum; they call none of its
// functions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "skainet/core/format.hpp"

// The ISA units' tile loops must be fully unrolled for the accumulators to live in registers (GCC
// keeps an array of vectors in memory otherwise).
#define SKAINET_UNROLL _Pragma("GCC unroll 16")
// A loop whose unrolled steps would hoist their loads and spill the accumulators.
#define SKAINET_NO_UNROLL _Pragma("GCC unroll 1")

namespace skainet::kernels::x86 {

// The 8-bit activation a weight format is dotted against, once per matmul call:
//   Q8x32:  blocks of 32, float d per block, x ~ d * q, plus ds = d * sum(q) per block (the offset
//           and min terms of Q4_0/Q4_1/Q5_0/Q5_1 reduce to it) and the integer -sum(q) per block (the
//           interleaved kernels start each block's integer sum at the offset term: -8 or -128 times it);
//   Q8x256: blocks of 256, float d per block, plus the sum of each 16 quants (the K formats' mins),
//           also as a float d * sum (ds16; the prefill tiles' min terms are float dot products with it).
// q = round_even(x * 127 / amax) over the block, so |q| <= 127 and d = amax / 127.
//   Bf16Pairs: for the AMX level's BF16 tiles over dense weights, at least 16 x rows and k a multiple
//           of 32 (bf16_pairs_bytes below): the x rows themselves as F32 first (what the one-row and
//           leftover kernels read), then x split as x = hi + lo with hi, lo BF16 (|x - hi - lo| <=
//           2^-18 |x|), laid out as the B tiles of a tile product.
enum class Act : uint8_t { None, Q8x32, Q8x256, Bf16Pairs };

// One prepared row: qs[k] int8 | d[k / block] float | sums (float ds[k/32] or int16 bsums[k/16]) |
// (Q8x32) int32 -sum(q)[k/32] or (Q8x256) float ds16[k/16], each part 64-byte aligned relative to
// the row start.
struct ActLayout {
  int64_t d_off = 0;
  int64_t s_off = 0;
  int64_t n_off = 0;
  int64_t ds16_off = 0;
  int64_t row_bytes = 0;
};

namespace {

constexpr int64_t align64(int64_t n) noexcept { return (n + 63) & ~int64_t{63}; }

constexpr ActLayout act_layout(Act a, int64_t k) noexcept {
  ActLayout l;
  if (a == Act::None) return l;
  if (a == Act::Bf16Pairs) {
    l.row_bytes = align64(4 * k);  // the F32 rows; the tiles follow all of them (bf16_pairs_bytes)
    return l;
  }
  l.d_off = align64(k);
  if (a == Act::Q8x32) {
    l.s_off = l.d_off + align64(k / 32 * 4);
    l.n_off = l.s_off + align64(k / 32 * 4);
    l.row_bytes = l.n_off + align64(k / 32 * 4);
  } else {
    l.s_off = l.d_off + align64(k / 256 * 4);
    l.ds16_off = l.s_off + align64(k / 16 * 2);
    l.row_bytes = l.ds16_off + align64(k / 16 * 4);
  }
  return l;
}

// Act::Bf16Pairs for n x rows: n F32 rows of act_layout's row_bytes, then for each whole 16 rows t
// and each 32 elements s (t-major) a hi and a lo B tile of 1 KiB: tile row p holds elements 2p and
// 2p + 1 of each of the 16 rows, as BF16 pairs (the VNNI order of AMX's BF16 dot product).
constexpr int64_t kBf16PairTile = 1024;
constexpr int64_t bf16_pairs_tiles_off(int64_t n, int64_t k) noexcept { return n * align64(4 * k); }
constexpr int64_t bf16_pairs_bytes(int64_t n, int64_t k) noexcept {
  return bf16_pairs_tiles_off(n, k) + n / 16 * (k / 32) * 2 * kBf16PairTile;
}

}  // namespace

// out[r * out_row + o * out_col] = dot(weight row o, x row r) for o < rows, r < n. Weight rows are
// w + o * w_stride; x rows are x + r * x_stride: F32 values (dense weights) or prepared Act rows.
// All pointers may be unaligned; strides are in bytes. A weight in BlockOrder::Interleaved16 is
// entered at a group's first row or in the row-major tail, with w_stride the bytes of one row.
struct Gemv {
  const std::byte* w = nullptr;
  int64_t w_stride = 0;
  int64_t rows = 0;
  int64_t k = 0;
  const std::byte* x = nullptr;
  int64_t x_stride = 0;
  int64_t n = 0;
  std::byte* out = nullptr;
  int64_t out_row = 0;
  int64_t out_col = 0;
};

// The same products for weight rows [from, from + count) only.
inline Gemv weight_rows(const Gemv& g, int64_t from, int64_t count) noexcept {
  Gemv part = g;
  part.w += from * g.w_stride;
  part.rows = count;
  part.out += from * g.out_col;
  return part;
}

using GemvFn = void (*)(const Gemv&) noexcept;

// A dense weight whose output dimension is the contiguous one (a transposed view, e.g. attention's
// Vᵀ over the V cache): out[r * out_row + o] = sum_c x[r][c] * w[c * w_stride + o] for o < cols,
// r < n, c < k. Weight element size from the format; out floats contiguous within a row.
struct GemmT {
  const std::byte* w = nullptr;
  int64_t w_stride = 0;  // bytes from one c to the next
  int64_t cols = 0;
  int64_t k = 0;
  const std::byte* x = nullptr;  // F32 rows
  int64_t x_stride = 0;
  int64_t n = 0;
  std::byte* out = nullptr;
  int64_t out_row = 0;
};

using GemmTFn = void (*)(const GemmT&) noexcept;

// One query's attention for `heads` adjacent query heads that share one KV head (ops::attention's
// decode), in two kernels: attend_keys writes scores[h * scores_stride + j] = q_h · k_j for the visible
// cells j in [begin, end); the dispatch runs softmax_row over them in place (scale, softcap, the head's
// sink; 0 for the other j < cells); attend_values writes out_h = sum_j scores[h][j] v_j. q and out:
// `heads` rows of head_dim floats, one after the other; cell j's key and value start at k + j * k_stride
// and v + j * v_stride.
struct Attend {
  const float* q = nullptr;
  const std::byte* k = nullptr;  // the KV head's part of the first cell
  const std::byte* v = nullptr;
  int64_t k_stride = 0, v_stride = 0;  // bytes from a cell to the next
  int64_t begin = 0, end = 0, cells = 0;
  int64_t heads = 0, head_dim = 0;
  float* scores = nullptr;
  int64_t scores_stride = 0;  // floats
  float* out = nullptr;
  float scale = 1.0f, softcap = 0.0f;
};

using AttendFn = void (*)(const Attend&) noexcept;

// The head sizes an AttendFn takes: whole vectors of 8, up to its stack buffers' width.
inline constexpr int64_t kAttendMaxHeadDim = 256;
namespace {
constexpr bool attend_takes(int64_t head_dim) noexcept {
  return head_dim > 0 && head_dim % 8 == 0 && head_dim <= kAttendMaxHeadDim;
}
}  // namespace

// One weight type's kernels at one level: its row, designated-initialized in the ISA unit. dispatch
// (x86/level.cpp) indexes the rows by type once; a type without a row, or a null kernel in it, goes
// to the reference kernels.
struct FormatKernels {
  GgmlType type = GgmlType::F32;
  Act act = Act::None;    // what gemv and feed read: prepared x rows, or (None) x as F32
  GemvFn gemv = nullptr;  // BlockOrder::RowMajor weights
  GemvFn feed = nullptr;  // BlockOrder::Interleaved16 weights (feed_tiles.hpp), same act
  // Whether the placement should repack for `feed` (kernels::feeds): false where the level's file-order
  // kernels are the faster ones; `feed` still reads a weight repacked elsewhere (an exported module's).
  bool feed_offered = true;
  GemmTFn transposed = nullptr;  // dense: the weight viewed transposed (output dimension contiguous)
  // One query over a KV cache of this type (attend.hpp): the scores from keys, and the probabilities
  // (the scores after the softmax) times values.
  AttendFn attend_keys = nullptr;
  AttendFn attend_values = nullptr;
  // Dense: against x Act::Bf16Pairs (x row r of n written by IsaKernels::split_bf16_pairs).
  GemvFn tiles = nullptr;
};

struct IsaKernels {
  const char* name;
  // x: k floats (k a multiple of the block); dst: act_layout(..., k).row_bytes bytes, 64-byte aligned.
  void (*quantize_q8x32)(const float* x, int64_t k, std::byte* dst) noexcept;
  void (*quantize_q8x256)(const float* x, int64_t k, std::byte* dst) noexcept;
  const FormatKernels* formats;  // format_count rows, one per type the level accelerates
  int64_t format_count;
  // out[j] = softmax(score(x))[j] over j in [begin, end), 0 for the other j < n, score(v) = scale * v
  // capped to softcap * tanh(score / softcap) when softcap > 0; a finite sink joins the max and the
  // sum (SoftmaxParams::sink); contiguous rows, out may be x.
  void (*softmax_row)(const float* x, float* out, int64_t begin, int64_t end, int64_t n, float scale, float softcap,
                      float sink) noexcept;
  // Writes x row r of n into `prepared` (bf16_pairs_bytes(n, k)) for the rows' `tiles` kernels; null
  // where the level has none.
  void (*split_bf16_pairs)(const float* x, int64_t k, int64_t r, int64_t n, std::byte* prepared) noexcept;
  // Contiguous rows of n elements (rows.hpp); out may be an input.
  void (*swiglu_row)(const float* gate, const float* up, float* out, int64_t n) noexcept;
  void (*rms_norm_row)(const float* x, const float* w, float eps, float* out, int64_t n) noexcept;  // w may be null
  void (*f32_to_f16_row)(const float* x, uint16_t* out, int64_t n) noexcept;
};

// Rows a level lays over another's (the AMX units over AVX-512's): a kernel named here replaces the
// one the base row has, the base keeps the rest.
struct OverlayKernels {
  const FormatKernels* formats;
  int64_t format_count;
  void (*split_bf16_pairs)(const float* x, int64_t k, int64_t r, int64_t n, std::byte* prepared) noexcept;
};

namespace {

// The row of `type` in a level's rows (a row of nulls where it has none): what the AMX units hand
// the AVX-512 kernels that cover what their tiles leave. A scan of a few rows, once per call.
inline FormatKernels row_of(const IsaKernels& k, GgmlType type) noexcept {
  for (int64_t i = 0; i < k.format_count; ++i)
    if (k.formats[i].type == type) return k.formats[i];
  return FormatKernels{.type = type};
}

// fn.template operator()<R>(r) for r = 0, R, 2R, ... while R rows are left, then once with the
// leftover count (1 .. R - 1) as its tile height: the loop of the register tiles whose height is a
// template argument (the short-k and GemmT products of both vector units).
template <int R, class F>
void in_row_tiles(int64_t n, const F& fn) noexcept {
  int64_t r = 0;
  for (; r + R <= n; r += R) fn.template operator()<R>(r);
  const int64_t left = n - r;
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((left == I + 1 ? fn.template operator()<I + 1>(r) : void()), ...);
  }
  (std::make_integer_sequence<int, R - 1>{});
}

}  // namespace

// Defined in the ISA units (data, not code: safe to name from the baseline unit).
extern const IsaKernels kAvx2Kernels;
extern const IsaKernels kAvx512Kernels;
// The AMX level is AVX-512's with these laid over it: the AMX-INT8 tiles (matmul_amx.cpp), and the
// AMX-BF16 ones (matmul_amx_bf16.cpp) where the CPU has AMX-BF16.
extern const OverlayKernels kAmxInt8Kernels;
extern const OverlayKernels kAmxBf16Kernels;

}  // namespace skainet::kernels::x86
