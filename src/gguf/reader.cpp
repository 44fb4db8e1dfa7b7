#include <algorithm>
#include <bit>
#include <limits>

#include <fmt/format.h>

#include "gguf/cursor.hpp"
#include "gguf/detail.hpp"
#include "gguf/layout.hpp"

namespace skainet::gguf {
namespace {

using detail::Cursor;

constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kReserveLimit = 256;  // entries reserved up front, before any is parsed

class Parser {
 public:
  Parser(const base::FileReader& file, const ReadOptions& options)
      : file_(file), options_(options), cursor_(file, context_) {}

  Header run();

 private:
  [[noreturn]] void fail(FormatErrorKind kind, uint64_t offset, std::string detail) const {
    throw FormatError(kind, detail::located(file_, offset, context_, detail));
  }

  void read_preamble(Header& h);
  void read_metadata(Header& h, uint64_t count);
  void read_tensor_infos(Header& h, uint64_t count);
  std::string read_name(std::string_view what, uint64_t limit);
  void check_length(uint64_t at, std::string_view what, uint64_t count, uint64_t limit, uint64_t min_item);
  std::string read_string(std::string_view what, uint64_t limit);
  Value read_value(ValueType type);
  Scalar read_scalar(ValueType type);
  ValueType read_value_type(std::string_view what);
  void check_alignment(Header& h, const Value& v, uint64_t offset);

