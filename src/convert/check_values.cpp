// --check-tensors: every tensor decoded row by row and tested for NaN and infinity. Dequantizing
// covers the scales too: a NaN or infinite scale makes its block's values NaN or infinite.
#include <chrono>
#include <cmath>
#include <mutex>

#include <fmt/format.h>

#include "convert/parallel.hpp"
#include "skainet/model/convert.hpp"
#include "skainet/compute/kernels.hpp"

namespace skainet::convert {

std::optional<NonFiniteValue> find_non_finite(GgmlType type, const std::byte* data, uint64_t row, uint64_t begin_row,
                                              uint64_t end_row, std::vector<float>& scratch) {
  scratch.resize(static_cast<size_t>(row));
  const uint64_t stride = row_bytes(type, row);
  for (uint64_t r = begin_row; r < end_row; ++r) {
    kernels::ref::dequantize_row(type, data + r * stride, scratch.data(), static_cast<int64_t>(row));
    for (uint64_t i = 0; i < row; ++i)
      if (!std::isfinite(scratch[i])) {
        const uint64_t element = r * row + i;
        return NonFiniteValue{{}, element, element / type_traits(type).block_elements, scratch[i]};
      }
  }
  return std::nullopt;
}

std::optional<NonFiniteValue> first_non_finite(GgmlType type, const std::byte* data, uint64_t row, uint64_t rows,
                                               unsigned threads) {
  std::optional<NonFiniteValue> first;
  std::mutex m;
  detail::parallel_for(rows, detail::resolve_threads(threads), std::max<uint64_t>(1, 65536 / row),
                       [&](uint64_t begin, uint64_t end) {
                         std::vector<float> scratch;
                         auto bad = find_non_finite(type, data, row, begin, end, scratch);
                         std::lock_guard lock(m);
                         if (bad && (!first || bad->element < first->element)) first = bad;
                       });
  return first;
}

std::string describe(const NonFiniteValue& v) {
  return fmt::format("tensor '{}': element {} (block {}) is {}", v.tensor, v.element, v.block, v.value);
}

ValueCheck check_values(const gguf::Header& h, unsigned threads, size_t max_findings) {
  const auto start = std::chrono::steady_clock::now();
  ValueCheck c;
  const unsigned workers = detail::resolve_threads(threads);
  for (const gguf::TensorInfo& t : h.tensors) {
    if (t.shape.empty() || !kernels::ref::has_reference(t.type)) {  // integer tensors and undecodable types
      ++c.tensors_skipped;
      continue;
    }
    base::FileMapping map(h.path, t.file_offset, t.bytes);
    const uint64_t row = t.shape[0], rows = t.elements() / row;
    std::optional<NonFiniteValue> first = first_non_finite(t.type, map.data(), row, rows, workers);
    map.release_pages(0, t.bytes);
    ++c.tensors_checked;
    c.bytes += t.bytes;
    if (first) {
      ++c.tensors_bad;
      first->tensor = t.name;
      if (c.findings.size() < max_findings) c.findings.push_back(std::move(*first));
    }
  }
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return c;
}

std::string ValueCheck::summary() const {
  return fmt::format(
      "checked {} tensors ({}) for NaN and infinity in {:.2f} s ({} skipped: integer or undecodable types): {}",
      tensors_checked, base::format_bytes(bytes), seconds, tensors_skipped,
      ok() ? std::string("all finite") : fmt::format("{} with non-finite values", tensors_bad));
}

void ValueCheck::throw_if_bad(const std::filesystem::path& file) const {
  if (ok()) return;
  std::string message =
      fmt::format("{}: {} tensor{} hold non-finite values:", file.string(), tensors_bad, tensors_bad == 1 ? "" : "s");
  for (const auto& f : findings) message += "\n  " + describe(f);
  if (tensors_bad > findings.size())
    message += fmt::format("\n  ... and {} more tensors", tensors_bad - findings.size());
  throw NonFiniteError(message);
}

}  // namespace skainet::convert
