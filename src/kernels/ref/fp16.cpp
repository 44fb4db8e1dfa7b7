// IEEE binary16 and bfloat16 conversions in plain integer arithmetic, so that results do not depend
// on F16C being present (or on how a compiler lowers _Float16).
#include <bit>
#include <cstdint>

#include "kernels/ref/ref_internal.hpp"

namespace skainet::kernels::ref {
namespace {

// Shifts `m` right by `shift` bits, rounding to nearest, ties to even.
constexpr uint32_t shift_round_even(uint32_t m, uint32_t shift) noexcept {
  if (shift == 0) return m;
  if (shift > 31) return 0;
  const uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  return (rem > half || (rem == half && (q & 1u))) ? q + 1 : q;
}

}  // namespace

uint16_t fp32_to_fp16(float f) noexcept {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u)  // NaN: keep the top payload bits and make it quiet, as F16C does
    return static_cast<uint16_t>(sign | 0x7e00u | ((a & 0x7fffffu) >> 13));
  const uint32_t exp = a >> 23;
  const uint32_t mant = (a & 0x7fffffu) | (exp ? 0x800000u : 0u);
  if (exp >= 113) {
    // Normal in binary16 (unless it rounds past 65504): rebias 127 -> 15 and drop 13 bits. A carry
    // out of the mantissa correctly bumps the exponent, up to infinity (0x7c00).
    const uint32_t r = shift_round_even(a - (112u << 23), 13);
    return static_cast<uint16_t>(sign | (r >= 0x7c00u ? 0x7c00u : r));
  }
  // Subnormal in binary16: units of 2^-24. Value = mant * 2^(exp - 150), so shift by 126 - exp
  // (float subnormals have exp 0 but scale like exp 1).
  const uint32_t shift = 126u - (exp ? exp : 1u);
  return static_cast<uint16_t>(sign | shift_round_even(mant, shift));
}

float fp16_to_fp32(uint16_t h) noexcept {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Subnormal or zero: exactly mant * 2^-24, which float represents.
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return std::bit_cast<float>(std::bit_cast<uint32_t>(v) | sign);
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t fp32_to_bf16(float f) noexcept {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)  // NaN: truncating could make it an infinity; force quiet
    return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((static_cast<uint64_t>(u) + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float bf16_to_fp32(uint16_t h) noexcept { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

}  // namespace skainet::kernels::ref
