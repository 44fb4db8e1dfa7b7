#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "gguf/detail.hpp"

namespace skainet::gguf {

std::string_view value_type_name(ValueType t) noexcept {
  switch (t) {
    case ValueType::UInt8: return "uint8";
    case ValueType::Int8: return "int8";
    case ValueType::UInt16: return "uint16";
    case ValueType::Int16: return "int16";
    case ValueType::UInt32: return "uint32";
    case ValueType::Int32: return "int32";
    case ValueType::Float32: return "float32";
    case ValueType::Bool: return "bool";
    case ValueType::String: return "string";
    case ValueType::Array: return "array";
    case ValueType::UInt64: return "uint64";
    case ValueType::Int64: return "int64";
    case ValueType::Float64: return "float64";
  }
  return "unknown";
}

namespace detail {

bool holds_type(const Scalar& s, ValueType t) noexcept {
  const auto index = scalar_index(t);
  return index && s.index() == *index;
}

std::optional<size_t> find_invalid_utf8(std::string_view s) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else
      return i;  // stray continuation byte, overlong lead (C0/C1) or F5..FF
    if (n - i < len) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
      return i;
    i += len;
  }
  return std::nullopt;
}

}  // namespace detail

Value Value::of(ValueType t, Scalar s) {
  if (t == ValueType::Array) throw InvalidArgument("gguf::Value::of: use Value::array for arrays");
  if (!detail::holds_type(s, t))
    throw InvalidArgument(
        fmt::format("gguf::Value::of: a {} value needs its own C++ type (scalar holds alternative {})",
                    value_type_name(t), s.index()));
  Value v;
  v.type = t;
  v.scalar = std::move(s);
  return v;
}

Value Value::array(ValueType element_type, std::vector<Scalar> items) {
  if (element_type == ValueType::Array) throw InvalidArgument("gguf::Value::array: GGUF arrays do not nest");
  if (!detail::scalar_index(element_type))
    throw InvalidArgument(
        fmt::format("gguf::Value::array: unknown element type {}", static_cast<uint32_t>(element_type)));
  for (size_t i = 0; i < items.size(); ++i)
    if (!detail::holds_type(items[i], element_type))
      throw InvalidArgument(fmt::format("gguf::Value::array: item {} is not a {}", i, value_type_name(element_type)));
  Value v;
  v.type = ValueType::Array;
  v.element_type = element_type;
  v.items = std::move(items);
  return v;
}

std::optional<int64_t> as_int(const Scalar& s) noexcept {
  return std::visit(
      [](const auto& v) -> std::optional<int64_t> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string> || std::is_floating_point_v<T>) {
          return std::nullopt;
        } else if constexpr (std::is_same_v<T, uint64_t>) {
          if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
          return static_cast<int64_t>(v);
        } else {
          return static_cast<int64_t>(v);
        }
      },
      s);
}

std::optional<double> as_double(const Scalar& s) noexcept {
  return std::visit(
      [](const auto& v) -> std::optional<double> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string>)
          return std::nullopt;
        else
          return static_cast<double>(v);
      },
      s);
}

std::string to_string(const Scalar& s) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>)
          return v;
        else if constexpr (std::is_same_v<T, bool>)
          return v ? "true" : "false";
        else if constexpr (std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>)
          return fmt::format("{}", static_cast<int>(v));
        else
          return fmt::format("{}", v);
      },
      s);
}

std::string_view error_kind_name(FormatErrorKind k) noexcept {
  switch (k) {
    case FormatErrorKind::Truncated: return "Truncated";
    case FormatErrorKind::BadMagic: return "BadMagic";
    case FormatErrorKind::BigEndian: return "BigEndian";
    case FormatErrorKind::UnsupportedVersion: return "UnsupportedVersion";
    case FormatErrorKind::LengthTooLarge: return "LengthTooLarge";
    case FormatErrorKind::CountTooLarge: return "CountTooLarge";
    case FormatErrorKind::DuplicateKey: return "DuplicateKey";
    case FormatErrorKind::DuplicateTensor: return "DuplicateTensor";
    case FormatErrorKind::UnknownValueType: return "UnknownValueType";
    case FormatErrorKind::NestedArray: return "NestedArray";
    case FormatErrorKind::InvalidString: return "InvalidString";
    case FormatErrorKind::BadAlignment: return "BadAlignment";
    case FormatErrorKind::UnknownTensorType: return "UnknownTensorType";
    case FormatErrorKind::BadDimensions: return "BadDimensions";
    case FormatErrorKind::DimensionOverflow: return "DimensionOverflow";
    case FormatErrorKind::BlockMismatch: return "BlockMismatch";
    case FormatErrorKind::MisalignedOffset: return "MisalignedOffset";
    case FormatErrorKind::DataOutOfBounds: return "DataOutOfBounds";
    case FormatErrorKind::OverlappingTensors: return "OverlappingTensors";
    case FormatErrorKind::MissingKey: return "MissingKey";
    case FormatErrorKind::WrongValueType: return "WrongValueType";
  }
  return "Unknown";
}

}  // namespace skainet::gguf
