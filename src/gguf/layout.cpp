#include "gguf/layout.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

#include <fmt/format.h>

namespace skainet::gguf::detail {
namespace {

[[noreturn]] void fail(const Header& h, FormatErrorKind kind, const TensorInfo& t, std::string detail) {
  throw FormatError(kind,
                    fmt::format("{}: offset {}: tensor '{}': {}", h.path.string(), t.file_offset, t.name, detail));
}

uint64_t saturating_add(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}

}  // namespace

void check_layout(Header& h, bool check_bounds) {
  std::vector<uint64_t> ends(h.tensors.size());  // relative to data_offset
  for (size_t i = 0; i < h.tensors.size(); ++i) {
    TensorInfo& t = h.tensors[i];
    if (__builtin_add_overflow(h.data_offset, t.offset, &t.file_offset) ||
        __builtin_add_overflow(t.offset, t.bytes, &ends[i]) || t.file_offset + t.bytes < t.file_offset) {
      t.file_offset = h.data_offset;
      fail(h, FormatErrorKind::DataOutOfBounds, t,
           fmt::format("data offset {} + {} bytes lies beyond any possible file", t.offset, t.bytes));
    }
  }

  std::vector<size_t> order(h.tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return h.tensors[a].offset < h.tensors[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const TensorInfo& prev = h.tensors[order[k - 1]];
    const TensorInfo& t = h.tensors[order[k]];
    if (t.offset < ends[order[k - 1]])
      fail(h, FormatErrorKind::OverlappingTensors, t,
           fmt::format("data [{}, {}) overlaps tensor '{}' at [{}, {})", t.offset, ends[order[k]], prev.name,
                       prev.offset, ends[order[k - 1]]));
  }
  if (!check_bounds || h.tensors.empty()) return;

  // A writer packs tensors, each padded to the alignment, so a well-formed data section is at
  // most this long. A tensor ending past the file but within it means the file was cut short; one
  // ending beyond it was never inside any version of this file.
  uint64_t packed = 0;
  for (const TensorInfo& t : h.tensors) {
    const uint64_t padded =
        t.bytes % h.alignment == 0 ? t.bytes : saturating_add(t.bytes, h.alignment - t.bytes % h.alignment);
    packed = saturating_add(packed, padded);
  }
  const TensorInfo* first_cut = nullptr;
  for (size_t k : order) {
    const TensorInfo& t = h.tensors[k];
    const uint64_t end = t.file_offset + t.bytes;
    if (end <= h.file_size) continue;
    if (ends[k] > packed)
      fail(
          h, FormatErrorKind::DataOutOfBounds, t,
          fmt::format(
              "data [{}, {}) lies past the end of the file ({} bytes) and past where {} packed tensors could reach ({})",
              t.file_offset, end, h.file_size, h.tensors.size(), saturating_add(h.data_offset, packed)));
    if (!first_cut) first_cut = &t;
  }
  if (first_cut)
    fail(h, FormatErrorKind::Truncated, *first_cut,
         fmt::format("truncated: the file ends at byte {}, inside the data section; this tensor needs bytes [{}, {})",
                     h.file_size, first_cut->file_offset, first_cut->file_offset + first_cut->bytes));
}

}  // namespace skainet::gguf::detail
