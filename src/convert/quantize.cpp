// Re-encoding a model, like llama-quantize: every tensor is planned first (so an impossible request
// fails before anything is written), then streamed: the input tensor is mapped, decoded row by row
// into per-thread scratch, encoded into the writer's buffer, and its pages released.
#include <chrono>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "convert/parallel.hpp"
#include "skainet/convert.hpp"
#include "skainet/kernels.hpp"

namespace skainet::convert {
namespace {

// The block count for the mix rules: <arch>.block_count when present, else one more than the
// highest "blk.N." in the tensor names.
uint32_t layer_count(const gguf::Header& h) {
  if (const gguf::Value* arch = h.find("general.architecture"); arch != nullptr && arch->type == gguf::ValueType::String)
    if (auto n = h.find_u32(std::get<std::string>(arch->scalar) + ".block_count")) return *n;
  uint32_t n = 0;
  for (const gguf::TensorInfo& t : h.tensors) {
    unsigned layer = 0;
    if (std::sscanf(t.name.c_str(), "blk.%u.", &layer) == 1) n = std::max(n, layer + 1);
  }
  return n;
}

bool decodable(GgmlType t) { return kernels::ref::has_reference(t); }

}  // namespace

Report quantize(const std::filesystem::path& in, const std::filesystem::path& out, const QuantizeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const gguf::Header header = gguf::read_header(in);
  const uint32_t n_layers = layer_count(header);

  Report report;
  report.output = out;
  for (const gguf::TensorInfo& t : header.tensors) {
    TensorChoice c = choose_type(options.scheme, t.name, t.shape, t.type, n_layers);
    if (c.type != t.type && !decodable(t.type))
      throw InvalidArgument(fmt::format("{}: tensor '{}' is {}, which we cannot decode (no reference dequantizer); cannot re-encode it as {}",
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
  std::unique_ptr<base::Progress> progress;
  if (options.progress) progress = std::make_unique<base::Progress>("quantize", report.parameters);

  report.bytes_written = writer.write([&](size_t index, std::span<std::byte> dst) {
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
          if (c.type != GgmlType::F32) kernels::ref::quantize_row(c.type, values, target, static_cast<int64_t>(row));
        }
      });
    }
    source.release_pages(0, t.bytes);
    if (progress) progress->advance(t.elements());
  });
  if (progress) progress->finish();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace skainet::convert
