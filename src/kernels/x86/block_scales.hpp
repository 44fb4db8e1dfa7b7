// Block fields the x86 kernels read in scalar code before the vector work: an F16 scale (or MXFP4's
// E8M0 one), and the
// packed sub-block scales of Q3_K and IQ4_XS, centred (6-bit value - 32). Shared by the ISA units
// (simd_int8.hpp and what follows it) and the AMX tiles (matmul_amx.cpp); internal linkage like
// isa.hpp's helpers.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "skainet/core/blocks.hpp"

namespace skainet::kernels::x86 {
namespace {

inline float half_at(const std::byte* p) noexcept {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// MXFP4's E8M0 exponent byte at p as the float scale of its doubled levels (blocks.hpp).
inline float e8m0_half_at(const std::byte* p) noexcept {
  float f;
  const uint32_t bits = mxfp4_scale_bits(static_cast<uint8_t>(*p));
  std::memcpy(&f, &bits, 4);
  return f;
}

// The float scale of a 32-element block whose decoder D (simd_int8.hpp) reads it: D::scale where the
// format names one (MXFP4's exponent), else the F16 at the block's start (Q8_0, Q4_1, IQ4_NL, ...).
template <class D>
inline float block_scale(const std::byte* p) noexcept {
  if constexpr (requires { D::scale(p); })
    return D::scale(p);
  else
    return half_at(p);
}

// Q3_K's 16 sub-block scales, unpacked from their 12 bytes (4 low bits, then 2 high bits).
inline void q3_k_scales(const std::byte* p, int (&sc)[16]) noexcept {
  const auto* packed = reinterpret_cast<const uint8_t*>(p + offsetof(BlockQ3_K, scales));
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? packed[j] & 0xf : packed[j - 8] >> 4;
    sc[j] = (low | (((packed[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
  }
}

// IQ4_XS's 8 sub-block scales (a nibble of scales_l and two bits of scales_h each).
inline void iq4_xs_scales(const std::byte* p, int32_t (&scale)[8]) noexcept {
  uint16_t scales_h;
  std::memcpy(&scales_h, p + offsetof(BlockIQ4_XS, scales_h), 2);
  const auto* scales_l = reinterpret_cast<const uint8_t*>(p + offsetof(BlockIQ4_XS, scales_l));
  for (int j = 0; j < 8; ++j)
    scale[j] = (((scales_l[j / 2] >> (4 * (j % 2))) & 0xf) | (((scales_h >> (2 * j)) & 3) << 4)) - 32;
}

}  // namespace
}  // namespace skainet::kernels::x86
