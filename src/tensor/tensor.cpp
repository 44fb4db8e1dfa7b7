#include <fmt/format.h>

#include "skainet/core/tensor.hpp"

namespace skainet {
namespace {

void check_dim(const Tensor& t, int dim, std::string_view what) {
  if (dim < 0 || dim >= t.rank())
    throw InvalidArgument(fmt::format("{}: dimension {} out of range for {}", what, dim, t.describe()));
}

}  // namespace

Tensor::Tensor(Storage::Ref storage, const Shape& shape, GgmlType type, uint64_t offset, BlockOrder order)
    : Tensor(storage, shape, contiguous_strides(shape, type), type, offset, order) {}

Tensor::Tensor(Storage::Ref storage, const Shape& shape, const Strides& strides, GgmlType type, uint64_t offset,
               BlockOrder order)
    : storage_(std::move(storage)), offset_(offset), shape_(shape), strides_(strides), type_(type), order_(order) {
  if (!storage_) throw InvalidArgument("tensor: no storage");
  generation_ = storage_->generation();
  for (int i = shape_.rank(); i < kMaxRank; ++i) strides_[static_cast<size_t>(i)] = 0;
  if (packed() && shape_.rank() > 0) strides_[static_cast<size_t>(shape_.rank() - 1)] = 0;
  validate();
}

bool Tensor::packed() const noexcept { return type_traits(type_).quantized; }

uint32_t Tensor::element_size() const noexcept { return packed() ? 0 : type_traits(type_).block_bytes; }

uint64_t Tensor::row_bytes() const { return skainet::row_bytes(type_, static_cast<uint64_t>(shape_.back())); }

uint64_t Tensor::nbytes() const { return contiguous_bytes(shape_, type_); }

void Tensor::validate() const {
  check_alive("making a view");
  const TypeTraits& t = type_traits(type_);
  const int r = rank();
  if (r > 0 && shape_.back() % t.block_elements != 0)
    throw InvalidArgument(fmt::format("tensor {}: innermost dimension {} is not a whole number of {}-element {} blocks",
                                      shape_.to_string(), shape_.back(), t.block_elements, t.name));
  if (!t.quantized) {
    const auto base = reinterpret_cast<uintptr_t>(storage_->bytes()) + offset_;
    bool aligned = base % t.block_bytes == 0;
    for (int i = 0; i < r; ++i) aligned = aligned && strides_[static_cast<size_t>(i)] % t.block_bytes == 0;
    if (!aligned)
      throw InvalidArgument(fmt::format("tensor {} {}: offset {} or strides are not multiples of the {}-byte element",
                                        t.name, shape_.to_string(), offset_, t.block_bytes));
  }
  if (numel() == 0) {
    if (offset_ > storage_->size())
      throw InvalidArgument(
          fmt::format("tensor offset {} beyond storage #{} of {} bytes", offset_, storage_->id(), storage_->size()));
    return;
  }
  uint64_t end = offset_;
  for (int i = 0; i < r; ++i) {
    const int64_t s = strides_[static_cast<size_t>(i)];
    if (s < 0) throw InvalidArgument(fmt::format("tensor {}: negative stride {}", shape_.to_string(), s));
    if (i == r - 1 && t.quantized) continue;
    end = checked_add<uint64_t>(
        end, checked_mul<uint64_t>(static_cast<uint64_t>(shape_[i] - 1), static_cast<uint64_t>(s), "tensor extent"),
        "tensor extent");
  }
  end = checked_add<uint64_t>(end, t.quantized ? row_bytes() : t.block_bytes, "tensor extent");
  if (end > storage_->size())
    throw InvalidArgument(fmt::format("tensor {} {} at offset {} needs {} bytes; storage #{} ('{}') has {}", t.name,
                                      shape_.to_string(), offset_, end, storage_->id(), storage_->origin(),
                                      storage_->size()));
}

bool Tensor::is_contiguous() const noexcept {
  if (!storage_) return false;
  try {
    const Strides c = contiguous_strides(shape_, type_);
    for (int i = 0; i < rank(); ++i)
      if (shape_[i] != 1 && strides_[static_cast<size_t>(i)] != c[static_cast<size_t>(i)]) return false;
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::string Tensor::describe() const {
  if (!storage_) return "<undefined tensor>";
  return fmt::format("{}{} @ storage #{}+{} ('{}')", type_name(type_), shape_.to_string(), storage_->id(), offset_,
                     storage_->origin());
}

bool Tensor::alive() const noexcept { return storage_ && storage_->alive() && storage_->generation() == generation_; }

void Tensor::check_alive(std::string_view action) const {
  if (!storage_) throw InvalidArgument(fmt::format("{}: undefined tensor", action));
  storage_->check_alive(generation_, action);
}

std::byte* Tensor::checked_bytes(size_t esize, bool write) const {
  check_alive(write ? "writing a tensor" : "reading a tensor");
  if (storage_->symbolic())
    throw InvalidArgument(fmt::format("{} is a recorded value (shapes only): it has no bytes to {}", describe(),
                                      write ? "write" : "read"));
  if (esize != 0 && element_size() != esize)
    throw InvalidArgument(fmt::format("typed access of {}-byte elements to {}", esize, describe()));
  if (write && !storage_->writable())
    throw InvalidArgument(fmt::format("writing to read-only {} ({})", describe(), domain_name(storage_->domain())));
  return storage_->bytes() + offset_;
}

Tensor Tensor::narrow(int dim, int64_t start, int64_t length) const {
  check_alive("narrowing a tensor");
  check_dim(*this, dim, "narrow");
  if (start < 0 || length < 0 || start > shape_[dim] || length > shape_[dim] - start)
    throw InvalidArgument(fmt::format("narrow({}, {}, {}) out of range for {}", dim, start, length, describe()));
  const TypeTraits& t = type_traits(type_);
  // A kernel-feed order splits between its row groups only (a fused weight's parts, e.g. Phi-3's
  // attn_qkv): the view is then itself whole groups, plus the row-major tail when it reaches the end.
  if (order_ != BlockOrder::RowMajor &&
      (dim != 0 || start % kInterleaveRows != 0 || (length % kInterleaveRows != 0 && start + length != shape_[0])))
    throw InvalidArgument(fmt::format("narrow({}, {}, {}) of {} in a kernel-feed block order: only whole {}-row groups",
                                      dim, start, length, describe(), kInterleaveRows));
  Tensor v = *this;
  v.shape_ = shape_.with(dim, length);
  if (t.quantized && dim == rank() - 1) {
    if (start % t.block_elements != 0 || length % t.block_elements != 0)
      throw InvalidArgument(
          fmt::format("narrow({}, {}, {}) of {}: a packed row splits only at {}-element block boundaries", dim, start,
                      length, describe(), t.block_elements));
    v.offset_ += static_cast<uint64_t>(start / t.block_elements) * t.block_bytes;
  } else {
    v.offset_ += static_cast<uint64_t>(start) * static_cast<uint64_t>(strides_[static_cast<size_t>(dim)]);
  }
  return v;
}

Tensor Tensor::select(int dim, int64_t index) const {
  check_dim(*this, dim, "select");
  if (packed() && dim == rank() - 1) throw InvalidArgument(fmt::format("select inside a packed row of {}", describe()));
  Tensor v = narrow(dim, index, 1);
  if (index >= shape_[dim])
    throw InvalidArgument(fmt::format("select({}, {}) out of range for {}", dim, index, describe()));
  std::array<int64_t, kMaxRank> d{};
  Strides s{};
  int r = 0;
  for (int i = 0; i < rank(); ++i) {
    if (i == dim) continue;
    d[static_cast<size_t>(r)] = shape_[i];
    s[static_cast<size_t>(r++)] = strides_[static_cast<size_t>(i)];
  }
  v.shape_ = Shape::of(std::span<const int64_t>(d.data(), static_cast<size_t>(r)));
  v.strides_ = s;
  return v;
}

Tensor Tensor::transpose(int d0, int d1) const {
  check_alive("transposing a tensor");
  check_dim(*this, d0, "transpose");
  check_dim(*this, d1, "transpose");
  if (packed()) throw InvalidArgument(fmt::format("transpose of packed {}: dequantize it first", describe()));
  Tensor v = *this;
  std::array<int64_t, kMaxRank> d{};
  for (int i = 0; i < rank(); ++i) d[static_cast<size_t>(i)] = shape_[i];
  std::swap(d[static_cast<size_t>(d0)], d[static_cast<size_t>(d1)]);
  std::swap(v.strides_[static_cast<size_t>(d0)], v.strides_[static_cast<size_t>(d1)]);
  v.shape_ = Shape::of(std::span<const int64_t>(d.data(), static_cast<size_t>(rank())));
  return v;
}

Tensor Tensor::reshape(const Shape& shape) const {
  check_alive("reshaping a tensor");
  if (shape.numel() != numel())
    throw InvalidArgument(fmt::format("reshape of {} to {}: element counts differ", describe(), shape.to_string()));
  if (!is_contiguous()) throw InvalidArgument(fmt::format("reshape of non-contiguous {}: copy it first", describe()));
  return Tensor(storage_, shape, type_, offset_, order_);
}

}  // namespace skainet
