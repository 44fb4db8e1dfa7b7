// A 16 x 16 transposition of 4-byte elements in AVX-512 registers, for the units built with AVX-512F:
// the AMX unit turns 16 weight rows' 64 bytes into a B tile with it, the AVX-512 unit 16 dense weight
// rows into the columns its short-k products broadcast against. Internal linkage, like the other
// headers the ISA units include.
#pragma once

#include <immintrin.h>

namespace skainet::kernels::x86 {
namespace {

// r[j] (16 dwords each) -> r[t] = dword t of every r[j]: unpacks within the 128-bit lanes, then
// shuffles of whole lanes (64 shuffles for 256 elements).
inline void transpose_dwords(__m512i (&r)[16]) noexcept {
  __m512i a[16], b[16];
  for (int k = 0; k < 8; ++k) {
    a[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
    a[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
  }
  // b[4k + c], 128-bit lane L: dword 4L + c of rows 4k .. 4k + 3.
  for (int k = 0; k < 4; ++k) {
    b[4 * k] = _mm512_unpacklo_epi64(a[4 * k], a[4 * k + 2]);
    b[4 * k + 1] = _mm512_unpackhi_epi64(a[4 * k], a[4 * k + 2]);
    b[4 * k + 2] = _mm512_unpacklo_epi64(a[4 * k + 1], a[4 * k + 3]);
    b[4 * k + 3] = _mm512_unpackhi_epi64(a[4 * k + 1], a[4 * k + 3]);
  }
  // Dword 4L + c of all rows: lane L of b[c], b[4 + c], b[8 + c], b[12 + c].
  for (int c = 0; c < 4; ++c) {
    const __m512i e0 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0x44), e1 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0xee);
    const __m512i e2 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0x44),
                  e3 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0xee);
    r[c] = _mm512_shuffle_i32x4(e0, e2, 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(e0, e2, 0xdd);
    r[8 + c] = _mm512_shuffle_i32x4(e1, e3, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(e1, e3, 0xdd);
  }
}

// The same for floats.
inline void transpose_floats(__m512 (&r)[16]) noexcept {
  __m512i d[16];
  for (int j = 0; j < 16; ++j) d[j] = _mm512_castps_si512(r[j]);
  transpose_dwords(d);
  for (int j = 0; j < 16; ++j) r[j] = _mm512_castsi512_ps(d[j]);
}

}  // namespace
}  // namespace skainet::kernels::x86
