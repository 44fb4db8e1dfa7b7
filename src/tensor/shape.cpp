#include <fmt/format.h>

#include "skainet/core/tensor.hpp"

namespace skainet {

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(of(std::span<const int64_t>(dims.begin(), dims.size()))) {}

Shape Shape::of(std::span<const int64_t> dims) {
  if (dims.size() > static_cast<size_t>(kMaxRank))
    throw InvalidArgument(fmt::format("a tensor has at most {} dimensions; {} given", kMaxRank, dims.size()));
  Shape s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) throw InvalidArgument(fmt::format("dimension {} is negative ({})", i, dims[i]));
    s.d_[i] = dims[i];
  }
  s.rank_ = static_cast<int>(dims.size());
  uint64_t n = 1;
  for (int i = 0; i < s.rank_; ++i)
    n = checked_mul<uint64_t>(n, static_cast<uint64_t>(s.d_[static_cast<size_t>(i)]), "tensor element count");
  if (n > (uint64_t{1} << 62)) throw OverflowError(fmt::format("tensor of {} elements is too large", n));
  return s;
}

Shape Shape::from_ggml(std::span<const uint64_t> ne) {
  if (ne.size() > static_cast<size_t>(kMaxRank))
    throw InvalidArgument(fmt::format("a tensor has at most {} dimensions; {} given", kMaxRank, ne.size()));
  std::array<int64_t, kMaxRank> d{};
  for (size_t i = 0; i < ne.size(); ++i) {
    if (ne[i] > (uint64_t{1} << 62)) throw OverflowError(fmt::format("dimension {} = {} is too large", i, ne[i]));
    d[ne.size() - 1 - i] = static_cast<int64_t>(ne[i]);
  }
  return of(std::span<const int64_t>(d.data(), ne.size()));
}

int64_t Shape::numel() const noexcept {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= d_[static_cast<size_t>(i)];
  return n;
}

Shape Shape::with(int i, int64_t v) const {
  if (i < 0 || i >= rank_) throw InvalidArgument(fmt::format("dimension {} out of range for {}", i, to_string()));
  Shape s = *this;
  s.d_[static_cast<size_t>(i)] = v;
  return of(std::span<const int64_t>(s.d_.data(), static_cast<size_t>(rank_)));
}

std::string Shape::to_string() const {
  std::string out = "[";
  for (int i = 0; i < rank_; ++i) out += (i ? ", " : "") + std::to_string(d_[static_cast<size_t>(i)]);
  return out + "]";
}

bool operator==(const Shape& a, const Shape& b) noexcept {
  if (a.rank_ != b.rank_) return false;
  for (int i = 0; i < a.rank_; ++i)
    if (a.d_[static_cast<size_t>(i)] != b.d_[static_cast<size_t>(i)]) return false;
  return true;
}

Strides contiguous_strides(const Shape& shape, GgmlType type) {
  const TypeTraits& t = type_traits(type);
  Strides s{};
  const int r = shape.rank();
  if (r == 0) return s;
  s[static_cast<size_t>(r - 1)] = t.quantized ? 0 : t.block_bytes;
  int64_t pitch = static_cast<int64_t>(row_bytes(type, static_cast<uint64_t>(shape[r - 1])));
  for (int i = r - 2; i >= 0; --i) {
    s[static_cast<size_t>(i)] = pitch;
    pitch = static_cast<int64_t>(
        checked_mul<uint64_t>(static_cast<uint64_t>(pitch), static_cast<uint64_t>(shape[i]), "tensor byte size"));
  }
  return s;
}

uint64_t contiguous_bytes(const Shape& shape, GgmlType type) {
  uint64_t bytes = row_bytes(type, static_cast<uint64_t>(shape.back()));
  for (int i = 0; i + 1 < shape.rank(); ++i)
    bytes = checked_mul<uint64_t>(bytes, static_cast<uint64_t>(shape[i]), "tensor byte size");
  return bytes;
}

}  // namespace skainet
