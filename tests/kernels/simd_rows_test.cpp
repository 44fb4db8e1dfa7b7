// Every table's SwiGLU, RMS norm and F32 -> F16 copy (the SIMD levels' row kernels, rows.hpp) against
// the reference's: row lengths around the vector widths, several rows, tensors at a 4-byte offset
// (not vector aligned), in place, and the views the row kernels leave to the reference (strided
// rows, a broadcast, no norm weight). The conversion is F16C's, bit for bit the reference's, on
// every special value; SwiGLU's vector exp is within ~2e-7 of libm's (2e-6 relative, plus 1e-30 for
// what the reference takes to 0); RMS norm differs only in the order of a double sum (1e-6).
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "quant_test_util.hpp"
#include "skainet/compute/kernel_ops.hpp"

namespace skainet::kernels {
namespace {

constexpr int64_t kLengths[] = {1, 7, 8, 9, 15, 16, 17, 33, 64, 100, 1000};

float at(const Tensor& t, int64_t r, int64_t j) {
  float f;
  std::memcpy(&f, t.raw() + r * t.stride(0) + j * t.stride(1), 4);
  return f;
}

void expect_close(const Tensor& got, const Tensor& want, double rel, const std::string& where) {
  for (int64_t r = 0; r < got.dim(0); ++r)
    for (int64_t j = 0; j < got.dim(1); ++j) {
      const float g = at(got, r, j), w = at(want, r, j);
      ASSERT_NEAR(g, w, rel * std::fabs(w) + 1e-30) << where << " r=" << r << " j=" << j;
    }
}

std::string name(IsaLevel level, int64_t n, int64_t rows) {
  return std::string(isa_level_name(level)) + " n=" + std::to_string(n) + " rows=" + std::to_string(rows);
}

TEST(SimdRows, SwigluMatchesReferenceOnEveryLevel) {
  for (IsaLevel level : kIsaLevels) {
    const KernelTable* table = table_for(level);
    if (!table) continue;
    for (int64_t n : kLengths)
      for (int64_t rows : {1, 3})
        for (float spread : {1.0f, 60.0f}) {  // 60: gates past +-87, where the exp saturates
          const std::string where = name(level, n, rows) + " spread=" + std::to_string(spread);
          const auto seed = static_cast<uint32_t>(n * 13 + rows);
          test::F32Rows g = test::f32_rows(rows, n, seed, spread), u = test::f32_rows(rows, n, seed + 1, 1.0f);
          test::F32Rows want = test::f32_rows(rows, n, seed, 0.0f), got = test::f32_rows(rows, n, seed, 0.0f);
          ref::swiglu(g.t, u.t, want.t);
          table->swiglu(g.t, u.t, got.t);
          expect_close(got.t, want.t, 2e-6, where);
          table->swiglu(g.t, u.t, g.t);
          expect_close(g.t, want.t, 2e-6, where + " in place");
          if (HasFatalFailure()) return;
        }
  }
}

TEST(SimdRows, RmsNormMatchesReferenceOnEveryLevel) {
  for (IsaLevel level : kIsaLevels) {
    const KernelTable* table = table_for(level);
    if (!table) continue;
    for (int64_t n : kLengths)
      for (int64_t rows : {1, 3})
        for (bool with_weight : {true, false}) {
          const std::string where = name(level, n, rows) + (with_weight ? " weight" : " no weight");
          const auto seed = static_cast<uint32_t>(n * 17 + rows);
          test::F32Rows x = test::f32_rows(rows, n, seed, 3.0f), w = test::f32_rows(1, n, seed + 2, 1.0f);
          const Tensor weight = with_weight ? w.t.reshape(Shape{n}) : Tensor();
          test::F32Rows want = test::f32_rows(rows, n, seed, 0.0f), got = test::f32_rows(rows, n, seed, 0.0f);
          ref::rms_norm(x.t, weight, 1e-5f, want.t);
          table->rms_norm(x.t, weight, 1e-5f, got.t);
          expect_close(got.t, want.t, 1e-6, where);
          table->rms_norm(x.t, weight, 1e-5f, x.t);
          expect_close(x.t, want.t, 1e-6, where + " in place");
          if (HasFatalFailure()) return;
        }
  }
}

// Round-to-nearest-even ties, overflow to infinity, F16 subnormals and underflow, signed zeros, both
// NaN kinds with payloads, then random values of every magnitude.
std::vector<float> conversion_cases() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          65504.0f,
                          65519.0f,
                          65520.0f,
                          -65520.0f,
                          1e6f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::bit_cast<float>(0x7fc12345u),
                          std::bit_cast<float>(0xff812345u),  // quiet, signalling
                          6.1035156e-05f,
                          6.0975552e-05f,
                          5.9604645e-08f,
                          2.9802322e-08f,
                          2.9802326e-08f,
                          1e-10f,
                          std::numeric_limits<float>::denorm_min(),
                          1.00048828125f,
                          1.00146484375f,
                          2049.0f,
                          2051.0f};
  const std::vector<float> r = test::weights_like(3000, 77);
  for (size_t i = 0; i < r.size(); ++i) v.push_back(r[i] * std::ldexp(1.0f, static_cast<int>(i % 60) - 30));
  return v;
}

