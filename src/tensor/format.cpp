#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include <fmt/format.h>

#include "skainet/core/format.hpp"

namespace skainet {
namespace {

constexpr Format dense(DType d) { return Format{d, Encoding::Dense}; }
constexpr Format packed(Encoding e) { return Format{DType::F32, e}; }

// Block geometry as ggml defines it (ggml.c type_traits), and quantize's fallback where llama.cpp
// names one (llama_tensor_get_type's table for rows that are not whole super-blocks).
constexpr std::array kTypes = {
    TypeTraits{GgmlType::F32, "F32", 1, 4, dense(DType::F32), false},
    TypeTraits{GgmlType::F16, "F16", 1, 2, dense(DType::F16), false},
    TypeTraits{GgmlType::Q4_0, "Q4_0", 32, 18, packed(Encoding::Q4_0), true},
    TypeTraits{GgmlType::Q4_1, "Q4_1", 32, 20, packed(Encoding::Q4_1), true},
    TypeTraits{GgmlType::Q5_0, "Q5_0", 32, 22, packed(Encoding::Q5_0), true},
    TypeTraits{GgmlType::Q5_1, "Q5_1", 32, 24, packed(Encoding::Q5_1), true},
    TypeTraits{GgmlType::Q8_0, "Q8_0", 32, 34, packed(Encoding::Q8_0), true},
    TypeTraits{GgmlType::Q8_1, "Q8_1", 32, 36, packed(Encoding::Q8_1), true},
    TypeTraits{GgmlType::Q2_K, "Q2_K", 256, 84, packed(Encoding::Q2_K), true, GgmlType::Q4_0},
    TypeTraits{GgmlType::Q3_K, "Q3_K", 256, 110, packed(Encoding::Q3_K), true, GgmlType::Q4_0},
    TypeTraits{GgmlType::Q4_K, "Q4_K", 256, 144, packed(Encoding::Q4_K), true, GgmlType::Q5_0},
    TypeTraits{GgmlType::Q5_K, "Q5_K", 256, 176, packed(Encoding::Q5_K), true, GgmlType::Q5_1},
    TypeTraits{GgmlType::Q6_K, "Q6_K", 256, 210, packed(Encoding::Q6_K), true, GgmlType::Q8_0},
    TypeTraits{GgmlType::Q8_K, "Q8_K", 256, 292, packed(Encoding::Q8_K), true},
    TypeTraits{GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66, packed(Encoding::IQ2_XXS), true},
    TypeTraits{GgmlType::IQ2_XS, "IQ2_XS", 256, 74, packed(Encoding::IQ2_XS), true},
    TypeTraits{GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98, packed(Encoding::IQ3_XXS), true},
    TypeTraits{GgmlType::IQ1_S, "IQ1_S", 256, 50, packed(Encoding::IQ1_S), true},
    TypeTraits{GgmlType::IQ4_NL, "IQ4_NL", 32, 18, packed(Encoding::IQ4_NL), true},
    TypeTraits{GgmlType::IQ3_S, "IQ3_S", 256, 110, packed(Encoding::IQ3_S), true},
    TypeTraits{GgmlType::IQ2_S, "IQ2_S", 256, 82, packed(Encoding::IQ2_S), true},
    TypeTraits{GgmlType::IQ4_XS, "IQ4_XS", 256, 136, packed(Encoding::IQ4_XS), true, GgmlType::IQ4_NL},
    TypeTraits{GgmlType::I8, "I8", 1, 1, dense(DType::I8), false},
    TypeTraits{GgmlType::I16, "I16", 1, 2, dense(DType::I16), false},
    TypeTraits{GgmlType::I32, "I32", 1, 4, dense(DType::I32), false},
    TypeTraits{GgmlType::I64, "I64", 1, 8, dense(DType::I64), false},
    TypeTraits{GgmlType::F64, "F64", 1, 8, dense(DType::F64), false},
    TypeTraits{GgmlType::IQ1_M, "IQ1_M", 256, 56, packed(Encoding::IQ1_M), true},
    TypeTraits{GgmlType::BF16, "BF16", 1, 2, dense(DType::BF16), false},
    TypeTraits{GgmlType::TQ1_0, "TQ1_0", 256, 54, packed(Encoding::TQ1_0), true},
    TypeTraits{GgmlType::TQ2_0, "TQ2_0", 256, 66, packed(Encoding::TQ2_0), true},
    TypeTraits{GgmlType::MXFP4, "MXFP4", 32, 17, packed(Encoding::MXFP4), true},
};

constexpr bool ids_fit_slots() {
  for (const auto& t : kTypes)
    if (static_cast<size_t>(t.type) >= kTypeSlots) return false;
  return true;
}
static_assert(ids_fit_slots(), "kTypeSlots must stay one past the highest type id");

}  // namespace

std::optional<TypeTraits> find_type(uint32_t raw_id) noexcept {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == raw_id) return t;
  return std::nullopt;
}

const TypeTraits& type_traits(GgmlType type) noexcept {
  for (const auto& t : kTypes)
    if (t.type == type) return t;
  return kTypes[0];  // unreachable for enum values; GgmlType lists only known ids
}

std::span<const TypeTraits> all_types() noexcept { return kTypes; }

std::string_view type_name(GgmlType type) noexcept { return type_traits(type).name; }

std::optional<GgmlType> parse_type_name(std::string_view name) noexcept {
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  for (const auto& t : kTypes)
    if (t.name == upper) return t.type;
  return std::nullopt;
}

Format format_of(GgmlType type) noexcept { return type_traits(type).format; }

std::string_view dtype_name(DType d) noexcept {
  switch (d) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::F64: return "F64";
    case DType::I8: return "I8";
    case DType::I16: return "I16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
  }
  return "?";
}

uint32_t dtype_size(DType d) noexcept {
  switch (d) {
    case DType::I8: return 1;
    case DType::F16:
    case DType::BF16:
    case DType::I16: return 2;
    case DType::F32:
    case DType::I32: return 4;
    case DType::F64:
    case DType::I64: return 8;
  }
  return 0;
}

std::string_view encoding_name(Encoding e) noexcept {
  if (e == Encoding::Dense) return "dense";
  for (const auto& t : kTypes)
    if (t.quantized && t.format.encoding == e) return t.name;
  return "?";
}

std::string_view block_order_name(BlockOrder o) noexcept {
  return o == BlockOrder::RowMajor ? "row-major" : "interleaved16";
}

std::optional<BlockOrder> parse_block_order(std::string_view name) noexcept {
  for (BlockOrder o : {BlockOrder::RowMajor, BlockOrder::Interleaved16})
    if (name == block_order_name(o)) return o;
  return std::nullopt;
}

// On the hot path (every view an op makes): no message is formatted unless it throws.
uint64_t row_bytes(GgmlType type, uint64_t elements) {
  const TypeTraits& t = type_traits(type);
  if (elements % t.block_elements != 0)
    throw InvalidArgument(fmt::format("{} stores blocks of {} elements; {} elements is not a multiple of it", t.name,
                                      t.block_elements, elements));
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(elements / t.block_elements, uint64_t{t.block_bytes}, &bytes))
    throw OverflowError(fmt::format("bytes of {} {} elements overflow 64 bits", elements, t.name));
  return bytes;
}

}  // namespace skainet
