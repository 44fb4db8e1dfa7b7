// Private to src/kernels/ref: the rows of per-format kernels that dispatch.cpp looks types up in, and
// the small helpers they share. Rows may start at any byte address, so blocks travel through memcpy.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "kernels/feed_layout.hpp"
#include "skainet/core/blocks.hpp"
#include "skainet/compute/kernels.hpp"

// The reference quantizers must round exactly like ggml's plain C; a fused multiply-add would
// change the last bit of intermediate values and, through them, chosen quants (measured: 0.1-3% of
// K blocks). Compilers contract a*b+c by default when the target has FMA (-march=native), even
// across statements in GCC's case, so every file including this header turns it off.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace skainet::kernels::ref::detail {

inline constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS: a group this small is all zero

// Round to nearest, ties to even, by adding 1.5 * 2^23 and reading the mantissa (ggml's
// nearest_int). Valid for |v| < 2^22; outside that (or for NaN) it yields some int, never UB.
inline int nearest_int(float v) noexcept {
  const float t = v + 12582912.0f;
  const uint32_t bits = std::bit_cast<uint32_t>(t);
  return static_cast<int>(bits & 0x007fffffu) - 0x00400000;
}

inline int clamp(int v, int lo, int hi) noexcept { return v < lo ? lo : v > hi ? hi : v; }

// The value of x[0, n) with the largest magnitude, sign kept (the first one on ties): where ggml's
// symmetric quantizers start their scale.
inline float signed_absmax(const float* x, int n) noexcept {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  return max;
}

// Fits x ~ scale * L + min (min <= 0) with L in [0, nmax] (n <= 32), minimizing the weighted squared
// (or, use_mad, absolute) error over a grid of candidate scales; returns scale, stores -min in *neg_min
// (ggml's make_qkx2_quants; quant_k.cpp). Q4_K/Q5_K fit 32 with squares, Q2_K 16 with absolutes.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min, float rmin,
                    float rdelta, int nstep, bool use_mad) noexcept;

template <class B>
inline B load_block(const void* src, int64_t i) noexcept {
  B b;
  std::memcpy(&b, static_cast<const std::byte*>(src) + i * static_cast<int64_t>(sizeof(B)), sizeof(B));
  return b;
}

template <class B>
inline void store_block(void* dst, int64_t i, const B& b) noexcept {
  std::memcpy(static_cast<std::byte*>(dst) + i * static_cast<int64_t>(sizeof(B)), &b, sizeof(B));
}

// One format's reference kernels: its row. x: n floats, n a multiple of the block; dst/src:
// row_bytes(type, n) bytes. A type without a row has no reference kernels (has_reference is false).
struct RefFormat {
  GgmlType type;
  void (*quantize)(const float* x, void* dst, int64_t n) noexcept;
  void (*dequantize)(const void* src, float* y, int64_t n) noexcept;
  const FeedLayout* feed = nullptr;  // its BlockOrder::Interleaved16 layout; null: no kernel-feed order
};

// Each quant file's rows (defined beside the kernels they name); dispatch.cpp indexes them by type.
std::span<const RefFormat> legacy_formats() noexcept;  // quant_legacy.cpp
std::span<const RefFormat> k_formats() noexcept;       // quant_k.cpp
std::span<const RefFormat> k_low_formats() noexcept;   // quant_k_low.cpp
std::span<const RefFormat> iq4_formats() noexcept;     // quant_iq4.cpp
std::span<const RefFormat> mxfp4_formats() noexcept;   // quant_mxfp4.cpp

// The row of `type`, or null when it has no reference kernels.
const RefFormat* find_format(GgmlType type) noexcept;

}  // namespace skainet::kernels::ref::detail