TEST(SimdRows, F32ToF16CopyIsTheReferenceBitForBitOnEveryLevel) {
  const std::vector<float> cases = conversion_cases();
  for (IsaLevel level : kIsaLevels) {
    const KernelTable* table = table_for(level);
    if (!table) continue;
    for (int64_t n : kLengths)
      for (int64_t rows : {1, 3}) {
        std::vector<float> src(static_cast<size_t>(rows * n + 1));
        for (size_t i = 0; i < src.size(); ++i) src[i] = cases[(i * 7 + static_cast<size_t>(n)) % cases.size()];
        std::vector<uint16_t> want(static_cast<size_t>(rows * n + 1), 0xdead), got = want;
        const Tensor s(Storage::borrow(src.data(), src.size() * 4, true, "src"), Shape{rows, n}, GgmlType::F32, 4);
        const auto f16 = [&](std::vector<uint16_t>& b) {
          return Tensor(Storage::borrow(b.data(), b.size() * 2, true, "dst"), Shape{rows, n}, GgmlType::F16, 2);
        };
        ref::copy(s, f16(want));
        table->copy(s, f16(got));
        ASSERT_EQ(got, want) << name(level, n, rows);  // the element before and after untouched too
      }
  }
}

// What the row kernels do not take goes to the reference: strided rows, a broadcast up, a strided
// destination.
TEST(SimdRows, OtherViewsMatchReferenceOnEveryLevel) {
  for (IsaLevel level : kIsaLevels) {
    const KernelTable* table = table_for(level);
    if (!table) continue;
    const std::string where = isa_level_name(level);
    test::F32Rows x = test::f32_rows(6, 20, 5, 2.0f), up_row = test::f32_rows(1, 10, 6, 1.0f);
    const Tensor strided = x.t.narrow(1, 0, 10).narrow(0, 0, 3);  // rows of 10 a row of 20 apart: fine
    const Tensor transposed = x.t.narrow(0, 0, 3).transpose(0, 1).narrow(0, 0, 10);  // columns: stride 80
    test::F32Rows want = test::f32_rows(10, 3, 0, 0.0f), got = test::f32_rows(10, 3, 0, 0.0f);
    ref::swiglu(transposed, transposed, want.t);
    table->swiglu(transposed, transposed, got.t);
    expect_close(got.t, want.t, 2e-6, where + " transposed swiglu");
    test::F32Rows want2 = test::f32_rows(3, 10, 0, 0.0f), got2 = test::f32_rows(3, 10, 0, 0.0f);
    ref::swiglu(strided, up_row.t, want2.t);
    table->swiglu(strided, up_row.t, got2.t);
    expect_close(got2.t, want2.t, 2e-6, where + " broadcast swiglu");
    ref::rms_norm(strided, Tensor(), 1e-6f, want2.t);
    table->rms_norm(strided, Tensor(), 1e-6f, got2.t);
    expect_close(got2.t, want2.t, 1e-6, where + " strided rms_norm");
    ref::rms_norm(transposed, Tensor(), 1e-6f, want.t);
    table->rms_norm(transposed, Tensor(), 1e-6f, got.t);
    expect_close(got.t, want.t, 1e-6, where + " transposed rms_norm");
    std::vector<uint16_t> a(60, 1), b(60, 1);
    const auto f16 = [](std::vector<uint16_t>& v) {
      return Tensor(Storage::borrow(v.data(), v.size() * 2, true, "dst"), Shape{10, 6}, GgmlType::F16).narrow(1, 0, 3);
    };
    ref::copy(transposed, f16(a));
    table->copy(transposed, f16(b));
    EXPECT_EQ(a, b) << where << " transposed copy";
  }
}

}  // namespace
}  // namespace skainet::kernels
