// Conformity of the StableHLO dequantization with the reference dequantizers, run by IREE itself:
// one GGUF holds a weight of every format (seeded values through the reference quantizer, plus rows
// of random block bytes), one module has a function per format, iree-compile builds it once and
// iree-run-module runs each function with the GGUF as its parameter file. The result must equal
// kernels::ref::dequantize_row bit for bit. Missing IREE tools fail the tests; they never skip.
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "skainet/core/blocks.hpp"
#include "skainet/io/gguf.hpp"
#include "skainet/compute/kernels.hpp"
#include "skainet/io/stablehlo.hpp"
#include "iree_tools.hpp"
#include "temp_dir.hpp"

namespace skainet::stablehlo {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kRows = 5;  // rows 0-2 quantized from floats, 3-4 random block bytes
constexpr int64_t kQuantized = 3;

struct Case {
  GgmlType type;
  int64_t cols;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {GgmlType::F32, 37},    {GgmlType::F16, 37},    {GgmlType::BF16, 37},
      {GgmlType::Q8_0, 96},   {GgmlType::Q4_0, 96},   {GgmlType::Q4_1, 96},
      {GgmlType::Q5_0, 96},   {GgmlType::Q5_1, 96},   {GgmlType::Q4_K, 512},
      {GgmlType::Q5_K, 512},  {GgmlType::Q6_K, 512},  {GgmlType::Q2_K, 512},
      {GgmlType::Q3_K, 512},  {GgmlType::IQ4_NL, 96}, {GgmlType::IQ4_XS, 512},
      {GgmlType::MXFP4, 128},  // 17-byte blocks: 4 of them make a row of whole f16s (see below)
  };
  return all;
}

// Formats whose gathered rows {2, 0} are checked too (the leading dim of the raw tensor is free).
const std::vector<GgmlType> kGathered = {GgmlType::Q5_1, GgmlType::Q5_K};
const std::vector<int64_t> kGatherRows = {2, 0};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Offsets of the f16 fields of a block: random block bytes get finite values there, so that the
// comparison is between numbers (NaN payloads are not what this test is about).
std::vector<size_t> half_fields(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0: return {offsetof(BlockQ8_0, d)};
    case GgmlType::Q4_0: return {offsetof(BlockQ4_0, d)};
    case GgmlType::Q4_1: return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
    case GgmlType::Q5_0: return {offsetof(BlockQ5_0, d)};
    case GgmlType::Q5_1: return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
    case GgmlType::Q4_K: return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case GgmlType::Q5_K: return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
    case GgmlType::Q6_K: return {offsetof(BlockQ6_K, d)};
    case GgmlType::Q2_K: return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case GgmlType::Q3_K: return {offsetof(BlockQ3_K, d)};
    case GgmlType::IQ4_NL: return {offsetof(BlockIQ4_NL, d)};
    case GgmlType::IQ4_XS: return {offsetof(BlockIQ4_XS, d)};
    default: return {};
  }
}

// Seeded floats with the shapes that stress a quantizer, 32 at a time: ordinary, large, all zero,
// tiny (f16-subnormal scales), one-signed with an outlier.
std::vector<float> source_row(std::mt19937& rng, int64_t row, int64_t cols) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(cols));
  for (int64_t i = 0; i < cols; ++i) {
    const int64_t chunk = i / 32 + row;
    const float z = normal(rng);
    switch (row == 0 ? 0 : chunk % 5) {
      case 0: x[i] = z; break;
      case 1: x[i] = z * 9000.0f; break;
      case 2: x[i] = 0.0f; break;
      case 3: x[i] = z * 3e-6f; break;
      default: x[i] = (i % 32 == 7) ? 40.0f : -(std::fabs(z) + 0.5f); break;
    }
  }
  return x;
}

