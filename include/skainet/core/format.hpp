// skainet::tensor formats — the GGML type ids a GGUF file may name, our logical Format (dtype +
// encoding), and the block geometry of every encoding.
//
//   using namespace skainet;
//   const TypeTraits& t = type_traits(GgmlType::Q4_K);      // 256 elements in 144 bytes
//   uint64_t bytes = row_bytes(GgmlType::Q4_0, 4096);       // throws InvalidArgument if 4096 % 32 != 0
//   Format f = format_of(GgmlType::Q8_0);                   // {DType::F32, Encoding::Q8_0}
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "skainet/core/base.hpp"

namespace skainet {

// Type ids exactly as ggml numbers them in GGUF tensor infos. Ids that ggml has retired (4, 5, 31-33,
// 36-38) are not listed and are refused by the reader.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};
// One past the highest id: the slots of a table indexed by type (the kernels' rows).
inline constexpr size_t kTypeSlots = static_cast<size_t>(GgmlType::MXFP4) + 1;

enum class DType : uint8_t { F32, F16, BF16, F64, I8, I16, I32, I64 };

// How the elements are stored. Dense means "one element after another in the dtype".
enum class Encoding : uint8_t {
  Dense,
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  Q8_0,
  Q8_1,
  Q2_K,
  Q3_K,
  Q4_K,
  Q5_K,
  Q6_K,
  Q8_K,
  IQ2_XXS,
  IQ2_XS,
  IQ3_XXS,
  IQ1_S,
  IQ4_NL,
  IQ3_S,
  IQ2_S,
  IQ4_XS,
  IQ1_M,
  TQ1_0,
  TQ2_0,
  MXFP4,
};

// A quantized weight keeps its logical dtype (F32) and its encoding.
struct Format {
  DType dtype = DType::F32;
  Encoding encoding = Encoding::Dense;
  friend bool operator==(const Format&, const Format&) = default;
};

struct TypeTraits {
  GgmlType type;
  std::string_view name;    // "Q4_K", as ggml spells it
  uint32_t block_elements;  // elements per block (1 for dense types)
  uint32_t block_bytes;     // bytes per block
  Format format;
  bool quantized;
  // What quantize writes instead when a row does not divide into this type's blocks (llama.cpp's
  // fallback table); F16 where llama.cpp names none, and again F16 if the fallback's blocks don't fit.
  GgmlType fallback = GgmlType::F16;
};

// Traits of a known type id; nullopt for an id ggml does not define (or has retired).
std::optional<TypeTraits> find_type(uint32_t raw_id) noexcept;
const TypeTraits& type_traits(GgmlType type) noexcept;
// Every known type, in ggml's id order: the one table the rest derives its lists from.
std::span<const TypeTraits> all_types() noexcept;
std::string_view type_name(GgmlType type) noexcept;
// Parses "Q4_K" / "q4_k" / "f16"; nullopt if unknown.
std::optional<GgmlType> parse_type_name(std::string_view name) noexcept;
Format format_of(GgmlType type) noexcept;
std::string_view dtype_name(DType d) noexcept;
std::string_view encoding_name(Encoding e) noexcept;
uint32_t dtype_size(DType d) noexcept;

// Bytes of `elements` elements of `type` laid out in whole blocks; throws InvalidArgument if
// `elements` is not a multiple of the block size, OverflowError on overflow.
uint64_t row_bytes(GgmlType type, uint64_t elements);

// How the blocks of a 2-D packed weight [out, in] are ordered in memory. Files are always RowMajor.
// Interleaved16 (a kernel-feed order, made by a load-time repack: kernels::ref::repack_rows): rows in
// groups of 16; within a group, block by block, the 16 rows' scales (in units interleaved across the
// rows: kernels/feed_layout.hpp) and then their quants in 4-byte chunks across the rows (chunk c of
// row r at 64 c + 4 r after the scales), so one 512-bit load feeds one integer
// lane per row. Rows past the last whole group stay row-major after the groups. Same bytes per row
// as the file, so a row still starts at row * row_bytes when it begins a group or the tail.
enum class BlockOrder : uint8_t { RowMajor, Interleaved16 };
inline constexpr int64_t kInterleaveRows = 16;
// "row-major", "interleaved16" (as the plan's JSON and the export's layouts spell it).
std::string_view block_order_name(BlockOrder o) noexcept;
std::optional<BlockOrder> parse_block_order(std::string_view name) noexcept;

}  // namespace skainet
