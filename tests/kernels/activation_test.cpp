// The reference GeGLU and soft-capping kernels against hand-computed values, and every table's entry
// against the reference's (no level accelerates them yet: the SIMD tables carry the reference ones,
// which this keeps true, bit for bit, if one ever does not).
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "quant_test_util.hpp"
#include "skainet/compute/kernel_ops.hpp"

namespace skainet::kernels {
namespace {

Tensor row_of(std::vector<float>& v) {
  return Tensor(Storage::borrow(v.data(), v.size() * 4, true, "row"), Shape{static_cast<int64_t>(v.size())},
                GgmlType::F32);
}

TEST(Activation, GegluIsGeluTanhTimesUp) {
  // gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x³))), in double by hand; ±10 and beyond are
  // where ggml's table path stops looking up (x and 0): the formula gives the same there.
  std::vector<float> gate = {1.0f, -1.0f, 2.0f, -3.0f, 0.5f, 0.0f, 10.0f, -10.0f, 25.0f};
  std::vector<float> up = {1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 7.0f, 0.5f, 3.0f, -1.0f};
  const std::vector<double> want = {0.8411919906082768,
                                    -0.15880800939172324,
                                    1.954597694087775,
                                    -0.0036373920817729943,
                                    2 * 0.34571400982514394,
                                    0.0,
                                    5.0,
                                    0.0,
                                    -25.0};
  std::vector<float> out(gate.size());
  ref::geglu(row_of(gate), row_of(up), row_of(out));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(out[i], want[i], 1e-6 * std::fabs(want[i]) + 1e-7) << i;
}

TEST(Activation, SoftcapIsCapTimesTanh) {
  std::vector<float> x = {45.0f, -12.0f, 0.0f, 1e-3f, 1e6f, -1e6f};
  const std::vector<double> want = {27.154447609345993, -11.398468867656748, 0.0, 1e-3, 30.0, -30.0};
  std::vector<float> out(x.size());
  ref::softcap(row_of(x), 30.0f, row_of(out));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(out[i], want[i], 1e-6 * std::fabs(want[i])) << i;
}

TEST(Activation, EveryLevelMatchesTheReference) {
  for (IsaLevel level : kIsaLevels) {
    const KernelTable* table = table_for(level);
    if (!table) continue;
    for (int64_t n : {1, 7, 17, 33}) {
      std::vector<float> a = test::weights_like(static_cast<size_t>(n), static_cast<uint32_t>(n));
      std::vector<float> b = test::weights_like(static_cast<size_t>(n), static_cast<uint32_t>(n + 1));
      for (float& v : a) v *= 12.0f;
      std::vector<float> want(a.size()), got(a.size());
      ref::geglu(row_of(a), row_of(b), row_of(want));
      table->geglu(row_of(a), row_of(b), row_of(got));
      EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0) << isa_level_name(level) << " geglu n=" << n;
      ref::softcap(row_of(a), 5.0f, row_of(want));
      table->softcap(row_of(a), 5.0f, row_of(got));
      EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0)
          << isa_level_name(level) << " softcap n=" << n;
    }
  }
}

}  // namespace
}  // namespace skainet::kernels
