// Internals shared by the GGUF reader and writer (not installed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "skainet/io/gguf.hpp"

namespace skainet::gguf::detail {

// GGUF ids 0..8 and 10..12 map onto Scalar's alternatives in order (9 is Array).
constexpr std::optional<size_t> scalar_index(ValueType t) noexcept {
  const auto id = static_cast<uint32_t>(t);
  if (id <= 8) return id;
  if (id >= 10 && id <= 12) return id - 1;
  return std::nullopt;
}

constexpr bool is_known_value_type(uint32_t id) noexcept { return id <= 12; }

// Encoded size of a fixed-size scalar; 0 for String and Array.
constexpr uint32_t fixed_size(ValueType t) noexcept {
  switch (t) {
    case ValueType::UInt8:
    case ValueType::Int8:
    case ValueType::Bool: return 1;
    case ValueType::UInt16:
    case ValueType::Int16: return 2;
    case ValueType::UInt32:
    case ValueType::Int32:
    case ValueType::Float32: return 4;
    case ValueType::UInt64:
    case ValueType::Int64:
    case ValueType::Float64: return 8;
    case ValueType::String:
    case ValueType::Array: return 0;
  }
  return 0;
}

// Fewest bytes one encoded item of type t can take (a string is at least its 8-byte length).
constexpr uint32_t min_encoded_size(ValueType t) noexcept {
  if (t == ValueType::String) return 8;
  if (t == ValueType::Array) return 12;
  return fixed_size(t);
}

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. Returns the byte offset
// of the first bad byte, or nullopt when valid.
std::optional<size_t> find_invalid_utf8(std::string_view s) noexcept;

// Checks that `s` holds the C++ alternative of scalar type t.
bool holds_type(const Scalar& s, ValueType t) noexcept;

}  // namespace skainet::gguf::detail
