// skainet::gguf — a strict GGUF (v2, v3) header reader and a streaming, atomic writer.
//
//   gguf::Header h = gguf::read_header("model.gguf");   // reads the header only, never tensor data
//   uint32_t layers = h.get_u32("llama.block_count");    // FormatError naming the key if absent/mistyped
//   for (const gguf::TensorInfo& t : h.tensors) std::cout << t.name << ' ' << t.bytes << '\n';
//
//   gguf::Writer w("out.gguf");                          // alignment 32 unless told otherwise
//   w.set("general.architecture", gguf::Value::string("llama"));
//   w.add_tensor("tok_embd.weight", {64, 512}, GgmlType::F32);
//   w.write([&](size_t i, std::span<std::byte> out) { fill(i, out); });   // temp file, then rename
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "skainet/core/base.hpp"
#include "skainet/core/format.hpp"

namespace skainet::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
inline constexpr uint32_t kDefaultAlignment = 32;

// Metadata value type ids as the GGUF spec numbers them.
enum class ValueType : uint32_t {
  UInt8 = 0,
  Int8 = 1,
  UInt16 = 2,
  Int16 = 3,
  UInt32 = 4,
  Int32 = 5,
  Float32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  UInt64 = 10,
  Int64 = 11,
  Float64 = 12,
};
std::string_view value_type_name(ValueType t) noexcept;

using Scalar = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool, std::string, uint64_t,
                            int64_t, double>;

// One metadata value: a scalar, or an array whose items all have element_type (arrays do not nest).
struct Value {
  ValueType type = ValueType::UInt32;
  ValueType element_type = ValueType::UInt8;  // meaningful only when type == Array
  Scalar scalar;                              // when type != Array
  std::vector<Scalar> items;                  // when type == Array

  static Value of(ValueType t, Scalar s);  // checks that s holds the C++ type of t
  static Value string(std::string s) { return of(ValueType::String, std::move(s)); }
  static Value u32(uint32_t v) { return of(ValueType::UInt32, v); }
  static Value f32(float v) { return of(ValueType::Float32, v); }
  static Value array(ValueType element_type, std::vector<Scalar> items);

  bool is_array() const noexcept { return type == ValueType::Array; }
  friend bool operator==(const Value&, const Value&) = default;
};

// Integer scalars of any width widen here; nullopt for non-integers or values out of range.
std::optional<int64_t> as_int(const Scalar& s) noexcept;
std::optional<double> as_double(const Scalar& s) noexcept;  // integers and floats
std::string to_string(const Scalar& s);                     // for display

struct KeyValue {
  std::string key;
  Value value;
};

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> shape;  // ggml order: shape[0] is the innermost (contiguous) dimension
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;       // relative to the start of the data section, as stored
  uint64_t file_offset = 0;  // absolute: data_offset + offset
  uint64_t bytes = 0;        // row_bytes(type, shape[0]) * product of the other dims
  uint64_t elements() const noexcept;
};

struct Header {
  std::filesystem::path path;
  uint32_t version = 3;
  uint64_t file_size = 0;
  uint32_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;         // first byte of the data section (aligned)
  uint64_t header_bytes_read = 0;   // how many bytes of the file the reader touched
  std::vector<KeyValue> metadata;   // in file order
  std::vector<TensorInfo> tensors;  // in file order

  const Value* find(std::string_view key) const noexcept;
  const TensorInfo* find_tensor(std::string_view name) const noexcept;
  // Typed getters: FormatError (kind MissingKey / WrongValueType) naming the key and the types.
  uint32_t get_u32(std::string_view key) const;  // accepts any integer type in range
  float get_f32(std::string_view key) const;     // accepts float32/float64/integers
  const std::string& get_string(std::string_view key) const;
  std::optional<uint32_t> find_u32(std::string_view key) const;
  std::optional<float> find_f32(std::string_view key) const;

  base::StringMap<size_t> key_index;     // key -> index in metadata (looked up without allocating)
  base::StringMap<size_t> tensor_index;  // name -> index in tensors
};

