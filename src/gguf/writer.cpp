#include <bit>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "gguf/detail.hpp"

namespace skainet::gguf {
namespace {

constexpr uint32_t kVersion = 3;
constexpr std::string_view kAlignmentKey = "general.alignment";

void check_name(std::string_view name, std::string_view what) {
  if (name.empty()) throw InvalidArgument(fmt::format("gguf::Writer: {} is empty", what));
  if (detail::find_invalid_utf8(name) || name.find('\0') != std::string_view::npos)
    throw InvalidArgument(fmt::format("gguf::Writer: {} '{}' is not valid UTF-8 without NUL bytes", what, name));
}

void check_value(std::string_view key, const Value& v) {
  const auto bad = [&](std::string_view why) {
    throw InvalidArgument(fmt::format("gguf::Writer: metadata key '{}': {}", key, why));
  };
  if (!v.is_array()) {
    if (!detail::holds_type(v.scalar, v.type)) bad(fmt::format("scalar does not hold a {}", value_type_name(v.type)));
    return;
  }
  if (!detail::scalar_index(v.element_type)) bad("arrays do not nest");
  for (const Scalar& s : v.items)
    if (!detail::holds_type(s, v.element_type))
      bad(fmt::format("an item is not a {}", value_type_name(v.element_type)));
}

class Encoder {
 public:
  explicit Encoder(base::AtomicFile& out) : out_(out) {}

  template <class T>
  void le(T v) {
    static_assert(std::endian::native == std::endian::little);
    out_.write(&v, sizeof v);
  }
  void string(std::string_view s) {
    le<uint64_t>(s.size());
    out_.write(s.data(), s.size());
  }
  void scalar(const Scalar& s) {
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>)
            string(v);
          else if constexpr (std::is_same_v<T, bool>)
            le<uint8_t>(v ? 1 : 0);
          else
            le<T>(v);
        },
        s);
  }
  void value(const Value& v) {
    le<uint32_t>(static_cast<uint32_t>(v.type));
    if (!v.is_array()) return scalar(v.scalar);
    le<uint32_t>(static_cast<uint32_t>(v.element_type));
    le<uint64_t>(v.items.size());
    for (const Scalar& s : v.items) scalar(s);
  }

 private:
  base::AtomicFile& out_;
};

}  // namespace

Writer::Writer(std::filesystem::path target, uint32_t alignment) : target_(std::move(target)), alignment_(alignment) {
  if (!std::has_single_bit(alignment))
    throw InvalidArgument(fmt::format("gguf::Writer: alignment must be a power of two, got {}", alignment));
}

void Writer::set(std::string key, Value value) {
  check_name(key, "metadata key");
  check_value(key, value);
  if (key == kAlignmentKey) {
    if (value == Value::u32(alignment_)) return;
    throw InvalidArgument(
        fmt::format("gguf::Writer: '{}' is managed by the writer (alignment {}); pass the alignment to the constructor",
                    kAlignmentKey, alignment_));
  }
  for (KeyValue& kv : metadata_)
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  metadata_.push_back(KeyValue{std::move(key), std::move(value)});
}

