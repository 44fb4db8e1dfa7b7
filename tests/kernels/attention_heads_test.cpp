// Every table's attention_heads (a task of ops::attention: one group's run of heads) against the
// reference table's, at odd head sizes (the fused kernel takes whole vectors of 8 up to 256; others go
// head by head), odd cell counts, storage offsets that leave no vector aligned, partial runs of a
// group's heads, windows and soft caps, F32 and F16 caches, caches longer than the fused kernel's
// block of keys, and every other cache type (-ctk/-ctv: BF16 and the quantized ones, K and V of
// different types, heads of whole blocks): within 1e-4 + 1e-5 |out| of the reference table's (values
// of order 1, scores up to ~20: float sums in another order, the vector exp within ~2e-7 of libm's).
// The fused decode kernel sums each score in its own order (x86/attend.hpp), so it is not compared
// bit for bit with the table's head-by-head path.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/ref/ops_common.hpp"
#include "quant_test_util.hpp"
#include "skainet/compute/kernel_ops.hpp"

namespace skainet::kernels {
namespace {

// Floats at a storage offset of `offset` bytes, as `type` (rounded or quantized on the way in, row
// by row).
struct Buffer {
  std::vector<std::byte> bytes;
  Tensor t;
};
Buffer make(const Shape& shape, GgmlType type, uint64_t offset, uint32_t seed, float spread) {
  Buffer b;
  const int64_t n = shape.numel(), width = shape.back(), rows = n / width;
  std::vector<float> v = test::weights_like(static_cast<size_t>(n), seed);
  for (float& x : v) x *= spread;
  const auto row = static_cast<int64_t>(row_bytes(type, static_cast<uint64_t>(width)));
  b.bytes.assign(static_cast<size_t>(rows * row) + offset, std::byte{0});
  b.t = Tensor(Storage::borrow(b.bytes.data(), b.bytes.size(), true, "buffer"), shape, type, offset);
  for (int64_t r = 0; r < rows; ++r)
    ref::quantize_row(type, v.data() + r * width, b.bytes.data() + offset + r * row, width);
  return b;
}

std::vector<float> floats(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.shape().numel()));
  std::memcpy(v.data(), t.raw(), v.size() * 4);
  return v;
}

struct Case {
  int64_t head_dim, cells, group, h0, h1, window;
  float softcap;
  GgmlType cache;
  int64_t n = 1;
  GgmlType values = cache;  // V's type, when it differs from K's

  std::string name() const {
    return "hd=" + std::to_string(head_dim) + " cells=" + std::to_string(cells) + " group=" + std::to_string(group) +
           " heads=[" + std::to_string(h0) + "," + std::to_string(h1) + ") window=" + std::to_string(window) +
           " softcap=" + std::to_string(softcap) + " K " + std::string(type_name(cache)) + " V " +
           std::string(type_name(values)) + " n=" + std::to_string(n);
  }
};