// What is wrong with a malformed file, as data: tests assert on the kind, people read the message.
enum class FormatErrorKind : uint8_t {
  Truncated,  // the file ends inside the header or inside a tensor's data
  BadMagic,
  BigEndian,  // a byte-swapped GGUF: we only read little-endian files
  UnsupportedVersion,
  LengthTooLarge,  // a string/array length beyond ReadOptions' limits (merely past EOF: Truncated)
  CountTooLarge,   // a tensor or metadata count beyond ReadOptions::max_entries
  DuplicateKey,
  DuplicateTensor,
  UnknownValueType,
  NestedArray,
  InvalidString,  // not valid UTF-8 (keys and tensor names), or contains NUL in a key
  BadAlignment,   // general.alignment zero, not a power of two, or not a uint32
  UnknownTensorType,
  BadDimensions,      // dimension count 0 or > 4, or a zero-sized dimension
  DimensionOverflow,  // element or byte counts overflow 64 bits
  BlockMismatch,      // the innermost dimension is not a multiple of the type's block size
  MisalignedOffset,   // a tensor offset not a multiple of the alignment
  DataOutOfBounds,    // a tensor's bytes extend past the end of the file
  OverlappingTensors,
  MissingKey,
  WrongValueType,
};
std::string_view error_kind_name(FormatErrorKind k) noexcept;

class FormatError : public Error {
 public:
  FormatError(FormatErrorKind kind, std::string message) : Error(std::move(message)), kind_(kind) {}
  FormatErrorKind kind() const noexcept { return kind_; }

 private:
  FormatErrorKind kind_;
};

struct ReadOptions {
  // Check that every tensor's data lies inside the file (a file cut off in its data region is
  // reported as Truncated). On by default; off only for tools that inspect damaged files.
  bool check_data_bounds = true;
  // Sanity limits that no real model comes near; they stop a huge (e.g. sparse) file from making
  // the reader allocate gigabytes for one string or array. Exceeding one is LengthTooLarge /
  // CountTooLarge.
  uint64_t max_name_bytes = 65536;  // a metadata key
  // A tensor name. ggml holds names in char[GGML_MAX_NAME] = 64 (63 bytes and a NUL) and llama.cpp's
  // reader refuses longer ones; forks that raise GGML_MAX_NAME go to 128. 256 leaves room for those
  // while keeping every name short enough to quote in a message and cheap to match a pattern against
  // (a 25 KB name would overflow the stack of a backtracking regex).
  uint64_t max_tensor_name_bytes = 256;
  uint64_t max_string_bytes = 256u << 20;  // any other string
  uint64_t max_array_items = 1u << 24;
  uint64_t max_entries = 1u << 20;  // metadata entries, and separately tensors
};

// Parses the header (metadata and tensor infos) and validates it completely. Reads only header
// bytes, never tensor data. Throws FormatError for malformed input, IoError if the OS refuses.
Header read_header(const std::filesystem::path& path, const ReadOptions& options = {});
Header read_header(const base::FileReader& file, const ReadOptions& options = {});

// Writes GGUF v3 the way llama.cpp does: metadata in insertion order, tensor infos, padding to the
// alignment, then each tensor's bytes in the order added, each padded to the alignment.
class Writer {
 public:
  explicit Writer(std::filesystem::path target, uint32_t alignment = kDefaultAlignment);

  // Sets (or replaces, keeping its position) a metadata key. "general.alignment" is managed by the
  // writer from the constructor's alignment.
  void set(std::string key, Value value);
  // Declares a tensor; validates the shape against the type's block size. Returns its index.
  size_t add_tensor(std::string name, std::vector<uint64_t> shape, GgmlType type);
  const std::vector<TensorInfo>& tensors() const noexcept { return tensors_; }
  uint64_t data_bytes() const noexcept;  // the tensors' bytes, without padding (what `write` reports progress in)

  // Writes the file: produce(i, out) must fill `out` (exactly tensors()[i].bytes) for each tensor
  // in order. Atomic: written to a temporary file and renamed only when complete. `progress` is told
  // each tensor's name before it is produced and its bytes after. Returns the number of bytes written.
  using Producer = std::function<void(size_t index, std::span<std::byte> out)>;
  uint64_t write(const Producer& produce, base::Progress* progress = nullptr);

 private:
  std::filesystem::path target_;
  uint32_t alignment_;
  std::vector<KeyValue> metadata_;
  std::vector<TensorInfo> tensors_;
};

}  // namespace skainet::gguf
