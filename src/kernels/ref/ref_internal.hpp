// Private to src/kernels/ref: the per-format row kernels that dispatch.cpp routes to, and the small
// helpers they share. Rows may start at any byte address, so blocks travel through memcpy.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "skainet/blocks.hpp"
#include "skainet/kernels.hpp"

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

void quantize_q4_0(const float* x, void* dst, int64_t n) noexcept;
void quantize_q4_1(const float* x, void* dst, int64_t n) noexcept;
void quantize_q5_0(const float* x, void* dst, int64_t n) noexcept;
void quantize_q5_1(const float* x, void* dst, int64_t n) noexcept;
void quantize_q8_0(const float* x, void* dst, int64_t n) noexcept;
void quantize_q4_k(const float* x, void* dst, int64_t n) noexcept;
void quantize_q5_k(const float* x, void* dst, int64_t n) noexcept;
void quantize_q6_k(const float* x, void* dst, int64_t n) noexcept;

void dequantize_q4_0(const void* src, float* y, int64_t n) noexcept;
void dequantize_q4_1(const void* src, float* y, int64_t n) noexcept;
void dequantize_q5_0(const void* src, float* y, int64_t n) noexcept;
void dequantize_q5_1(const void* src, float* y, int64_t n) noexcept;
void dequantize_q8_0(const void* src, float* y, int64_t n) noexcept;
void dequantize_q4_k(const void* src, float* y, int64_t n) noexcept;
void dequantize_q5_k(const void* src, float* y, int64_t n) noexcept;
void dequantize_q6_k(const void* src, float* y, int64_t n) noexcept;

}  // namespace skainet::kernels::ref::detail
