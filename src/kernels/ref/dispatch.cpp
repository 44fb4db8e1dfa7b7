// Routes the public by-type entry points to the per-format row kernels: the rows of every quant file
// (and the dense conversions here) indexed by type once, so a format's kernels are named in one place.
#include <array>
#include <cstring>

#include "kernels/ref/ref_internal.hpp"

namespace skainet::kernels::ref {
namespace detail {
namespace {

void copy_f32(const float* x, void* dst, int64_t n) noexcept { std::memcpy(dst, x, static_cast<size_t>(n) * 4); }
void read_f32(const void* src, float* y, int64_t n) noexcept { std::memcpy(y, src, static_cast<size_t>(n) * 4); }

template <uint16_t (*kTo)(float) noexcept>
void to_half(const float* x, void* dst, int64_t n) noexcept {
  auto* out = static_cast<std::byte*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = kTo(x[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

template <float (*kFrom)(uint16_t) noexcept>
void from_half(const void* src, float* y, int64_t n) noexcept {
  const auto* in = static_cast<const std::byte*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    y[i] = kFrom(h);
  }
}

constexpr RefFormat kDense[] = {
    {.type = GgmlType::F32, .quantize = &copy_f32, .dequantize = &read_f32},
    {.type = GgmlType::F16, .quantize = &to_half<&fp32_to_fp16>, .dequantize = &from_half<&fp16_to_fp32>},
    {.type = GgmlType::BF16, .quantize = &to_half<&fp32_to_bf16>, .dequantize = &from_half<&bf16_to_fp32>},
};

using Index = std::array<const RefFormat*, kTypeSlots>;

Index build_index() noexcept {
  Index index{};
  for (std::span<const RefFormat> rows : {std::span<const RefFormat>(kDense), legacy_formats(), k_formats(),
                                          k_low_formats(), iq4_formats(), mxfp4_formats()})
    for (const RefFormat& r : rows) index[static_cast<size_t>(r.type)] = &r;
  return index;
}

}  // namespace

const RefFormat* find_format(GgmlType type) noexcept {
  static const Index index = build_index();
  const auto slot = static_cast<size_t>(type);
  return slot < index.size() ? index[slot] : nullptr;
}

}  // namespace detail

bool has_reference(GgmlType type) noexcept { return detail::find_format(type) != nullptr; }

// For a type without a reference kernel the contract is broken by the caller; we still must not
// crash or leave garbage, so we write zeros of the right size.
void quantize_row(GgmlType type, const float* x, void* dst, int64_t n) noexcept {
  if (const detail::RefFormat* f = detail::find_format(type)) return f->quantize(x, dst, n);
  const TypeTraits& t = type_traits(type);
  std::memset(dst, 0, static_cast<size_t>(n / t.block_elements) * t.block_bytes);
}

void dequantize_row(GgmlType type, const void* src, float* y, int64_t n) noexcept {
  if (const detail::RefFormat* f = detail::find_format(type)) return f->dequantize(src, y, n);
  std::memset(y, 0, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace skainet::kernels::ref
