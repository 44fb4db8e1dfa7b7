// Shared helpers of the reference-kernel tests: seeded data and the list of formats we serve.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include "skainet/core/format.hpp"
#include "skainet/compute/kernels.hpp"
#include "skainet/core/tensor.hpp"

namespace skainet::test {

inline constexpr std::array kRefTypes = {
    GgmlType::F32,  GgmlType::F16,    GgmlType::BF16,   GgmlType::Q8_0,  GgmlType::Q4_0, GgmlType::Q4_1,
    GgmlType::Q5_0, GgmlType::Q5_1,   GgmlType::Q2_K,   GgmlType::Q3_K,  GgmlType::Q4_K, GgmlType::Q5_K,
    GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4,
};

inline constexpr std::array kQuantTypes = {
    GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,   GgmlType::Q5_1,   GgmlType::Q2_K,  GgmlType::Q3_K,
    GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4,
};

// Gaussian data with an occasional outlier, the shape of real weights.
inline std::vector<float> weights_like(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::uniform_int_distribution<int> pick(0, 63);
  std::vector<float> x(n);
  for (auto& v : x) v = pick(rng) == 0 ? normal(rng) * 8.0f : normal(rng);
  return x;
}

inline size_t encoded_bytes(GgmlType t, size_t n) { return static_cast<size_t>(row_bytes(t, n)); }

// A [rows, n] F32 tensor over weights_like data times `spread`, at a 4-byte offset (not vector
// aligned): the row kernels' tests.
struct F32Rows {
  std::vector<float> v;
  Tensor t;
};
inline F32Rows f32_rows(int64_t rows, int64_t n, uint32_t seed, float spread) {
  F32Rows r;
  r.v = weights_like(static_cast<size_t>(rows * n + 1), seed);
  for (float& f : r.v) f *= spread;
  r.t = Tensor(Storage::borrow(r.v.data(), r.v.size() * 4, true, "x"), Shape{rows, n}, GgmlType::F32, 4);
  return r;
}

}  // namespace skainet::test
