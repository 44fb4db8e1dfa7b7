// Re-encoding a model, like llama-quantize: every tensor is planned first (so an impossible request
// fails before anything is written), then streamed: the input tensor is mapped, decoded row by row
// into per-thread scratch, encoded into the writer's buffer, and its pages released.
#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "convert/parallel.hpp"
#include "skainet/model/convert.hpp"
#include "skainet/compute/kernels.hpp"

namespace skainet::convert {
namespace {

// The block count for the mix rules: <arch>.block_count when present, else one more than the
// highest "blk.N." in the tensor names.
uint32_t layer_count(const gguf::Header& h) {
  if (const gguf::Value* arch = h.find("general.architecture");
      arch != nullptr && arch->type == gguf::ValueType::String)
    if (auto n = h.find_u32(arch::key(std::get<std::string>(arch->scalar), arch::Key::BlockCount))) return *n;
  uint32_t n = 0;
  for (const gguf::TensorInfo& t : h.tensors)
    if (const auto layer = arch::layer_of(t.name)) n = std::max(n, *layer + 1);
  return n;
}

// Query heads per KV head (llama.cpp's n_gqa), 1 when the header does not say.
// The mixture's expert count ({arch}.expert_count; 0 without).
uint32_t experts_of(const gguf::Header& h) {
  const gguf::Value* arch = h.find("general.architecture");
  if (arch == nullptr || arch->type != gguf::ValueType::String) return 0;
  return h.find_u32(arch::key(std::get<std::string>(arch->scalar), arch::Key::ExpertCount)).value_or(0);
}

uint32_t gqa_of(const gguf::Header& h) {
  const gguf::Value* arch = h.find("general.architecture");
  if (arch == nullptr || arch->type != gguf::ValueType::String) return 1;
  const std::string a = std::get<std::string>(arch->scalar);
  const auto heads = h.find_u32(arch::key(a, arch::Key::HeadCount));
  const auto kv = h.find_u32(arch::key(a, arch::Key::HeadCountKv));
  return heads && kv && *kv > 0 ? *heads / *kv : 1;
}

bool decodable(GgmlType t) { return kernels::ref::has_reference(t); }

// Every value written must be finite: a NaN in the input, or a finite input beyond the target's
// range (3e38 overflows an F16 block scale to infinity), would otherwise be written silently.
void check_output(const std::filesystem::path& in, const gguf::TensorInfo& t, const TensorChoice& c,
                  const std::byte* source, std::span<const std::byte> dst, unsigned threads) {
  if (!decodable(c.type) || t.shape.empty()) return;
  const uint64_t row = t.shape[0], rows = t.elements() / row;
  std::optional<NonFiniteValue> first = first_non_finite(c.type, dst.data(), row, rows, threads);
  if (!first) return;
  first->tensor = t.name;
  std::string input = "not decodable";
  if (decodable(t.type)) {
    // The block's largest input magnitude: the value that overflowed the block's scale, or the NaN.
    std::vector<float> values(static_cast<size_t>(row));
    const uint64_t r = first->element / row, be = type_traits(c.type).block_elements;
    kernels::ref::dequantize_row(t.type, source + r * row_bytes(t.type, row), values.data(), static_cast<int64_t>(row));
    const uint64_t lo = (first->element % row) / be * be, hi = std::min(row, lo + be);
    float largest = values[static_cast<size_t>(lo)];
    for (uint64_t i = lo; i < hi; ++i)
      if (!std::isfinite(values[static_cast<size_t>(i)]) ||
          std::fabs(values[static_cast<size_t>(i)]) > std::fabs(largest)) {
        largest = values[static_cast<size_t>(i)];
        if (!std::isfinite(largest)) break;
      }
    input = fmt::format("{}", largest);
  }
  throw NonFiniteError(
      fmt::format("{}: {} when written as {}; the largest input magnitude in that block is {} ({}): the "
                  "input holds a non-finite value or one out of {}'s range",
                  in.string(), describe(*first), type_name(c.type), input, type_name(t.type), type_name(c.type)));
}

}  // namespace

Report quantize(const std::filesystem::path& in, const std::filesystem::path& out, const QuantizeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  // The output would be renamed over the input it is still being read from.
  // equivalent() compares st_dev and st_ino after following links; an output that does not exist
  // yet is a different file.
  std::error_code ec;
  if (std::filesystem::equivalent(in, out, ec) && !ec)
    throw InvalidArgument(
        fmt::format("quantize: output {} is the input file {} (same device and inode); write to another path",
                    out.string(), in.string()));
  const gguf::Header header = gguf::read_header(in);
  const uint32_t n_layers = layer_count(header), n_gqa = gqa_of(header), n_experts = experts_of(header);
  const bool tied = header.find_tensor(arch::role_name(arch::Role::Output)) == nullptr;

  Report report;
  report.output = out;
  report.bytes_read_from = header.file_size;
  for (const gguf::TensorInfo& t : header.tensors) {
    TensorChoice c = choose_type(options.scheme, t.name, t.shape, t.type, n_layers, n_gqa, tied, n_experts);
    if (c.type != t.type && !decodable(t.type))
      throw InvalidArgument(fmt::format(
          "{}: tensor '{}' is {}, which we cannot decode (no reference dequantizer); cannot re-encode it as {}",
          in.string(), t.name, type_name(t.type), type_name(c.type)));
    report.parameters += t.elements();
    report.tensors.push_back(std::move(c));
  }

  gguf::Writer writer(out, header.alignment);
  for (const gguf::KeyValue& kv : header.metadata)
    if (kv.key != "general.alignment") writer.set(kv.key, kv.value);
  writer.set("general.file_type", gguf::Value::u32(static_cast<uint32_t>(options.scheme.file_type)));
  writer.set("general.quantization_version", gguf::Value::u32(2));
  for (const TensorChoice& c : report.tensors) writer.add_tensor(c.name, c.shape, c.type);

  const unsigned threads = detail::resolve_threads(options.threads);
  std::optional<base::Progress> progress;
  if (options.progress) progress.emplace("quantize", writer.data_bytes());

  report.bytes_written = writer.write(
      [&](size_t index, std::span<std::byte> dst) {
        const gguf::TensorInfo& t = header.tensors[index];
        const TensorChoice& c = report.tensors[index];
        base::FileMapping source(in, t.file_offset, t.bytes);
        if (c.type == t.type) {
          std::memcpy(dst.data(), source.data(), t.bytes);
        } else {
          const uint64_t row = t.shape[0];
          const uint64_t rows = t.elements() / row;
          const uint64_t in_row = row_bytes(t.type, row), out_row = row_bytes(c.type, row);
          detail::parallel_for(rows, threads, std::max<uint64_t>(1, 65536 / row), [&](uint64_t begin, uint64_t end) {
            std::vector<float> buffer(c.type == GgmlType::F32 ? 0 : row);
            for (uint64_t r = begin; r < end; ++r) {
              std::byte* target = dst.data() + r * out_row;
              float* values = c.type == GgmlType::F32 ? reinterpret_cast<float*>(target) : buffer.data();
              kernels::ref::dequantize_row(t.type, source.data() + r * in_row, values, static_cast<int64_t>(row));
              if (c.type != GgmlType::F32)
                kernels::ref::quantize_row(c.type, values, target, static_cast<int64_t>(row));
            }
          });
        }
        check_output(in, t, c, source.data(), dst, threads);
        source.release_pages(0, t.bytes);
      },
      progress ? &*progress : nullptr);
  if (progress) progress->finish();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace skainet::convert