std::vector<std::byte> weight_bytes(GgmlType type, int64_t cols, uint32_t seed) {
  const size_t row_size = row_bytes(type, static_cast<uint64_t>(cols));
  std::vector<std::byte> out(row_size * kRows);
  std::mt19937 rng(seed);
  for (int64_t r = 0; r < kRows; ++r) {
    std::byte* row = out.data() + r * row_size;
    if (r < kQuantized || !type_traits(type).quantized) {
      const std::vector<float> x = source_row(rng, r, cols);
      kernels::ref::quantize_row(type, x.data(), row, cols);
      continue;
    }
    for (size_t i = 0; i < row_size; ++i) row[i] = static_cast<std::byte>(rng());
    const size_t block = type_traits(type).block_bytes;
    for (size_t b = 0; b < row_size / block; ++b)
      for (size_t at : half_fields(type)) {
        uint16_t h = static_cast<uint16_t>(rng());
        if (((h >> 10) & 0x1f) == 0x1f) h = static_cast<uint16_t>(h & ~0x4000u);  // not inf / NaN
        std::memcpy(row + b * block + at, &h, sizeof h);
      }
    // MXFP4's exponent byte: a subnormal scale (e 0 or 1) in the first block of each random row, the
    // first normal one (2) in the second, finite products elsewhere (2^127 scales would sum to
    // inf - inf in matvec).
    if (type == GgmlType::MXFP4)
      for (size_t b = 0; b < row_size / block; ++b) {
        const unsigned e = b == 0 ? static_cast<unsigned>(r - kQuantized) : b == 1 ? 2u : 96u + rng() % 64u;
        row[b * block + offsetof(BlockMXFP4, e)] = static_cast<std::byte>(e);
      }
  }
  return out;
}

// The activations every matvec function multiplies by (a constant of the module).
std::vector<float> activations(int64_t cols) {
  std::mt19937 rng(99u + static_cast<uint32_t>(cols));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(cols));
  for (float& v : x) v = normal(rng);
  return x;
}

std::vector<float> reference(GgmlType type, int64_t cols, const std::vector<std::byte>& bytes,
                             const std::vector<int64_t>& rows) {
  const size_t row_size = row_bytes(type, static_cast<uint64_t>(cols));
  std::vector<float> y(rows.size() * static_cast<size_t>(cols));
  for (size_t i = 0; i < rows.size(); ++i)
    kernels::ref::dequantize_row(type, bytes.data() + rows[i] * row_size, y.data() + i * cols, cols);
  return y;
}

using test::read_npy_f32;
using test::run_command;

