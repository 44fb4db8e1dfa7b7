// The contract between the x86 dispatch (x86/dispatch.cpp, compiled for the baseline CPU) and the
// per-ISA translation units (matmul_avx2.cpp, matmul_avx512.cpp, matmul_amx.cpp, compiled with
// -mavx2 / -mavx512* / -mamx-*).
// Private to src/kernels.
//
// The ISA units see raw pointers only, never a Tensor: an inline function of a shared header that
// a -mavx512f unit emits out of line may be the copy the linker keeps for every caller, and would
// then run AVX-512 code on a CPU without it. So the functions here have internal linkage (anonymous
// namespace), the rest is plain data, and the ISA units include only this, <immintrin.h> and C headers.
#pragma once

#include <cstddef>
#include <cstdint>

// The ISA units' tile loops must be fully unrolled for the accumulators to live in registers (GCC
// keeps an array of vectors in memory otherwise).
#define SKAINET_UNROLL _Pragma("GCC unroll 16")

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

struct IsaKernels {
  const char* name;
  // x: k floats (k a multiple of the block); dst: act_layout(..., k).row_bytes bytes, 64-byte aligned.
  void (*quantize_q8x32)(const float* x, int64_t k, std::byte* dst) noexcept;
  void (*quantize_q8x256)(const float* x, int64_t k, std::byte* dst) noexcept;
  GemvFn f32, f16, bf16;                       // dense: x F32, any k
  GemvFn q4_0, q4_1, q5_0, q5_1, q8_0;         // x Q8x32
  GemvFn q4_k, q5_k, q6_k;                     // x Q8x256
  GemmTFn f32_t, f16_t;                        // dense, output dimension contiguous
  GemvFn q4_0_feed, q8_0_feed;                 // BlockOrder::Interleaved16, x Q8x32 (feed_tiles.hpp)
  GemvFn q4_k_feed, q6_k_feed;                 // BlockOrder::Interleaved16, x Q8x256
  // out[j] = softmax(score(x))[j] over j in [begin, end), 0 for the other j < n, score(v) = scale * v
  // capped to softcap * tanh(score / softcap) when softcap > 0; contiguous rows, out may be x.
  void (*softmax_row)(const float* x, float* out, int64_t begin, int64_t end, int64_t n, float scale,
                      float softcap) noexcept;
  GemvFn iq4_nl, iq4_xs;                       // x Q8x32 (prefill: the legacy tiles) / Q8x256 (one-row dots only)
  GemvFn q2_k, q3_k;                           // x Q8x256 (one-row dots simd_q23_k.hpp, tiles k_tiles.hpp)
  // Dense weights against x Bf16Pairs (null where the level has no such tiles); x row r of n written
  // into `prepared` (bf16_pairs_bytes(n, k)) by split_bf16_pairs.
  GemvFn f16_tiles, bf16_tiles;
  void (*split_bf16_pairs)(const float* x, int64_t k, int64_t r, int64_t n, std::byte* prepared) noexcept;
  // Contiguous rows of n elements (rows.hpp); out may be an input.
  void (*swiglu_row)(const float* gate, const float* up, float* out, int64_t n) noexcept;
  void (*rms_norm_row)(const float* x, const float* w, float eps, float* out, int64_t n) noexcept;  // w may be null
  void (*f32_to_f16_row)(const float* x, uint16_t* out, int64_t n) noexcept;
};

// The AMX level's own entries (matmul_amx.cpp); dispatch.cpp puts them into a copy of the AVX-512
// table, which the AMX kernels also call for what their tiles do not cover.
struct AmxInt8Kernels {
  GemvFn q4_0_feed, q8_0_feed;  // BlockOrder::Interleaved16, x Q8x32
  GemvFn q4_k_feed, q6_k_feed;  // BlockOrder::Interleaved16, x Q8x256
  GemvFn iq4_xs, q2_k, q3_k;    // file order, x Q8x256
};

// The AMX-BF16 entries (matmul_amx_bf16.cpp), put into the AMX table where the CPU has AMX-BF16.
struct AmxBf16Kernels {
  GemvFn f16_tiles, bf16_tiles;
  void (*split_bf16_pairs)(const float* x, int64_t k, int64_t r, int64_t n, std::byte* prepared) noexcept;
};

// Defined in the ISA units (data, not code: safe to name from the baseline unit).
extern const IsaKernels kAvx2Kernels;
extern const IsaKernels kAvx512Kernels;
extern const AmxInt8Kernels kAmxInt8Kernels;
extern const AmxBf16Kernels kAmxBf16Kernels;

// The AMX level's table (kAvx512Kernels with kAmxInt8Kernels), or null when this CPU or the OS
// does not let this process use AMX tiles. Defined in dispatch.cpp (baseline code).
const IsaKernels* amx_kernels() noexcept;

}  // namespace skainet::kernels::x86
