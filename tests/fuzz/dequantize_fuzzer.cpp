// Fuzz target: the reference kernels on arbitrary block bytes. The first byte picks a type with a
// reference kernel; the rest, cut to whole blocks (at most 64), is one row, dequantized with
// kernels::ref::dequantize_row and dotted with a fixed vector by kernels::ref::dot_row. NaN and
// infinity in the output are fine (a scale can be any half float); a crash, a sanitizer report or a
// write outside the row is not. The row is copied to its own allocation so AddressSanitizer sees a
// read past its end.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz_target.hpp"
#include "skainet/core/format.hpp"
#include "skainet/compute/kernels.hpp"

namespace skainet::fuzz {
namespace {

const std::vector<GgmlType>& reference_types() {
  static const std::vector<GgmlType> types = [] {
    std::vector<GgmlType> v;
    for (uint32_t id = 0; id < 64; ++id)
      if (const auto t = find_type(id); t && kernels::ref::has_reference(t->type)) v.push_back(t->type);
    return v;
  }();
  return types;
}

constexpr size_t kMaxBlocks = 64;

}  // namespace

int dequantize_one_input(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto& types = reference_types();
  const TypeTraits& t = type_traits(types[data[0] % types.size()]);
  const size_t blocks = std::min((size - 1) / t.block_bytes, kMaxBlocks);
  if (blocks == 0) return 0;
  const size_t n = blocks * t.block_elements;
  const size_t bytes = blocks * t.block_bytes;
  const auto row = std::make_unique<std::byte[]>(bytes);  // aligned for any block struct, exactly sized
  std::memcpy(row.get(), data + 1, bytes);

  constexpr float kGuard = 12345.0f;
  std::vector<float> y(n + 1, kGuard);
  kernels::ref::dequantize_row(t.type, row.get(), y.data(), static_cast<int64_t>(n));
  if (std::memcmp(&y[n], &kGuard, sizeof kGuard) != 0) fail("dequantize_fuzzer", "dequantize_row wrote past the row");
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(static_cast<int>(i % 7) - 3) * 0.25f;
  (void)kernels::ref::dot_row(t.type, row.get(), x.data(), static_cast<int64_t>(n));
  return 0;
}

std::vector<Bytes> dequantize_seeds() {
  // For each type: a row of quantized ramp values, a row of 0xff and a row of zeros, two blocks each.
  std::vector<Bytes> seeds;
  const auto& types = reference_types();
  for (size_t i = 0; i < types.size(); ++i) {
    const TypeTraits& t = type_traits(types[i]);
    const size_t n = 2 * t.block_elements;
    std::vector<float> x(n);
    for (size_t j = 0; j < n; ++j) x[j] = static_cast<float>(j) * 0.1f - 3.0f;
    Bytes s(1 + 2 * t.block_bytes);
    s[0] = static_cast<uint8_t>(i);
    kernels::ref::quantize_row(t.type, x.data(), s.data() + 1, static_cast<int64_t>(n));
    seeds.push_back(s);
    std::memset(s.data() + 1, 0xff, s.size() - 1);
    seeds.push_back(s);
    std::memset(s.data() + 1, 0, s.size() - 1);
    seeds.push_back(s);
  }
  return seeds;
}

}  // namespace skainet::fuzz

SKAINET_FUZZ_ENTRY(skainet::fuzz::dequantize_one_input, skainet::fuzz::dequantize_seeds)