// Runs `attend` for the case into a fresh output (NaN where the heads do not write) and scores.
template <class Attend>
std::vector<float> run(const Case& c, const Attend& attend) {
  const int64_t kv_heads = 2, heads = kv_heads * c.group, hd = c.head_dim;
  const Buffer q = make(Shape{c.n, heads * hd}, GgmlType::F32, 4, 11, 1.0f);
  // One and three elements in (two and six bytes for a packed cache): never 32-byte aligned.
  const auto in = [](GgmlType t) -> uint64_t { return type_traits(t).quantized ? 2 : type_traits(t).block_bytes; };
  const Buffer k = make(Shape{c.cells, kv_heads * hd}, c.cache, in(c.cache), 12, 1.0f);
  const Buffer v = make(Shape{c.cells, kv_heads * hd}, c.values, 3 * in(c.values), 13, 1.0f);
  Buffer out = make(Shape{c.n, heads * hd}, GgmlType::F32, 4, 14, 0.0f);
  std::fill(reinterpret_cast<float*>(out.bytes.data() + 4),
            reinterpret_cast<float*>(out.bytes.data() + 4) + c.n * heads * hd, std::numeric_limits<float>::quiet_NaN());
  const Buffer scores = make(Shape{c.h1 - c.h0, c.n, c.cells}, GgmlType::F32, 4, 15, 0.0f);
  const AttentionHeads a{
      .head_dim = hd,
      .group = c.group,
      .h0 = c.h0,
      .h1 = c.h1,
      .softmax = {.scale = 0.125f, .causal = true, .offset = c.cells - c.n, .window = c.window, .softcap = c.softcap}};
  attend(q.t, k.t, v.t, a, scores.t, out.t);
  return floats(out.t);
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (GgmlType cache : {GgmlType::F16, GgmlType::F32})
    for (int64_t hd : {8, 24, 64, 72, 128, 256, 5, 264})
      for (int64_t cells : {1, 9, 37, 150})
        for (int64_t group : {1, 3, 8}) {
          all.push_back({hd, cells, group, 0, group, 0, 0.0f, cache});                  // group 0, every head
          all.push_back({hd, cells, group, 2 * group - 1, 2 * group, 0, 0.0f, cache});  // group 1, its last
          if (group == 8) all.push_back({hd, cells, group, 9, 14, 0, 0.0f, cache});     // a run inside group 1
          if (group == 8) all.push_back({hd, cells, group, 8, 14, 0, 0.0f, cache});     // six heads: 4 + 2
        }
  for (GgmlType cache : {GgmlType::F16, GgmlType::F32})
    for (int64_t window : {0, 1, 5})
      for (float softcap : {0.0f, 0.9f}) all.push_back({64, 33, 4, 4, 8, window, softcap, cache});
  for (int64_t n : {2, 3}) all.push_back({64, 17, 4, 0, 4, 0, 0.0f, GgmlType::F16, n});  // prefill: head by head
  // The other cache types (heads of whole 32-element blocks), K and V alike, then mixed.
  for (GgmlType cache : {GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                         GgmlType::IQ4_NL})
    for (int64_t hd : {32, 64, 96, 256})
      for (int64_t cells : {1, 37, 150}) all.push_back({hd, cells, 4, 4, 8, 0, 0.0f, cache});
  all.push_back({64, 150, 8, 9, 14, 5, 0.9f, GgmlType::Q8_0, 1, GgmlType::F16});
  all.push_back({128, 37, 4, 0, 4, 0, 0.0f, GgmlType::F16, 1, GgmlType::Q4_0});
  all.push_back({64, 17, 4, 0, 4, 0, 0.0f, GgmlType::Q8_0, 3, GgmlType::Q4_0});  // several queries: head by head
  return all;
}

TEST(AttentionHeads, EveryTableNearTheReference) {
  for (IsaLevel level : kIsaLevels) {
    const KernelTable* table = table_for(level);
    if (!table) continue;
    for (const Case& c : cases()) {
      const std::vector<float> got = run(c, table->attention_heads);
      const std::vector<float> want = run(c, ref::attention_heads);
      const int64_t hd = c.head_dim, heads = 2 * c.group;
      for (int64_t t = 0; t < c.n; ++t)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t d = 0; d < hd; ++d) {
            const size_t i = static_cast<size_t>((t * heads + h) * hd + d);
            const bool written = h >= c.h0 && h < c.h1;
            ASSERT_EQ(std::isnan(got[i]), !written) << isa_level_name(level) << " " << c.name() << " head " << h;
            if (written) {
              ASSERT_NEAR(got[i], want[i], 1e-4 + 1e-5 * std::fabs(want[i]))
                  << isa_level_name(level) << " " << c.name() << " t=" << t << " h=" << h << " d=" << d;
            }
          }
    }
  }
}

}  // namespace
}  // namespace skainet::kernels
