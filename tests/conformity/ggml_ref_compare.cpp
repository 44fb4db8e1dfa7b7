// One-off comparison with ggml's own C reference quantizers (not built by CMake: it needs ggml's
// sources, which we do not ship). docs/formats.md has the commands and the numbers it printed.
// Compares quantize_row_*_ref / dequantize_row_* with ours on 2M values (scales 1e-4..1e2,
// outliers, grid values with ties, zero super-blocks) and prints how many blocks/floats differ.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
#include <cmath>
#include "skainet/compute/kernels.hpp"
extern "C" {
#define D(t)                                                 \
  void quantize_row_##t##_ref(const float*, void*, int64_t); \
  void dequantize_row_##t(const void*, float*, int64_t);
D(q4_0)
D(q4_1) D(q5_0) D(q5_1) D(q8_0) D(q2_K) D(q3_K) D(q4_K) D(q5_K) D(q6_K)
    // IQ4_NL / IQ4_XS as llama-quantize writes them (quantize_iq4_*, no importance matrix).
    size_t quantize_iq4_nl(const float*, void*, int64_t, int64_t, const float*);
size_t quantize_iq4_xs(const float*, void*, int64_t, int64_t, const float*);
void dequantize_row_iq4_nl(const void*, float*, int64_t);
void dequantize_row_iq4_xs(const void*, float*, int64_t);
void ggml_abort(const char*, int, const char*, ...) { abort(); }
size_t ggml_row_size(int, int64_t) { abort(); }
const char* ggml_type_name(int) { return "?"; }
size_t ggml_type_size(int) { abort(); }
}
using namespace skainet;
static void quantize_row_iq4_nl(const float* x, void* y, int64_t k) { quantize_iq4_nl(x, y, 1, k, nullptr); }
static void quantize_row_iq4_xs(const float* x, void* y, int64_t k) { quantize_iq4_xs(x, y, 1, k, nullptr); }
struct F {
  const char* name;
  GgmlType t;
  void (*q)(const float*, void*, int64_t);
  void (*dq)(const void*, float*, int64_t);
};
int main() {
  const int64_t rows = 2048, cols = 1024, n = rows * cols;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> x(n);
  for (int64_t r = 0; r < rows; ++r) {
    float scale = std::pow(10.0f, u(rng) * 6 - 4);  // 1e-4 .. 1e2
    for (int64_t c = 0; c < cols; ++c) {
      float v = nd(rng) * scale;
      if (u(rng) < 1.0f / 64) v *= 10;
      if (r % 7 == 3) v = std::round(v / scale * 2) * 0.5f;  // grid values, ties
      if (r % 11 == 5 && c < 256) v = 0;
      x[r * cols + c] = v;
    }
  }
  F fs[] = {{"Q4_0", GgmlType::Q4_0, quantize_row_q4_0_ref, dequantize_row_q4_0},
            {"Q4_1", GgmlType::Q4_1, quantize_row_q4_1_ref, dequantize_row_q4_1},
            {"Q5_0", GgmlType::Q5_0, quantize_row_q5_0_ref, dequantize_row_q5_0},
            {"Q5_1", GgmlType::Q5_1, quantize_row_q5_1_ref, dequantize_row_q5_1},
            {"Q8_0", GgmlType::Q8_0, quantize_row_q8_0_ref, dequantize_row_q8_0},
            {"Q4_K", GgmlType::Q4_K, quantize_row_q4_K_ref, dequantize_row_q4_K},
            {"Q5_K", GgmlType::Q5_K, quantize_row_q5_K_ref, dequantize_row_q5_K},
            {"Q6_K", GgmlType::Q6_K, quantize_row_q6_K_ref, dequantize_row_q6_K},
            {"Q2_K", GgmlType::Q2_K, quantize_row_q2_K_ref, dequantize_row_q2_K},
            {"Q3_K", GgmlType::Q3_K, quantize_row_q3_K_ref, dequantize_row_q3_K},
            {"IQ4_NL", GgmlType::IQ4_NL, quantize_row_iq4_nl, dequantize_row_iq4_nl},
            {"IQ4_XS", GgmlType::IQ4_XS, quantize_row_iq4_xs, dequantize_row_iq4_xs}};
  for (auto& f : fs) {
    const auto& tt = type_traits(f.t);
    size_t bytes = row_bytes(f.t, n);
    std::vector<unsigned char> a(bytes), b(bytes);
    for (int64_t r = 0; r < rows; ++r) {
      f.q(x.data() + r * cols, a.data() + r * bytes / rows, cols);
      kernels::ref::quantize_row(f.t, x.data() + r * cols, b.data() + r * bytes / rows, cols);
    }
    int64_t nb = n / tt.block_elements, diff = 0;
    for (int64_t i = 0; i < nb; ++i)
      diff += memcmp(a.data() + i * tt.block_bytes, b.data() + i * tt.block_bytes, tt.block_bytes) != 0;
    std::vector<float> ya(n), yb(n);
    f.dq(a.data(), ya.data(), n);
    kernels::ref::dequantize_row(f.t, a.data(), yb.data(), n);
    int64_t ddiff = 0;
    for (int64_t i = 0; i < n; ++i) ddiff += memcmp(&ya[i], &yb[i], 4) != 0;
    printf("%s: quantize %lld/%lld blocks differ; dequantize %lld/%lld floats differ\n", f.name, (long long)diff,
           (long long)nb, (long long)ddiff, (long long)n);
  }
}