class DequantizeIree : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir("stablehlo");
    const fs::path bin = SKAINET_IREE_BIN;
    for (const char* tool : {"iree-compile", "iree-run-module"})
      if (!fs::exists(bin / tool)) {
        setup_error_ =
            fmt::format("{} not found in {} (run scripts/setup.sh, or set SKAINET_VENV_PYTHON)", tool, bin.string());
        return;
      }

    gguf::Writer writer(*dir_ / "weights.gguf");
    std::string module = "module @m {\n";
    std::string functions;
    for (size_t i = 0; i < cases().size(); ++i) {
      const auto [type, cols] = cases()[i];
      const std::string name = lower(type_name(type));
      // IREE 3.13's GGUF parameter reader rejects type 30 (BF16) and the types it has no size for
      // (IQ4_NL, IQ4_XS, ...); IREE only moves the bytes, so those weights are filed as F16 of the same
      // byte count (every row holds an even number of bytes).
      if (type == GgmlType::BF16)
        writer.add_tensor(name, {static_cast<uint64_t>(cols), kRows}, GgmlType::F16);
      else if (type == GgmlType::IQ4_NL || type == GgmlType::IQ4_XS || type == GgmlType::Q2_K ||
               type == GgmlType::Q3_K || type == GgmlType::MXFP4)
        writer.add_tensor(name, {row_bytes(type, static_cast<uint64_t>(cols)) / 2, kRows}, GgmlType::F16);
      else
        writer.add_tensor(name, {static_cast<uint64_t>(cols), kRows}, type);
      bytes_[type] = weight_bytes(type, cols, 1234u + static_cast<uint32_t>(i));
      const TensorType raw = raw_type(type, kRows, cols);
      const std::string global = "weight." + name;  // functions are named after the format
      module += "  " + global_declaration(global, "model", name, raw) + "\n";

      FunctionBuilder f(name);
      f.ret({dequantize(f, type, f.global_load(global, raw))});
      functions += f.text();
      FunctionBuilder mv(name + "_matvec");
      const Value w = mv.global_load(global, raw);
      const Value x = mv.constant_floats(activations(cols));
      mv.ret({matvec(mv, type, w, x)});
      functions += mv.text();
      if (std::find(kGathered.begin(), kGathered.end(), type) != kGathered.end()) {
        FunctionBuilder g(name + "_gathered");
        const Value ids = g.constant_ints(kGatherRows, {static_cast<int64_t>(kGatherRows.size())}, Elem::I32);
        g.ret({dequantize(g, type, g.gather_rows(g.global_load(global, raw), ids))});
        functions += g.text();
      }
    }
    module += functions + "}\n";
    writer.write([](size_t i, std::span<std::byte> out) {
      const std::vector<std::byte>& b = bytes_.at(cases()[i].type);
      ASSERT_EQ(out.size(), b.size());
      std::memcpy(out.data(), b.data(), b.size());
    });
    std::ofstream(*dir_ / "m.mlir") << module;

    // ctest runs each test in its own process: the compiled module is kept in the build tree, named
    // by a hash of its text, the compiler and its flags, so that only the first process compiles.
    const std::string compile = fmt::format(
        "'{}' --iree-hal-target-device=local "
        "--iree-hal-local-target-device-backends=llvm-cpu "
        "--iree-llvmcpu-target-cpu=host",
        (bin / "iree-compile").string());
    const fs::path cache = fs::path(SKAINET_BINARY_DIR) / "tests" / "stablehlo_dequantize";
    vmfb_ = cache /
            fmt::format("{:016x}.vmfb",
                        fnv1a(module + compile +
                              std::to_string(fs::last_write_time(bin / "iree-compile").time_since_epoch().count())));
    if (fs::exists(vmfb_)) return;
    const auto [status, log] =
        run_command(fmt::format("{} '{}' -o '{}'", compile, (*dir_ / "m.mlir").string(), (*dir_ / "m.vmfb").string()),
                    *dir_ / "compile.log");
    if (status != 0) {
      setup_error_ = "iree-compile failed:\n" + log;
      return;
    }
    fs::create_directories(cache);
    const fs::path part = vmfb_.string() + fmt::format(".{}", ::getpid());
    fs::copy_file(*dir_ / "m.vmfb", part, fs::copy_options::overwrite_existing);
    fs::rename(part, vmfb_);  // atomic: a concurrent test process sees the whole file or none
    std::error_code ec;       // modules of earlier versions of this test are of no further use
    for (const fs::directory_entry& e : fs::directory_iterator(cache, ec))
      if (e.path().extension() == ".vmfb" && e.path() != vmfb_) fs::remove(e.path(), ec);
  }

  static uint64_t fnv1a(std::string_view s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    return h;
  }

  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
    bytes_.clear();
    setup_error_.clear();
  }

  // Runs @function with iree-run-module: its one f32 result and that result's shape.
  static void run_function(const std::string& function, std::vector<float>& got, std::vector<int64_t>& shape) {
    const fs::path out = *dir_ / (function + ".npy");
    const auto [status, log] =
        run_command(fmt::format("'{}' --module='{}' --parameters=model='{}' --function={} --output=@'{}'",
                                (fs::path(SKAINET_IREE_BIN) / "iree-run-module").string(), vmfb_.string(),
                                (*dir_ / "weights.gguf").string(), function, out.string()),
                    *dir_ / (function + ".log"));
    ASSERT_EQ(status, 0) << log;
    got = read_npy_f32(out, shape);
  }

  // Runs @function and checks its [rows.size(), cols] result against the reference, bit for bit.
  static void check(GgmlType type, const std::string& function, const std::vector<int64_t>& rows) {
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
    int64_t cols = 0;
    for (const Case& c : cases())
      if (c.type == type) cols = c.cols;
    std::vector<int64_t> shape;
    std::vector<float> got;
    run_function(function, got, shape);
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_EQ(shape, (std::vector<int64_t>{static_cast<int64_t>(rows.size()), cols}));
    const std::vector<float> want = reference(type, cols, bytes_.at(type), rows);
    ASSERT_EQ(got.size(), want.size());
    size_t mismatches = 0, first = 0, flushed = 0;
    double max_diff = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
      const bool same = std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i]) ||
                        (std::isnan(got[i]) && std::isnan(want[i]));
      if (same) continue;
      // IREE's CPU code flushes f32 subnormals to zero, operands included: MXFP4's two smallest
      // exponents (scales 2^-128 and 2^-127, the random rows' first block) are subnormal, so their
      // values (at most 12 * 2^-127) come out 0 there. Counted, not failed; no other format has any.
      if (std::fabs(want[i]) <= 0x1.8p-124f && got[i] == 0.0f) {
        ++flushed;
        continue;
      }
      if (mismatches++ == 0) first = i;
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
    }
    EXPECT_EQ(mismatches, 0u) << fmt::format(
        "{}: {} of {} values differ, max |diff| {:g}; first at row {} col {}: IREE {:a}, reference {:a}", function,
        mismatches, want.size(), max_diff, first / cols, first % cols, got[first], want[first]);
    if (type != GgmlType::MXFP4) {
      EXPECT_EQ(flushed, 0u) << function << ": subnormals flushed";
    }
  }

  // Runs @<format>_matvec and checks W x against the reference dequantization times x, summed in
  // double: within 1e-5 of sum |w_i x_i| (IREE sums in f32, in its own order).
  static void check_matvec(GgmlType type) {
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
    int64_t cols = 0;
    for (const Case& c : cases())
      if (c.type == type) cols = c.cols;
    const std::string function = lower(type_name(type)) + "_matvec";
    std::vector<int64_t> shape;
    std::vector<float> got;
    run_function(function, got, shape);
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_EQ(shape, (std::vector<int64_t>{kRows}));
    std::vector<int64_t> all;
    for (int64_t r = 0; r < kRows; ++r) all.push_back(r);
    const std::vector<float> w = reference(type, cols, bytes_.at(type), all);
    const std::vector<float> x = activations(cols);
    for (int64_t r = 0; r < kRows; ++r) {
      double sum = 0.0, mag = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        const double p = static_cast<double>(w[r * cols + c]) * static_cast<double>(x[c]);
        sum += p;
        mag += std::fabs(p);
      }
      EXPECT_LE(std::fabs(static_cast<double>(got[r]) - sum), 1e-5 * mag + 1e-30)
          << fmt::format("{} row {}: IREE {:g}, reference {:g} (sum |w x| {:g})", function, r, got[r], sum, mag);
    }
  }

  static void check(GgmlType type) {
    std::vector<int64_t> all;
    for (int64_t r = 0; r < kRows; ++r) all.push_back(r);
    check(type, lower(type_name(type)), all);
  }

  static inline test::TempDir* dir_ = nullptr;
  static inline std::map<GgmlType, std::vector<std::byte>> bytes_;
  static inline std::string setup_error_;
  static inline fs::path vmfb_;
};

