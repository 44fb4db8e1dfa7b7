#include <fmt/format.h>

#include "skainet/model/placement.hpp"

namespace skainet::placement {
namespace {

std::string_view order_words(BlockOrder o) { return o == BlockOrder::RowMajor ? "file order" : "16-row interleave"; }

std::string who_decided(const Decision& d) {
  switch (d.decided_by) {
    case DecidedBy::PerTensorOverride:
      return d.override_index >= 0 ? fmt::format("--override-tensor #{}", d.override_index + 1) : "weight_form_for()";
    case DecidedBy::UniformForm: return "--weight-form";
    case DecidedBy::Resolver: return "the profile";
  }
  return "?";
}

std::string why(const Decision& d) {
  const auto held = type_name(d.held_type);
  switch (d.reason) {
    case PlacementReason::MappedFileBytes:
      if (d.role == TensorRole::Embedding) return fmt::format("file bytes, rows of {} decoded on lookup", held);
      if (d.role == TensorRole::Vector) return "file bytes, read in place as F32";
      return fmt::format("file bytes, kernel reads {} in file order", held);
    case PlacementReason::FormAsksHeap: return fmt::format("{} asks for process memory", who_decided(d));
    case PlacementReason::PlatformCannotMap: return "this platform cannot map files";
    case PlacementReason::FileTooLargeToMap: return "the file is larger than this process can map";
    case PlacementReason::CopyDequantized: {
      const char* cause = d.form_reason == FormReason::NoKernelDequantized ? "no kernel reads it"
                          : d.form_reason == FormReason::VectorNeedsF32    ? "norms are read as F32"
                                                                           : "asked by the form";
      return fmt::format("dequantized to F32 ({}; {} -> {}); a copy cannot be paged from the file", cause,
                         base::format_bytes(d.file_bytes), base::format_bytes(d.spec.bytes));
    }
    case PlacementReason::CopyRequantized:
      return fmt::format("requantized to {} ({} -> {}); a copy cannot be paged from the file", held,
                         base::format_bytes(d.file_bytes), base::format_bytes(d.spec.bytes));
    case PlacementReason::CopyRepacked:
      return fmt::format(
          "repacked to {} for the kernel (the same bytes, file pages dropped after the copy); a copy "
          "cannot be paged from the file",
          order_words(d.held_order));
    case PlacementReason::CopyAmidCopies:
      return "small, beside copied weights: mapped, its first touch would bring their file pages back; a copy "
             "costs only its size";
  }
  return "?";
}

}  // namespace

std::string explain(const Decision& d) {
  return fmt::format("{}  {} -> {} {} ({})", d.tensor, type_name(d.file_type), domain_name(d.spec.domain),
                     base::format_bytes(d.spec.bytes), why(d));
}

WeightForm held_form(const Decision& d) {
  WeightForm held = d.form;
  held.residency = d.spec.domain == MemoryDomain::MappedFile ? WeightResidency::Mapped : WeightResidency::Heap;
  held.order = d.held_order == BlockOrder::RowMajor ? WeightOrder::AsStored : WeightOrder::KernelFeed;
  return held;
}

bool is_pinned(const Decision& d) noexcept { return d.spec.domain != MemoryDomain::MappedFile; }

std::string_view held_how(const Decision& d) noexcept {
  switch (d.reason) {
    case PlacementReason::MappedFileBytes: return "mapped";
    case PlacementReason::FormAsksHeap: return "copy asked for";
    case PlacementReason::PlatformCannotMap:
    case PlacementReason::FileTooLargeToMap: return "copy (cannot map)";
    case PlacementReason::CopyDequantized: return "dequantized copy";
    case PlacementReason::CopyRequantized: return "requantized copy";
    case PlacementReason::CopyRepacked: return "repacked copy";
    case PlacementReason::CopyAmidCopies: return "small copy beside copies";
  }
  return "?";
}

std::string plain_words(const Decision& d) {
  const auto held = type_name(d.held_type);
  if (!is_pinned(d)) {
    const std::string how = d.role == TensorRole::Embedding ? fmt::format("rows of {} decoded on lookup", held)
                            : d.role == TensorRole::Vector  ? std::string("read in place as F32")
                                                            : fmt::format("the kernel reads {} in file order", held);
    uint32_t experts = 0;
    for (const ExpertSlice& e : d.experts) experts += e.pinned;
    if (experts > 0)  // a mapped stack whose pinned experts' pages were made anonymous
      return fmt::format(
          "mapped from the file, {} of {} experts pinned ({} in anonymous pages), the rest evictable: {}", experts,
          d.experts.size(), base::format_bytes(pinned_bytes(d)), how);
    return "mapped from the file (evictable): " + how;
  }
  std::string how;
  switch (d.reason) {
    case PlacementReason::MappedFileBytes: break;  // not pinned
    case PlacementReason::FormAsksHeap: how = fmt::format("{} asks for process memory", who_decided(d)); break;
    case PlacementReason::PlatformCannotMap: how = "this platform cannot map files"; break;
    case PlacementReason::FileTooLargeToMap: how = "the file is larger than this process can map"; break;
    case PlacementReason::CopyDequantized:
    case PlacementReason::CopyRequantized:
    case PlacementReason::CopyRepacked: how = why(d); break;
    case PlacementReason::CopyAmidCopies:
      how = "small, beside copied weights whose dropped file pages a mapped read of it would bring back";
      break;
  }
  // why() ends the copies' texts with the consequence that "pinned" already says.
  constexpr std::string_view kTail = "; a copy cannot be paged from the file";
  if (how.ends_with(kTail)) how.resize(how.size() - kTail.size());
  return "copied into memory (pinned): " + how;
}

std::string explain_long(const Decision& d, const MemoryProfile& profile, const Platform& platform) {
  std::string shape;
  for (size_t i = 0; i < d.shape.size(); ++i) shape += (i ? " x " : "") + std::to_string(d.shape[i]);
  std::string domain_rule;
  if (d.spec.domain == MemoryDomain::MappedFile)
    domain_rule = "served from the file mapping";
  else
    domain_rule = fmt::format("{} {} the off-heap threshold of {} -> {}", base::format_bytes(d.spec.bytes),
                              d.spec.bytes >= d.off_heap_threshold ? "is at or above" : "is below",
                              base::format_bytes(d.off_heap_threshold),
                              d.spec.domain == MemoryDomain::HostPages ? "dedicated pages" : "heap");
  // The form line is the form as held, the one the placement line describes; what was asked follows.
  const WeightForm held = held_form(d);
  std::string asked;
  if (held != d.form) {
    std::string differs;
    if (held.residency != d.form.residency)
      differs = fmt::format("held in memory, not mapped: {}", placement_reason_name(d.reason));
    if (held.order != d.form.order)
      differs += fmt::format("{}no kernel-feed order for {} here: file order", differs.empty() ? "" : "; ",
                             type_name(d.held_type));
    asked = fmt::format("asked       {} ({})\n", d.form.to_string(), differs);
  }
  return fmt::format(
      "tensor      {}\n"
      "in short    {}\n"
      "role        {}\n"
      "file        {} [{}], {} at offset {}\n"
      "form        {} (decided by {}: {})\n"
      "{}"
      "held as     {} in {}, {}\n"
      "placement   {} ({})\n"
      "domain      {}\n"
      "alignment   {} bytes, {}\n"
      "profile     {}; platform: {}, mapping {}\n",
      d.tensor, plain_words(d), role_name(d.role), type_name(d.file_type), shape, base::format_bytes(d.file_bytes),
      d.file_offset, held.to_string(), decided_by_name(d.decided_by), form_reason_name(d.form_reason), asked,
      type_name(d.held_type), order_words(d.held_order), base::format_bytes(d.spec.bytes),
      placement_reason_name(d.reason), why(d), domain_rule, d.spec.alignment, d.spec.mutable_ ? "mutable" : "read-only",
      profile.name, platform.isa_summary(), platform.can_map ? "available" : "unavailable");
}

std::string_view form_reason_name(FormReason r) noexcept {
  switch (r) {
    case FormReason::DenseAsStored: return "dense-as-stored";
    case FormReason::KernelReadsEncoding: return "kernel-reads-encoding";
    case FormReason::RepackedForKernel: return "repacked-for-kernel";
    case FormReason::NoKernelDequantized: return "no-kernel-dequantized";
    case FormReason::VectorNeedsF32: return "vector-needs-f32";
    case FormReason::UserForm: return "user-form";
  }
  return "?";
}

std::string_view decided_by_name(DecidedBy d) noexcept {
  switch (d) {
    case DecidedBy::Resolver: return "resolver";
    case DecidedBy::UniformForm: return "uniform-form";
    case DecidedBy::PerTensorOverride: return "per-tensor-override";
  }
  return "?";
}

std::string_view placement_reason_name(PlacementReason r) noexcept {
  switch (r) {
    case PlacementReason::MappedFileBytes: return "mapped-file-bytes";
    case PlacementReason::FormAsksHeap: return "form-asks-heap";
    case PlacementReason::PlatformCannotMap: return "platform-cannot-map";
    case PlacementReason::FileTooLargeToMap: return "file-too-large-to-map";
    case PlacementReason::CopyDequantized: return "copy-dequantized";
    case PlacementReason::CopyRequantized: return "copy-requantized";
    case PlacementReason::CopyRepacked: return "copy-repacked";
    case PlacementReason::CopyAmidCopies: return "copy-amid-copies";
  }
  return "?";
}

}  // namespace skainet::placement
