#include <algorithm>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "skainet/compute/kernels.hpp"
#include "skainet/compute/memory.hpp"

namespace skainet::memory {
namespace {

bool dense_float(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

void fill(const Tensor& t, float value) {
  std::byte* p = t.mutable_bytes();
  const int64_t n = t.numel();
  switch (t.type()) {
    case GgmlType::F32:
      for (int64_t i = 0; i < n; ++i) std::memcpy(p + 4 * i, &value, 4);
      break;
    case GgmlType::F16: {
      const uint16_t h = kernels::ref::fp32_to_fp16(value);
      for (int64_t i = 0; i < n; ++i) std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    default: {
      const uint16_t h = kernels::ref::fp32_to_bf16(value);
      for (int64_t i = 0; i < n; ++i) std::memcpy(p + 2 * i, &h, 2);
      break;
    }
  }
}

}  // namespace

ExecutionContext::ExecutionContext(int threads, const kernels::KernelTable& table) : pool_(threads), table_(&table) {}

void ExecutionContext::AlignedFree::operator()(std::byte* p) const noexcept {
  ::operator delete (p, std::align_val_t{64});
}

void ExecutionContext::grow_scratch(size_t bytes) {
  scratch_.reset();  // the old buffer goes first: peak memory is the new size, not both
  scratch_stats_.held = 0;
  scratch_.reset(static_cast<std::byte*>(::operator new (bytes, std::align_val_t{64})));
  scratch_stats_.held = bytes;
}

std::span<std::byte> ExecutionContext::scratch(size_t bytes) {
  scratch_stats_.peak = std::max(scratch_stats_.peak, bytes);
  if (bytes > scratch_stats_.held) {
    grow_scratch(bytes);
    scratch_stats_.growths++;
  }
  return {scratch_.get(), bytes};
}

void ExecutionContext::reserve_scratch(size_t bytes) {
  scratch_stats_.reserved = bytes;
  if (bytes > scratch_stats_.held) grow_scratch(bytes);
}

Tensor ExecutionContext::empty(const Shape& shape, GgmlType type, std::string_view origin) {
  return active_->allocate(shape, type, origin);
}

Tensor ExecutionContext::zeros(const Shape& shape, GgmlType type) {
  Tensor t = active_->allocate(shape, type, "zeros");
  // All-zero bytes are 0.0 in every float type and every block format (zero scales).
  std::memset(t.mutable_bytes(), 0, static_cast<size_t>(t.nbytes()));
  return t;
}

Tensor ExecutionContext::ones(const Shape& shape, GgmlType type) { return full(shape, 1.0f, type); }

Tensor ExecutionContext::full(const Shape& shape, float value, GgmlType type) {
  if (!dense_float(type))
    throw InvalidArgument(fmt::format("full{}: {} is not a dense float type", shape.to_string(), type_name(type)));
  Tensor t = active_->allocate(shape, type, "full");
  fill(t, value);
  return t;
}

Tensor ExecutionContext::from_floats(std::span<const float> values, const Shape& shape, GgmlType type) {
  if (static_cast<int64_t>(values.size()) != shape.numel())
    throw InvalidArgument(fmt::format("from_floats: {} values for shape {} ({} elements)", values.size(),
                                      shape.to_string(), shape.numel()));
  if (!dense_float(type) && !kernels::ref::has_reference(type))
    throw InvalidArgument(fmt::format("from_floats: no reference quantizer for {}", type_name(type)));
  Tensor t = active_->allocate(shape, type, "from_floats");
  // The values as a borrowed F32 view of the same shape; the copy kernel converts or quantizes.
  Tensor src(Storage::borrow(const_cast<float*>(values.data()), values.size() * sizeof(float), false, "from_floats"),
             shape, GgmlType::F32);
  t.check_alive("from_floats");
  table_->copy(src, t);
  return t;
}

}  // namespace skainet::memory
