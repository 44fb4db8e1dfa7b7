// Every SIMD matmul table this CPU runs, checked against the scalar reference (ref::matmul, which
// uses dot_row) at odd sizes, odd offsets, row views and split ranges, through both the plain entry
// and the two-phase (prepare once, then chunks) entry, with 1 and 2 threads.
//
// Tolerances (docs/kernels.md):
//  * dense weights (F32/F16/BF16): same products, float sums in another order: 1e-5 * sum|x*w|.
//  * packed weights: the kernel quantizes x to 8 bits per block (x^ = d*q, d = amax/127, F16 for 32-blocks), then sums
//    exactly in integers per block. Two checks: (1) against the double dot of the dequantized weight
//    with x^ (the same math, only float rounding differs): 1e-4 * sum|w*x^|; (2) against the float
//    reference with x itself: |x - x^| <= d/2 per element, so the bound is sum |w_i| * d_i / 2
//    (plus the slack of (1)).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/ref/ops_common.hpp"
#include "kernels/x86/level.hpp"
#include "quant_test_util.hpp"
#include "skainet/compute/kernel_ops.hpp"
#include "skainet/core/thread_pool.hpp"

namespace skainet::kernels {
namespace {

using x86::Act;

// The IsaKernels behind a table level, or null when this build or CPU lacks it.
const x86::IsaKernels* isa_kernels(IsaLevel level) {
  if (!table_for(level)) return nullptr;
  const x86::Level* l = x86::level(level);
  return l ? l->isa : nullptr;
}

std::vector<IsaLevel> simd_levels() {
  std::vector<IsaLevel> out;
  for (IsaLevel l : kIsaLevels)
    if (l != IsaLevel::Reference && isa_kernels(l)) out.push_back(l);
  return out;
}

Act act_for(GgmlType t) {
  if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) return Act::None;
  return type_traits(t).block_elements == 256 ? Act::Q8x256 : Act::Q8x32;
}

// Owned bytes viewed as a tensor at a byte offset (not 32-byte aligned on purpose).
struct Owned {
  std::vector<std::byte> bytes;
  Tensor t;
};

Owned make_weight(GgmlType type, int64_t rows, int64_t k, uint32_t seed) {
  const int64_t rb = row_bytes(type, k);
  Owned o;
  o.bytes.resize(static_cast<size_t>(rows * rb + 8));
  const std::vector<float> w = test::weights_like(static_cast<size_t>(rows * k), seed, 0.05f);
  for (int64_t r = 0; r < rows; ++r) ref::quantize_row(type, w.data() + r * k, o.bytes.data() + 4 + r * rb, k);
  o.t = Tensor(Storage::borrow(o.bytes.data(), o.bytes.size(), false, "w"), Shape{rows, k}, type, 4);
  return o;
}

// x [n, k] inside a wider [n, k + 3] buffer at a 4-byte offset: rows neither aligned nor packed.
Owned make_x(int64_t n, int64_t k, uint32_t seed) {
  Owned o;
  const int64_t wide = k + 3;
  o.bytes.resize(static_cast<size_t>(n * wide * 4 + 4));
  const std::vector<float> v = test::weights_like(static_cast<size_t>(n * wide), seed);
  std::memcpy(o.bytes.data() + 4, v.data(), v.size() * 4);
  o.t = Tensor(Storage::borrow(o.bytes.data(), o.bytes.size(), false, "x"), Shape{n, wide}, GgmlType::F32, 4)
            .narrow(1, 0, k);
  return o;
}

Owned make_out(int64_t n, int64_t out) {
  Owned o;
  o.bytes.resize(static_cast<size_t>(n * out * 4), std::byte{0xee});
  o.t = Tensor(Storage::borrow(o.bytes.data(), o.bytes.size(), true, "out"), Shape{n, out}, GgmlType::F32);
  return o;
}

float at(const Tensor& t, int64_t r, int64_t c) {
  float v;
  std::memcpy(&v, t.raw() + r * t.stride(0) + c * t.stride(1), 4);
  return v;
}

std::vector<float> x_row(const Tensor& x, int64_t r) {
  std::vector<float> v(static_cast<size_t>(x.dim(1)));
  for (int64_t i = 0; i < x.dim(1); ++i) v[static_cast<size_t>(i)] = at(x, r, i);
  return v;
}

// x^ and the per-element scale d of the kernel's 8-bit activation for one row.
void activation(const x86::IsaKernels& K, Act a, const std::vector<float>& x, std::vector<float>& xq,
                std::vector<float>& d) {
  const int64_t k = static_cast<int64_t>(x.size());
  const x86::ActLayout L = x86::act_layout(a, k);
  std::vector<std::byte> buf(static_cast<size_t>(L.row_bytes) + 64);
  std::byte* p = buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64;
  if (a == Act::Q8x32)
    K.quantize_q8x32(x.data(), k, p);
  else
    K.quantize_q8x256(x.data(), k, p);
  const int block = a == Act::Q8x32 ? 32 : 256;
  xq.resize(x.size());
  d.resize(x.size());
  for (int64_t i = 0; i < k; ++i) {
    float db;
    std::memcpy(&db, p + L.d_off + 4 * (i / block), 4);
    d[static_cast<size_t>(i)] = db;
    xq[static_cast<size_t>(i)] = db * static_cast<float>(static_cast<int8_t>(p[i]));
  }
}

enum class Path { Plain, Prepared };

// Runs `table` over weight rows [0, out) split into chunks on `threads` threads.
void run(const KernelTable& table, Path path, const Tensor& x, const Tensor& w, const Tensor& out, int threads) {
  base::ThreadPool pool(threads);
  const int64_t items = w.dim(0);
  const int64_t grain = std::max<int64_t>(items / (threads * 2), 1);
  if (table.matmul_scratch) {  // the plan prices the scratch from shapes alone: the same number
    EXPECT_EQ(table.matmul_scratch_for(w.type(), w.block_order(), x.dim(0), x.dim(1)), table.matmul_scratch(x, w));
  }
  if (path == Path::Plain || !table.matmul_scratch || table.matmul_scratch(x, w) == 0) {
    pool.parallel_for(items, grain, [&](int64_t b, int64_t e) noexcept { table.matmul(x, w, out, b, e); });
    return;
  }
  const size_t need = table.matmul_scratch(x, w);
  std::vector<std::byte> scratch(need + 64);
  std::byte* s = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  pool.parallel_for(x.dim(0), 1, [&](int64_t b, int64_t e) noexcept { table.matmul_prepare(x, w, s, b, e); });
  pool.parallel_for(items, grain, [&](int64_t b, int64_t e) noexcept { table.matmul_prepared(x, w, out, b, e, s); });
}

void check(IsaLevel level, GgmlType type, int64_t k, int64_t out_rows, int64_t n, Path path, int threads,
           uint32_t seed) {
  const KernelTable& table = *table_for(level);
  const x86::IsaKernels& K = *isa_kernels(level);
  const Owned wo = make_weight(type, out_rows + 3, k, seed);
  const Tensor w = wo.t.rows(2, out_rows);  // a view starting at row 2
  const Owned xo = make_x(n, k, seed + 1);
  const Owned got = make_out(n, out_rows), want = make_out(n, out_rows);
  ref::matmul(xo.t, w, want.t, 0, out_rows);
  run(table, path, xo.t, w, got.t, threads);
  const Act a = act_for(type);
  const std::string where = std::string(isa_level_name(level)) + " " + std::string(type_name(type)) +
                            " k=" + std::to_string(k) + " out=" + std::to_string(out_rows) + " n=" + std::to_string(n) +
                            (path == Path::Plain ? " plain" : " prepared") + " threads=" + std::to_string(threads);
  std::vector<float> wrow(static_cast<size_t>(k)), xq, d;
  for (int64_t r = 0; r < n; ++r) {
    const std::vector<float> x = x_row(xo.t, r);
    if (a != Act::None) activation(K, a, x, xq, d);
    for (int64_t o = 0; o < out_rows; ++o) {
      ref::dequantize_row(type, w.raw() + o * w.stride(0), wrow.data(), k);
      const double g = at(got.t, r, o), ref_v = at(want.t, r, o);
      double mag = 0, same = 0, mag_q = 0, quant_bound = 0;
      for (int64_t i = 0; i < k; ++i) {
        const auto u = static_cast<size_t>(i);
        mag += std::fabs(static_cast<double>(wrow[u]) * x[u]);
        if (a == Act::None) continue;
        same += static_cast<double>(wrow[u]) * xq[u];
        mag_q += std::fabs(static_cast<double>(wrow[u]) * xq[u]);
        // Rounding x to d*q, plus (32-element blocks) the F16 rounding of d itself: at most 2^-11 of d*q.
        quant_bound += std::fabs(static_cast<double>(wrow[u])) * d[u] * 0.5;
        if (a == Act::Q8x32) quant_bound += std::fabs(static_cast<double>(wrow[u]) * xq[u]) * 0x1p-10;
      }
      if (a == Act::None) {
        ASSERT_NEAR(g, ref_v, 1e-5 * mag + 1e-30) << where << " r=" << r << " o=" << o;
      } else {
        ASSERT_NEAR(g, same, 1e-4 * mag_q + 1e-30) << where << " r=" << r << " o=" << o << " (same math)";
        ASSERT_NEAR(g, ref_v, quant_bound + 1e-4 * mag + 1e-30) << where << " r=" << r << " o=" << o;
      }
    }
  }
}

class SimdMatmul : public ::testing::TestWithParam<GgmlType> {};

TEST_P(SimdMatmul, MatchesReferenceOnEveryLevel) {
  const GgmlType type = GetParam();
  const std::vector<IsaLevel> levels = simd_levels();
  if (levels.empty()) GTEST_SKIP() << "no SIMD level on this CPU/build";
  const int64_t block = type_traits(type).block_elements;
  std::vector<int64_t> ks;
  if (block == 1)
    ks = {1, 7, 32, 37, 96, 256, 4096 + 256 + 5};
  else if (block == 32)
    ks = {32, 64, 96, 256, 512, 4096 + 256};
  else
    ks = {256, 512, 4096 + 256, 8192 + 256};  // the last: more blocks than a K tile's mins chunk (32)
  uint32_t seed = 100;
  for (IsaLevel level : levels)
    for (int64_t k : ks)
      for (int64_t out_rows : {1, 3, 17})
        for (Path path : {Path::Plain, Path::Prepared})
          for (int threads : {1, 2}) {
            // One row (decode), a few, and enough for full register tiles plus leftovers (prefill).
            const int64_t n = (out_rows == 1 ? 1 : out_rows == 3 ? 3 : 9) + (threads == 2 ? 1 : 0);
            check(level, type, k, out_rows, n, path, threads, seed++);
            if (HasFatalFailure()) return;
          }
}

// One weight shape of a many-rows test: k, weight rows, x rows.
struct Size {
  int64_t k, out_rows, n;
};

// check() over every level, type, size, path and thread count (1, 2), seeds counted up from `seed`;
// stops at the first fatal failure.
void check_many_rows(std::initializer_list<GgmlType> types, std::initializer_list<Size> sizes,
                     std::initializer_list<Path> paths, uint32_t seed) {
  for (IsaLevel level : simd_levels())
    for (GgmlType type : types)
      for (const Size& z : sizes)
        for (Path path : paths)
          for (int threads : {1, 2}) {
            check(level, type, z.k, z.out_rows, z.n, path, threads, seed++);
            if (::testing::Test::HasFatalFailure()) return;
          }
}

// Dense F32/F16/BF16 weights against 16 and more x rows: on the AMX level the BF16 tiles (whole 16s of
// weight and x rows, k in steps of 32 converted 512 at a time, accumulators spilled every 256 x
// rows) and what they leave to AVX-512 (x rows past the last 16, weight rows past the last 16, k not
// a multiple of 32); the other levels' prefill tiles at these sizes too, the short-k transposed
// products among them (k <= 256: blocks of 32 weight rows where k <= 128, else of 16, and leftovers;
// x rows in 8s, 6s and 4s and leftovers; k not a multiple of 8).
TEST(SimdMatmulDense, ManyRowsMatchReferenceOnEveryLevel) {
  // The runner splits the weight rows in 2 chunks a thread: at least 64 rows give each a whole 16.
  check_many_rows({GgmlType::F32, GgmlType::F16, GgmlType::BF16},
                  {{32, 64, 16},
                   {96, 53, 37},
                   {608, 70, 70},
                   {1056, 64, 17},
                   {100, 17, 20},
                   {64, 67, 275},
                   {8, 37, 11},
                   {13, 33, 5},
                   {200, 45, 19},
                   {256, 16, 9},
                   {128, 16, 2}},
                  {Path::Plain, Path::Prepared}, 900);
}

// IQ4_XS, Q2_K and Q3_K in file order against 16 and more x rows: on the AMX level their split tiles
// (each 16 weight rows' blocks decoded, scaled and transposed into B tiles per call, whole 16s of x
// rows) and the AVX-512 kernels for the rest (weight rows past the last 16, x rows past the last
// 16); the other levels' prefill paths at these sizes too.
TEST(SimdMatmulSplitTiles, ManyRowsMatchReferenceOnEveryLevel) {
  check_many_rows({GgmlType::IQ4_XS, GgmlType::Q2_K, GgmlType::Q3_K},
                  {{256, 64, 16}, {512, 67, 37}, {4096 + 256, 64, 33}}, {Path::Prepared}, 1300);
}

// Q4_K, Q5_K and Q6_K in file order against 16 and more x rows: Q4_K's 16-row groups put into the
// feed order per call and multiplied by the feed tiles (weight rows past the last 16 and k over 16
// blocks by the K tiles), the K tiles for the others.
TEST(SimdMatmulKFormats, ManyRowsMatchReferenceOnEveryLevel) {
  check_many_rows({GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K},
                  {{256, 64, 16}, {2048, 35, 21}, {768, 67, 37}, {4096 + 256, 32, 17}}, {Path::Plain, Path::Prepared},
                  1700);
}

INSTANTIATE_TEST_SUITE_P(All, SimdMatmul, ::testing::ValuesIn(test::kRefTypes),
                         [](const auto& info) { return std::string(type_name(info.param)); });

// The quantizer against a scalar statement of its rule: q = round_even(x * 127/amax), d = amax/127
// (stored as F16 for 32-element blocks, as llama.cpp's Q8_0 activations are).
TEST(SimdActivation, QuantizersFollowTheScalarRule) {
  for (IsaLevel level : simd_levels()) {
    const x86::IsaKernels& K = *isa_kernels(level);
    for (Act a : {Act::Q8x32, Act::Q8x256}) {
      const int block = a == Act::Q8x32 ? 32 : 256;
      const int64_t k = 1024;
      std::vector<float> x = test::weights_like(static_cast<size_t>(k), 9);
      std::fill(x.begin() + block, x.begin() + 2 * block, 0.0f);  // an all-zero block: d = 0, q = 0
      x[static_cast<size_t>(2 * block + 5)] = -1e4f;              // one outlier owns its block's scale
      const x86::ActLayout L = x86::act_layout(a, k);
      std::vector<std::byte> buf(static_cast<size_t>(L.row_bytes) + 64);
      std::byte* p = buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64;
      if (a == Act::Q8x32)
        K.quantize_q8x32(x.data(), k, p);
      else
        K.quantize_q8x256(x.data(), k, p);
      for (int64_t b = 0; b < k / block; ++b) {
        float amax = 0;
        for (int i = 0; i < block; ++i) amax = std::max(amax, std::fabs(x[static_cast<size_t>(b * block + i)]));
        const float id = amax > 0 ? 127.0f / amax : 0.0f;
        float d;
        std::memcpy(&d, p + L.d_off + 4 * b, 4);
        const float d_rule = a == Act::Q8x32 ? ref::fp16_to_fp32(ref::fp32_to_fp16(amax / 127.0f)) : amax / 127.0f;
        ASSERT_EQ(d, d_rule) << isa_level_name(level) << " block " << b;
        int sum = 0, sum16 = 0;
        for (int i = 0; i < block; ++i) {
          const int64_t e = b * block + i;
          const int q = static_cast<int>(std::nearbyint(x[static_cast<size_t>(e)] * id));
          ASSERT_EQ(static_cast<int>(static_cast<int8_t>(p[e])), q) << isa_level_name(level) << " element " << e;
          sum += q;
          sum16 += q;
          if (a == Act::Q8x256 && i % 16 == 15) {
            int16_t bs;
            std::memcpy(&bs, p + L.s_off + 2 * (e / 16), 2);
            ASSERT_EQ(bs, sum16) << isa_level_name(level) << " bsum " << e / 16;
            float ds16;
            std::memcpy(&ds16, p + L.ds16_off + 4 * (e / 16), 4);
            ASSERT_EQ(ds16, d * static_cast<float>(sum16)) << isa_level_name(level) << " ds16 " << e / 16;
            sum16 = 0;
          }
        }
        if (a == Act::Q8x32) {
          float ds;
          std::memcpy(&ds, p + L.s_off + 4 * b, 4);
          ASSERT_EQ(ds, d * static_cast<float>(sum)) << isa_level_name(level) << " block " << b;
        }
      }
    }
  }
}

TEST(SimdTables, BestIsTheWidestLevelThisCpuRuns) {
  if (std::getenv("SKAINET_ISA")) GTEST_SKIP() << "SKAINET_ISA overrides the choice";
  const std::vector<IsaLevel> levels = simd_levels();
  ASSERT_NE(table_for(IsaLevel::Reference), nullptr);
  EXPECT_EQ(table_for(IsaLevel::Reference), &reference_table());
  const KernelTable* want = levels.empty() ? &reference_table() : table_for(levels.back());
  EXPECT_EQ(&best_table(), want);
  EXPECT_STREQ(best_table().name, levels.empty() ? "reference" : isa_level_name(levels.back()));
  // Matmul, softmax, SwiGLU, RMS norm and copy (F32 -> F16) are the level's; the rest the reference's.
  for (IsaLevel l : levels) {
    const KernelTable& t = *table_for(l);
    EXPECT_EQ(t.add, reference_table().add);
    EXPECT_EQ(t.rope, reference_table().rope);
    EXPECT_NE(t.matmul, reference_table().matmul);
    EXPECT_NE(t.copy, reference_table().copy);
  }
  EXPECT_EQ(reference_table().matmul_scratch, nullptr);
}

// Dense F32/F16 weights viewed transposed (output dimension contiguous: attention's Vᵀ over the V
// cache) take the GemmT kernels: a [cols, k] view of a [k, cols + 3] buffer starting at column 2,
// every level, odd sizes, register tiles of 1, 2 and 4 column vectors with their row leftovers (up
// to 16 rows a tile), chunks of columns on 1 and 2 threads; against the reference (double
// accumulation) within float summation error.
TEST(SimdMatmul, TransposedDenseWeightsMatchReference) {
  uint32_t seed = 900;
  for (IsaLevel level : simd_levels())
    for (GgmlType type : {GgmlType::F32, GgmlType::F16})
      for (int64_t cols : {1, 7, 20, 64, 67, 130})
        for (int64_t k : {1, 5, 33, 130})
          for (int64_t n : {1, 2, 3, 5, 9, 19, 37})
            for (int threads : {1, 2}) {
              const Owned base = make_weight(type, k + 1, cols + 3, seed++);
              const Tensor w = base.t.rows(1, k).narrow(1, 2, cols).transpose(0, 1);  // [cols, k]
              const Owned xo = make_x(n, k, seed++);
              const Owned got = make_out(n, cols), want = make_out(n, cols);
              ref::matmul(xo.t, w, want.t, 0, cols);
              run(*table_for(level), Path::Plain, xo.t, w, got.t, threads);
              for (int64_t r = 0; r < n; ++r)
                for (int64_t o = 0; o < cols; ++o) {
                  double mag = 0;
                  for (int64_t c = 0; c < k; ++c) {
                    float wv;
                    ref::dequantize_row(type, w.raw() + o * w.stride(0) + c * w.stride(1), &wv, 1);
                    mag += std::fabs(static_cast<double>(wv) * at(xo.t, r, c));
                  }
                  ASSERT_NEAR(at(got.t, r, o), at(want.t, r, o), 1e-6 * mag + 1e-30)
                      << isa_level_name(level) << " " << type_name(type) << " cols=" << cols << " k=" << k << " n=" << n
                      << " threads=" << threads << " r=" << r << " o=" << o;
                }
            }
}

// What no SIMD kernel takes (here a transposed BF16 weight) falls back to the reference exactly.
TEST(SimdMatmul, UnacceleratedShapesFallBackExactly) {
  for (IsaLevel level : simd_levels()) {
    const KernelTable& t = *table_for(level);
    const Owned wo = make_weight(GgmlType::BF16, 24, 24, 5);
    const Tensor wt = wo.t.rows(0, 20).transpose(0, 1);  // [24, 20], inner stride 24 elements
    const Owned xo = make_x(2, 20, 6);
    const Owned a = make_out(2, 24), b = make_out(2, 24);
    ref::matmul(xo.t, wt, a.t, 0, 24);
    t.matmul(xo.t, wt, b.t, 0, 24);
    EXPECT_EQ(a.bytes, b.bytes) << isa_level_name(level);
    EXPECT_EQ(t.matmul_scratch(xo.t, wt), 0u);
  }
}

}  // namespace
}  // namespace skainet::kernels