TEST_F(DequantizeIree, F32) { check(GgmlType::F32); }
TEST_F(DequantizeIree, F16) { check(GgmlType::F16); }
TEST_F(DequantizeIree, BF16) { check(GgmlType::BF16); }
TEST_F(DequantizeIree, Q8_0) { check(GgmlType::Q8_0); }
TEST_F(DequantizeIree, Q4_0) { check(GgmlType::Q4_0); }
TEST_F(DequantizeIree, Q4_1) { check(GgmlType::Q4_1); }
TEST_F(DequantizeIree, Q5_0) { check(GgmlType::Q5_0); }
TEST_F(DequantizeIree, Q5_1) { check(GgmlType::Q5_1); }
TEST_F(DequantizeIree, Q4_K) { check(GgmlType::Q4_K); }
TEST_F(DequantizeIree, Q5_K) { check(GgmlType::Q5_K); }
TEST_F(DequantizeIree, Q6_K) { check(GgmlType::Q6_K); }
TEST_F(DequantizeIree, Q2_K) { check(GgmlType::Q2_K); }
TEST_F(DequantizeIree, Q3_K) { check(GgmlType::Q3_K); }
TEST_F(DequantizeIree, IQ4_NL) { check(GgmlType::IQ4_NL); }
TEST_F(DequantizeIree, IQ4_XS) { check(GgmlType::IQ4_XS); }
TEST_F(DequantizeIree, MXFP4) { check(GgmlType::MXFP4); }
TEST_F(DequantizeIree, Matvec) {
  for (const Case& c : cases()) check_matvec(c.type);
}
TEST_F(DequantizeIree, GatheredRowsQ5_1) { check(GgmlType::Q5_1, "q5_1_gathered", kGatherRows); }
TEST_F(DequantizeIree, GatheredRowsQ5_K) { check(GgmlType::Q5_K, "q5_k_gathered", kGatherRows); }

}  // namespace
}  // namespace skainet::stablehlo
