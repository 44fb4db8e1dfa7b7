#include <limits>

#include <fmt/format.h>

#include "gguf/detail.hpp"

namespace skainet::gguf {

uint64_t TensorInfo::elements() const noexcept {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;  // the reader has already proved this product fits
  return n;
}

namespace {

std::string describe(const Value& v) {
  if (v.is_array()) return fmt::format("array of {} {}", v.items.size(), value_type_name(v.element_type));
  return fmt::format("{} {}", value_type_name(v.type), to_string(v.scalar));
}

[[noreturn]] void wrong_type(const Header& h, std::string_view key, std::string_view expected, const Value& found) {
  throw FormatError(FormatErrorKind::WrongValueType, fmt::format("{}: metadata key '{}': expected {}, found {}",
                                                                 h.path.string(), key, expected, describe(found)));
}

uint32_t to_u32(const Header& h, std::string_view key, const Value& v) {
  if (!v.is_array()) {
    const auto i = as_int(v.scalar);
    if (i && *i >= 0 && *i <= static_cast<int64_t>(std::numeric_limits<uint32_t>::max()))
      return static_cast<uint32_t>(*i);
  }
  wrong_type(h, key, "an integer in the uint32 range", v);
}

float to_f32(const Header& h, std::string_view key, const Value& v) {
  if (!v.is_array()) {
    if (const auto d = as_double(v.scalar)) return static_cast<float>(*d);
  }
  wrong_type(h, key, "a number", v);
}

}  // namespace

const Value* Header::find(std::string_view key) const noexcept {
  if (key_index.size() == metadata.size()) {
    const auto it = key_index.find(key);
    return it == key_index.end() ? nullptr : &metadata[it->second].value;
  }
  for (const KeyValue& kv : metadata)  // a Header assembled by hand, without its index
    if (kv.key == key) return &kv.value;
  return nullptr;
}

const TensorInfo* Header::find_tensor(std::string_view name) const noexcept {
  if (tensor_index.size() == tensors.size()) {
    const auto it = tensor_index.find(name);
    return it == tensor_index.end() ? nullptr : &tensors[it->second];
  }
  for (const TensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

static const Value& require(const Header& h, std::string_view key) {
  const Value* v = h.find(key);
  if (!v)
    throw FormatError(FormatErrorKind::MissingKey,
                      fmt::format("{}: metadata key '{}' is missing", h.path.string(), key));
  return *v;
}

uint32_t Header::get_u32(std::string_view key) const { return to_u32(*this, key, require(*this, key)); }

float Header::get_f32(std::string_view key) const { return to_f32(*this, key, require(*this, key)); }

const std::string& Header::get_string(std::string_view key) const {
  const Value& v = require(*this, key);
  if (v.type != ValueType::String) wrong_type(*this, key, "a string", v);
  return std::get<std::string>(v.scalar);
}

std::optional<uint32_t> Header::find_u32(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  return to_u32(*this, key, *v);
}

std::optional<float> Header::find_f32(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  return to_f32(*this, key, *v);
}

}  // namespace skainet::gguf