size_t Writer::add_tensor(std::string name, std::vector<uint64_t> shape, GgmlType type) {
  check_name(name, "tensor name");
  for (const TensorInfo& t : tensors_)
    if (t.name == name) throw InvalidArgument(fmt::format("gguf::Writer: tensor '{}' added twice", name));
  if (shape.empty() || shape.size() > 4)
    throw InvalidArgument(
        fmt::format("gguf::Writer: tensor '{}': expected 1..4 dimensions, got {}", name, shape.size()));
  const std::string what = fmt::format("gguf::Writer: tensor '{}'", name);
  uint64_t elements = 1;
  for (uint64_t d : shape) {
    if (d == 0) throw InvalidArgument(what + ": a dimension is zero");
    elements = checked_mul(elements, d, what + " element count");
  }
  if (elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw OverflowError(what + ": too many elements");
  TensorInfo t;
  t.bytes = row_bytes(type, shape[0]);  // throws InvalidArgument when shape[0] is not whole blocks
  for (size_t d = 1; d < shape.size(); ++d) t.bytes = checked_mul(t.bytes, shape[d], what + " byte size");
  if (!tensors_.empty()) {
    const TensorInfo& prev = tensors_.back();
    t.offset = checked_align_up(checked_add(prev.offset, prev.bytes, what + " offset"), alignment_, what + " offset");
  }
  t.name = std::move(name);
  t.shape = std::move(shape);
  t.type = type;
  tensors_.push_back(std::move(t));
  return tensors_.size() - 1;
}

uint64_t Writer::data_bytes() const noexcept {
  uint64_t sum = 0;
  for (const TensorInfo& t : tensors_) sum += t.bytes;
  return sum;
}

uint64_t Writer::write(const Producer& produce, base::Progress* progress) {
  uint64_t largest = 0;
  for (const TensorInfo& t : tensors_) largest = std::max(largest, t.bytes);
  if (largest > std::numeric_limits<size_t>::max())
    throw OverflowError(fmt::format("gguf::Writer: a tensor of {} bytes cannot be staged in memory", largest));

  base::AtomicFile out(target_);
  Encoder enc(out);
  const bool write_alignment = alignment_ != kDefaultAlignment;
  enc.le<uint32_t>(kMagic);
  enc.le<uint32_t>(kVersion);
  enc.le<uint64_t>(tensors_.size());
  enc.le<uint64_t>(metadata_.size() + (write_alignment ? 1 : 0));
  for (const KeyValue& kv : metadata_) {
    enc.string(kv.key);
    enc.value(kv.value);
  }
  if (write_alignment) {
    enc.string(kAlignmentKey);
    enc.value(Value::u32(alignment_));
  }
  for (const TensorInfo& t : tensors_) {
    enc.string(t.name);
    enc.le<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (uint64_t d : t.shape) enc.le<uint64_t>(d);
    enc.le<uint32_t>(static_cast<uint32_t>(t.type));
    enc.le<uint64_t>(t.offset);
  }
  const uint64_t data_offset = checked_align_up(out.position(), alignment_, "gguf::Writer data offset");
  // The header is still in the write buffer: the whole size is known before a byte reaches the disk,
  // so a full disk is reported up front, naming what is needed and what is free.
  uint64_t total = data_offset;
  if (!tensors_.empty()) {
    const TensorInfo& last = tensors_.back();
    total = checked_add(
        data_offset,
        checked_align_up(checked_add(last.offset, last.bytes, "gguf::Writer size"), alignment_, "gguf::Writer size"),
        "gguf::Writer size");
  }
  out.require_space(total);
  out.write_zeros(data_offset - out.position());

  // One staging buffer for all tensors, zeroed so that a producer that writes less leaks nothing.
  std::vector<std::byte> buffer(static_cast<size_t>(largest));
  for (size_t i = 0; i < tensors_.size(); ++i) {
    TensorInfo& t = tensors_[i];
    t.file_offset = data_offset + t.offset;
    if (out.position() != t.file_offset)
      throw InvalidArgument(fmt::format("gguf::Writer: tensor '{}' would land at {} instead of {}", t.name,
                                        out.position(), t.file_offset));
    const std::span<std::byte> span(buffer.data(), static_cast<size_t>(t.bytes));
    std::memset(span.data(), 0, span.size());
    if (progress) progress->item(t.name);
    produce(i, span);
    out.write(span.data(), span.size());
    out.write_zeros(checked_align_up(t.bytes, alignment_, "gguf::Writer padding") - t.bytes);
    if (progress) progress->advance(t.bytes);
  }
  const uint64_t written = out.position();
  out.commit();
  return written;
}

}  // namespace skainet::gguf
