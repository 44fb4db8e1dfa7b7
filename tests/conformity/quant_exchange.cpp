// quant_exchange: a test-only bridge between our reference kernels and outside implementations.
// It moves tensors through GGUF files so a script can feed them to gguf-py (or llama.cpp tools):
//
//   quant_exchange dequantize IN.gguf OUT.gguf        every tensor of IN, decoded to F32
//   quant_exchange quantize   IN.gguf OUT.gguf Q4_K   every F32 tensor of IN, encoded as Q4_K
//
// Names, shapes and metadata are kept. Exit status: 0 done, 1 failed, 2 bad usage.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "skainet/core/base.hpp"
#include "skainet/core/format.hpp"
#include "skainet/io/gguf.hpp"
#include "skainet/compute/kernels.hpp"

namespace {

using namespace skainet;

std::vector<std::byte> read_tensor(const base::FileReader& file, const gguf::TensorInfo& t) {
  std::vector<std::byte> data(static_cast<size_t>(t.bytes));
  file.read_at(t.file_offset, data.data(), data.size());
  return data;
}

gguf::Writer start_output(const gguf::Header& in, const std::string& out_path) {
  gguf::Writer w(out_path, in.alignment);
  for (const gguf::KeyValue& kv : in.metadata)
    if (kv.key != "general.alignment") w.set(kv.key, kv.value);
  return w;
}

// Converts `src` (rows of t.shape[0] elements of `from`) into `out` (same rows in `to`).
void convert(const gguf::TensorInfo& t, GgmlType from, GgmlType to, const std::vector<std::byte>& src,
             std::span<std::byte> out) {
  const int64_t row = static_cast<int64_t>(t.shape[0]);
  const uint64_t rows = t.elements() / t.shape[0];
  const uint64_t in_row_bytes = row_bytes(from, t.shape[0]), out_row_bytes = row_bytes(to, t.shape[0]);
  std::vector<float> f32(static_cast<size_t>(row));
  for (uint64_t r = 0; r < rows; ++r) {
    kernels::ref::dequantize_row(from, src.data() + r * in_row_bytes, f32.data(), row);
    kernels::ref::quantize_row(to, f32.data(), out.data() + r * out_row_bytes, row);
  }
}

int run(const std::string& mode, const std::string& in_path, const std::string& out_path, GgmlType target) {
  const gguf::Header in = gguf::read_header(in_path);
  const base::FileReader file(in_path);
  gguf::Writer w = start_output(in, out_path);
  std::vector<GgmlType> from, to;
  for (const gguf::TensorInfo& t : in.tensors) {
    GgmlType dst = t.type;
    if (mode == "dequantize") dst = GgmlType::F32;
    if (mode == "quantize" && t.type == GgmlType::F32) dst = target;
    if (dst != t.type && !kernels::ref::has_reference(t.type))
      throw InvalidArgument(fmt::format("tensor '{}': no reference kernel decodes {}", t.name, type_name(t.type)));
    w.add_tensor(t.name, t.shape, dst);  // checks the row length against dst's block size
    from.push_back(t.type);
    to.push_back(dst);
  }
  w.write([&](size_t i, std::span<std::byte> out) {
    const gguf::TensorInfo& t = in.tensors[i];
    const std::vector<std::byte> src = read_tensor(file, t);
    if (from[i] == to[i]) {
      std::memcpy(out.data(), src.data(), src.size());
      return;
    }
    convert(t, from[i], to[i], src, out);
  });
  std::printf("%s: %zu tensors -> %s\n", mode.c_str(), in.tensors.size(), out_path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const bool ok = (args.size() == 3 && args[0] == "dequantize") || (args.size() == 4 && args[0] == "quantize");
  if (!ok) {
    std::fprintf(stderr,
                 "usage: quant_exchange dequantize IN.gguf OUT.gguf\n"
                 "       quant_exchange quantize IN.gguf OUT.gguf TYPE\n");
    return 2;
  }
  GgmlType target = GgmlType::F32;
  if (args[0] == "quantize") {
    const auto t = skainet::parse_type_name(args[3]);
    if (!t || !skainet::kernels::ref::has_reference(*t)) {
      std::fprintf(stderr, "quant_exchange: no reference quantizer for type '%s'\n", args[3].c_str());
      return 2;
    }
    target = *t;
  }
  try {
    return run(args[0], args[1], args[2], target);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quant_exchange: %s\n", e.what());
    return 1;
  }
}