  const base::FileReader& file_;
  const ReadOptions& options_;
  std::string context_ = "header";
  Cursor cursor_;
};

// A length past the end of the file is what a cut-off file looks like (Truncated), unless it is
// beyond any sane size (LengthTooLarge). Either way nothing is allocated for it.
void Parser::check_length(uint64_t at, std::string_view what, uint64_t count, uint64_t limit, uint64_t min_item) {
  if (count > limit)
    fail(FormatErrorKind::LengthTooLarge, at,
         fmt::format("{}: length {} exceeds the reader's limit of {} (the file has {} bytes)", what, count, limit,
                     cursor_.file_size()));
  if (count > cursor_.remaining() / min_item)
    fail(FormatErrorKind::Truncated, at,
         fmt::format("truncated: {} of length {} needs at least {} bytes, but the file ends at byte {} ({} remain)",
                     what, count, count * min_item, cursor_.file_size(), cursor_.remaining()));
}

std::string Parser::read_string(std::string_view what, uint64_t limit) {
  const uint64_t at = cursor_.position();
  const auto length = cursor_.read_le<uint64_t>(what);
  check_length(at, what, length, limit, 1);
  std::string s(static_cast<size_t>(length), '\0');
  cursor_.read(s.data(), s.size(), what);
  return s;
}

std::string Parser::read_name(std::string_view what, uint64_t limit) {
  const uint64_t at = cursor_.position();
  std::string s = read_string(what, limit);
  if (s.empty()) fail(FormatErrorKind::InvalidString, at, fmt::format("{} is empty", what));
  if (const auto bad = detail::find_invalid_utf8(s))
    fail(FormatErrorKind::InvalidString, at,
         fmt::format("{} is not valid UTF-8 (bad byte 0x{:02x} at index {})", what, static_cast<unsigned char>(s[*bad]),
                     *bad));
  if (const auto nul = s.find('\0'); nul != std::string::npos)
    fail(FormatErrorKind::InvalidString, at, fmt::format("{} contains a NUL byte at index {}", what, nul));
  return s;
}

ValueType Parser::read_value_type(std::string_view what) {
  const uint64_t at = cursor_.position();
  const auto id = cursor_.read_le<uint32_t>(what);
  if (!detail::is_known_value_type(id))
    fail(FormatErrorKind::UnknownValueType, at, fmt::format("{}: expected a value type id 0..12, found {}", what, id));
  return static_cast<ValueType>(id);
}

Scalar Parser::read_scalar(ValueType type) {
  switch (type) {
    case ValueType::UInt8: return cursor_.read_le<uint8_t>("uint8 value");
    case ValueType::Int8: return cursor_.read_le<int8_t>("int8 value");
    case ValueType::UInt16: return cursor_.read_le<uint16_t>("uint16 value");
    case ValueType::Int16: return cursor_.read_le<int16_t>("int16 value");
    case ValueType::UInt32: return cursor_.read_le<uint32_t>("uint32 value");
    case ValueType::Int32: return cursor_.read_le<int32_t>("int32 value");
    case ValueType::Float32: return cursor_.read_le<float>("float32 value");
    case ValueType::UInt64: return cursor_.read_le<uint64_t>("uint64 value");
    case ValueType::Int64: return cursor_.read_le<int64_t>("int64 value");
    case ValueType::Float64: return cursor_.read_le<double>("float64 value");
    case ValueType::String: return read_string("string value", options_.max_string_bytes);
    case ValueType::Bool: {
      const uint64_t at = cursor_.position();
      const auto b = cursor_.read_le<uint8_t>("bool value");
      // Any other byte would not survive a round trip, and no writer produces one.
      if (b > 1) fail(FormatErrorKind::WrongValueType, at, fmt::format("bool value: expected 0 or 1, found {}", b));
      return b == 1;
    }
    case ValueType::Array: break;
  }
  fail(FormatErrorKind::NestedArray, cursor_.position(), "array inside an array");
}

Value Parser::read_value(ValueType type) {
  Value v;
  v.type = type;
  if (type != ValueType::Array) {
    v.scalar = read_scalar(type);
    return v;
  }
  const uint64_t type_at = cursor_.position();
  v.element_type = read_value_type("array element type");
  if (v.element_type == ValueType::Array)
    fail(FormatErrorKind::NestedArray, type_at, "arrays of arrays are not allowed");
  const uint64_t count_at = cursor_.position();
  const auto count = cursor_.read_le<uint64_t>("array length");
  check_length(count_at, fmt::format("array of {}", value_type_name(v.element_type)), count, options_.max_array_items,
               detail::min_encoded_size(v.element_type));
  v.items.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) v.items.push_back(read_scalar(v.element_type));
  return v;
}

void Parser::check_alignment(Header& h, const Value& v, uint64_t offset) {
  if (v.type != ValueType::UInt32)
    fail(FormatErrorKind::BadAlignment, offset, fmt::format("expected a uint32, found a {}", value_type_name(v.type)));
  const uint32_t a = std::get<uint32_t>(v.scalar);
  if (!std::has_single_bit(a))
    fail(FormatErrorKind::BadAlignment, offset, fmt::format("expected a power of two, found {}", a));
  h.alignment = a;
}

void Parser::read_preamble(Header& h) {
  const auto magic = cursor_.read_le<uint32_t>("magic");
  if (magic == __builtin_bswap32(kMagic))
    fail(FormatErrorKind::BigEndian, 0,
         "magic is 'FUGG': a big-endian GGUF file; only little-endian files are supported");
  if (magic != kMagic)
    fail(FormatErrorKind::BadMagic, 0, fmt::format("expected magic 'GGUF' (0x{:08x}), found 0x{:08x}", kMagic, magic));
  h.version = cursor_.read_le<uint32_t>("version");
  // Big-endian writers keep the magic's bytes but write the version byte-swapped.
  const uint32_t swapped = __builtin_bswap32(h.version);
  if (h.version > 0xFFFF && swapped >= 1 && swapped <= 3)
    fail(FormatErrorKind::BigEndian, 4,
         fmt::format(
             "version reads 0x{:08x} ({} byte-swapped): a big-endian GGUF file; only little-endian files are supported",
             h.version, swapped));
  if (h.version != 2 && h.version != 3)
    fail(FormatErrorKind::UnsupportedVersion, 4,
         fmt::format("GGUF version {} is not supported (expected 2 or 3)", h.version));
}

void Parser::read_metadata(Header& h, uint64_t count) {
  // The count may be a lie: memory grows with the entries actually parsed, not with the claim.
  h.metadata.reserve(static_cast<size_t>(std::min<uint64_t>(count, kReserveLimit)));
  for (uint64_t i = 0; i < count; ++i) {
    context_ = fmt::format("metadata entry {}", i);
    const uint64_t key_at = cursor_.position();
    std::string key = read_name("key", options_.max_name_bytes);
    if (const auto it = h.key_index.find(key); it != h.key_index.end())
      fail(FormatErrorKind::DuplicateKey, key_at,
           fmt::format("key '{}' already appeared as entry {}", key, it->second));
    context_ = fmt::format("metadata key '{}'", key);
    const ValueType type = read_value_type("value type");
    const uint64_t value_at = cursor_.position();
    Value value = read_value(type);
    if (key == "general.alignment") check_alignment(h, value, value_at);
    h.key_index.emplace(key, h.metadata.size());
    h.metadata.push_back(KeyValue{std::move(key), std::move(value)});
  }
}

void Parser::read_tensor_infos(Header& h, uint64_t count) {
  h.tensors.reserve(static_cast<size_t>(std::min<uint64_t>(count, kReserveLimit)));
  for (uint64_t i = 0; i < count; ++i) {
    context_ = fmt::format("tensor info {}", i);
    const uint64_t name_at = cursor_.position();
    TensorInfo t;
    t.name = read_name("tensor name", options_.max_tensor_name_bytes);
    if (const auto it = h.tensor_index.find(t.name); it != h.tensor_index.end())
      fail(FormatErrorKind::DuplicateTensor, name_at,
           fmt::format("tensor '{}' already appeared as tensor {}", t.name, it->second));
    context_ = fmt::format("tensor '{}'", t.name);

    const uint64_t dims_at = cursor_.position();
    const auto n_dims = cursor_.read_le<uint32_t>("dimension count");
    if (n_dims == 0 || n_dims > kMaxDims)
      fail(FormatErrorKind::BadDimensions, dims_at,
           fmt::format("expected 1..{} dimensions, found {}", kMaxDims, n_dims));
    uint64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t at = cursor_.position();
      const auto dim = cursor_.read_le<uint64_t>("dimension");
      if (dim == 0) fail(FormatErrorKind::BadDimensions, at, fmt::format("dimension {} is zero", d));
      // ggml counts elements in int64_t, so the product must fit there.
      if (__builtin_mul_overflow(elements, dim, &elements) ||
          elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail(FormatErrorKind::DimensionOverflow, at,
             fmt::format("element count overflows at dimension {} ({})", d, dim));
      t.shape.push_back(dim);
    }

    const uint64_t type_at = cursor_.position();
    const auto type_id = cursor_.read_le<uint32_t>("tensor type");
    const auto traits = find_type(type_id);
    if (!traits) fail(FormatErrorKind::UnknownTensorType, type_at, fmt::format("unknown ggml type id {}", type_id));
    t.type = traits->type;
    if (t.shape[0] % traits->block_elements != 0)
      fail(FormatErrorKind::BlockMismatch, type_at,
           fmt::format("innermost dimension {} is not a multiple of {}'s block size {}", t.shape[0], traits->name,
                       traits->block_elements));
    uint64_t bytes = (t.shape[0] / traits->block_elements);
    bool overflow = __builtin_mul_overflow(bytes, uint64_t{traits->block_bytes}, &bytes);
    for (size_t d = 1; d < t.shape.size(); ++d)
      overflow = overflow || __builtin_mul_overflow(bytes, t.shape[d], &bytes);
    if (overflow) fail(FormatErrorKind::DimensionOverflow, type_at, "byte size overflows 64 bits");
    t.bytes = bytes;

    const uint64_t offset_at = cursor_.position();
    t.offset = cursor_.read_le<uint64_t>("data offset");
    if (t.offset % h.alignment != 0)
      fail(FormatErrorKind::MisalignedOffset, offset_at,
           fmt::format("data offset {} is not a multiple of the alignment {}", t.offset, h.alignment));
    h.tensor_index.emplace(t.name, h.tensors.size());
    h.tensors.push_back(std::move(t));
  }
}

Header Parser::run() {
  const uint64_t bytes_before = file_.bytes_read();
  Header h;
  h.path = file_.path();
  h.file_size = file_.size();
  read_preamble(h);

  const auto tensor_count = cursor_.read_le<uint64_t>("tensor count");
  const auto kv_count = cursor_.read_le<uint64_t>("metadata count");
  // A count no real model comes near is corrupt. A plausible count that the bytes left cannot hold
  // is what a cut-off file looks like, so parsing goes on and reports Truncated where the file
  // ends; read_metadata/read_tensor_infos reserve only what the bytes left could hold.
  if (tensor_count > options_.max_entries)
    fail(FormatErrorKind::CountTooLarge, 8,
         fmt::format("tensor count {} exceeds the reader's limit of {} (the file has {} bytes)", tensor_count,
                     options_.max_entries, h.file_size));
  if (kv_count > options_.max_entries)
    fail(FormatErrorKind::CountTooLarge, 16,
         fmt::format("metadata count {} exceeds the reader's limit of {} (the file has {} bytes)", kv_count,
                     options_.max_entries, h.file_size));

  read_metadata(h, kv_count);
  read_tensor_infos(h, tensor_count);
  context_ = "data section";
  h.data_offset = checked_align_up(cursor_.position(), h.alignment, "data section offset");
  detail::check_layout(h, options_.check_data_bounds);
  h.header_bytes_read = file_.bytes_read() - bytes_before;
  return h;
}

}  // namespace

Header read_header(const base::FileReader& file, const ReadOptions& options) { return Parser(file, options).run(); }

Header read_header(const std::filesystem::path& path, const ReadOptions& options) {
  base::FileReader file(path);
  return read_header(file, options);
}

}  // namespace skainet::gguf
