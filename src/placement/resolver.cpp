#include <algorithm>

#include <fmt/format.h>

#include "skainet/compute/kernels.hpp"
#include "skainet/model/placement.hpp"

namespace skainet::placement {
namespace {

uint64_t rows_of(const gguf::TensorInfo& info) {
  uint64_t rows = 1;
  for (size_t i = 1; i < info.shape.size(); ++i) rows = checked_mul(rows, info.shape[i], "tensor rows");
  return rows;
}

uint64_t bytes_as(const gguf::TensorInfo& info, GgmlType type) {
  if (info.shape.empty()) return 0;
  try {
    return checked_mul(row_bytes(type, info.shape[0]), rows_of(info), "tensor bytes");
  } catch (const InvalidArgument& e) {
    throw PlacementError(fmt::format("tensor '{}': cannot hold it as {}: {}", info.name, type_name(type), e.message()));
  }
}

// Whether the ops that use a tensor of this role can read `type` in `order`.
bool readable(TensorRole role, GgmlType type, BlockOrder order, const Platform& platform) {
  switch (role) {
    case TensorRole::Vector: return type == GgmlType::F32 && order == BlockOrder::RowMajor;
    case TensorRole::Embedding: return platform.can_dequantize(type) && order == BlockOrder::RowMajor;
    case TensorRole::MatmulWeight: return platform.matmul_reads(type, order);
  }
  return false;
}

std::string blow_up(const gguf::TensorInfo& info) {
  const uint64_t dense = checked_mul<uint64_t>(info.elements(), 4, "dequantized bytes");
  return fmt::format("dequantizing would hold {} instead of {} ({:.1f}x)", base::format_bytes(dense),
                     base::format_bytes(info.bytes), info.bytes ? static_cast<double>(dense) / info.bytes : 0.0);
}

// A copy's domain: dedicated pages from the profile's off-heap threshold on, the heap below it.
void place_copy(Decision& d, PlacementReason reason, const MemoryProfile& profile, const Platform& platform) {
  d.reason = reason;
  if (d.spec.bytes >= profile.off_heap_threshold) {
    d.spec.domain = MemoryDomain::HostPages;
    d.spec.alignment = static_cast<uint32_t>(platform.page_size);
  } else {
    d.spec.domain = MemoryDomain::HostHeap;
    d.spec.alignment = static_cast<uint32_t>(kStorageAlignment);
  }
}

}  // namespace

std::pair<WeightForm, FormReason> resolve_form(const gguf::TensorInfo& info, const MemoryProfile& profile,
                                               const Platform& platform) {
  const TensorRole role = role_of(info);
  WeightForm form;
  form.residency = profile.residency;
  const bool packed = type_traits(info.type).quantized;
  if (readable(role, info.type, BlockOrder::RowMajor, platform)) {
    // A kernel-feed order interleaves rows across a whole 2-D weight; an expert stack (3-D) stays in
    // row order, so each expert's matrix is a plain view.
    if (role == TensorRole::MatmulWeight && info.shape.size() == 2 && profile.prefer_kernel_feed &&
        platform.kernel_feed_order(info.type)) {
      form.order = WeightOrder::KernelFeed;
      return {form, FormReason::RepackedForKernel};
    }
    return {form, packed ? FormReason::KernelReadsEncoding : FormReason::DenseAsStored};
  }
  if (!platform.can_dequantize(info.type))
    throw PlacementError(fmt::format("tensor '{}': no kernel reads {} and there is no dequantizer for it", info.name,
                                     type_name(info.type)));
  if (role != TensorRole::Vector && profile.strict)
    throw PlacementError(fmt::format("tensor '{}': no kernel on this machine reads {}; {}; profile '{}' refuses to",
                                     info.name, type_name(info.type), blow_up(info), profile.name));
  form.encoding = EncodingRequest::DequantizeToF32;
  form.requantize_to = GgmlType::F32;
  return {form, role == TensorRole::Vector ? FormReason::VectorNeedsF32 : FormReason::NoKernelDequantized};
}

Decision resolve_allocation(const gguf::TensorInfo& info, const WeightForm& form, FormReason form_reason,
                            const FileFacts& file, const MemoryProfile& profile, const Platform& platform) {
  Decision d;
  d.tensor = info.name;
  d.role = role_of(info);
  d.file_type = info.type;
  d.shape = info.shape;
  d.file_offset = info.file_offset;
  d.file_bytes = info.bytes;
  d.form = form;
  d.form_reason = form_reason;
  d.off_heap_threshold = profile.off_heap_threshold;

  switch (form.encoding) {
    case EncodingRequest::KeepAsStored: d.held_type = info.type; break;
    case EncodingRequest::DequantizeToF32: d.held_type = GgmlType::F32; break;
    case EncodingRequest::Requantize: d.held_type = form.requantize_to; break;
  }
  if (d.held_type != info.type && !platform.can_dequantize(info.type))
    throw PlacementError(fmt::format("tensor '{}': form '{}' needs {} decoded, and there is no dequantizer for it",
                                     info.name, form.to_string(), type_name(info.type)));
  if (form.encoding == EncodingRequest::Requantize && !kernels::ref::has_reference(d.held_type))
    throw PlacementError(
        fmt::format("tensor '{}': cannot requantize to {}: no quantizer for it", info.name, type_name(d.held_type)));
  if (form.order == WeightOrder::KernelFeed) {
    const auto order = platform.kernel_feed_order(d.held_type);
    if (!order)
      throw PlacementError(fmt::format("tensor '{}': no kernel-feed order exists for {} on this machine", info.name,
                                       type_name(d.held_type)));
    d.held_order = *order;
  }
  if (!readable(d.role, d.held_type, d.held_order, platform))
    throw PlacementError(fmt::format("tensor '{}' ({}): no kernel reads it as {} in {} order (form '{}')", info.name,
                                     role_name(d.role), type_name(d.held_type),
                                     d.held_order == BlockOrder::RowMajor ? "file" : "kernel-feed", form.to_string()));

  const bool file_bytes = d.held_type == info.type && d.held_order == BlockOrder::RowMajor;
  d.spec.bytes = file_bytes ? info.bytes : bytes_as(info, d.held_type);
  d.spec.mutable_ = false;

  // Mapping needs all four: the form asks it, the platform can map, the file fits the address space,
  // and the bytes held are the file's (a kernel reading them was checked above).
  std::optional<PlacementReason> copy;
  if (d.held_type != info.type)
    copy = form.encoding == EncodingRequest::Requantize ? PlacementReason::CopyRequantized
                                                        : PlacementReason::CopyDequantized;
  else if (d.held_order != BlockOrder::RowMajor)
    copy = PlacementReason::CopyRepacked;
  else if (form.residency == WeightResidency::Heap)
    copy = PlacementReason::FormAsksHeap;
  else if (!platform.can_map)
    copy = PlacementReason::PlatformCannotMap;
  else if (file.size > platform.max_map_bytes)
    copy = PlacementReason::FileTooLargeToMap;

  if (!copy) {
    d.reason = PlacementReason::MappedFileBytes;
    d.spec.domain = MemoryDomain::MappedFile;
    d.spec.alignment = file.alignment;
    return d;
  }
  place_copy(d, *copy, profile, platform);
  return d;
}

void copy_small_amid_copies(std::vector<Decision>& decisions, const MemoryProfile& profile, const Platform& platform) {
  std::vector<const Decision*> copies;  // file ranges the loader reads once and drops, by offset
  for (const Decision& d : decisions)
    if (d.spec.domain != MemoryDomain::MappedFile) copies.push_back(&d);
  if (copies.empty()) return;
  std::sort(copies.begin(), copies.end(),
            [](const Decision* a, const Decision* b) { return a->file_offset < b->file_offset; });
  const uint64_t span = platform.fault_span;
  // Whether a copied tensor's bytes come within `span` of [begin, end).
  const auto near_a_copy = [&](uint64_t begin, uint64_t end) {
    const uint64_t lo = begin > span ? begin - span : 0, hi = end + span;
    auto it = std::lower_bound(copies.begin(), copies.end(), lo,
                               [](const Decision* c, uint64_t at) { return c->file_offset + c->file_bytes <= at; });
    return it != copies.end() && (*it)->file_offset < hi;
  };
  for (Decision& d : decisions) {
    if (d.spec.domain != MemoryDomain::MappedFile || d.decided_by == DecidedBy::PerTensorOverride) continue;
    if (d.file_bytes >= span || !near_a_copy(d.file_offset, d.file_offset + d.file_bytes)) continue;
    place_copy(d, PlacementReason::CopyAmidCopies, profile, platform);
  }
}

Decision decide(const gguf::TensorInfo& info, const FileFacts& file, const MemoryProfile& profile,
                const Platform& platform, const FormOverrides& overrides) {
  try {
    if (overrides.weight_form_for) {
      if (auto form = overrides.weight_form_for(info.name)) {
        Decision d = resolve_allocation(info, *form, FormReason::UserForm, file, profile, platform);
        d.decided_by = DecidedBy::PerTensorOverride;
        return d;
      }
    }
    for (size_t i = 0; i < overrides.per_tensor.size(); ++i) {
      const TensorOverride& o = overrides.per_tensor[i];
      if (!o.matches(info.name)) continue;
      Decision d = resolve_allocation(info, o.form, FormReason::UserForm, file, profile, platform);
      d.decided_by = DecidedBy::PerTensorOverride;
      d.override_index = static_cast<int>(i);
      return d;
    }
    auto [form, reason] = resolve_form(info, profile, platform);
    if (!overrides.uniform) return resolve_allocation(info, form, reason, file, profile, platform);

    WeightForm uniform = *overrides.uniform;
    if (role_of(info) == TensorRole::Vector) {
      form.residency = uniform.residency;  // norms keep their F32 encoding
      uniform = form;
    } else {
      reason = FormReason::UserForm;
      const GgmlType held = uniform.encoding == EncodingRequest::KeepAsStored      ? info.type
                            : uniform.encoding == EncodingRequest::DequantizeToF32 ? GgmlType::F32
                                                                                   : uniform.requantize_to;
      if (uniform.order == WeightOrder::KernelFeed && !platform.kernel_feed_order(held))
        uniform.order = WeightOrder::AsStored;
    }
    Decision d = resolve_allocation(info, uniform, reason, file, profile, platform);
    d.decided_by = DecidedBy::UniformForm;
    return d;
  } catch (PlacementError& e) {
    if (e.message().find(info.name) == std::string::npos) e.add_context(fmt::format("tensor '{}'", info.name));
    throw;
  }
}

}  // namespace skainet::placement
