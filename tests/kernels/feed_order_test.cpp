// Kernel-feed block orders (BlockOrder::Interleaved16): the repacker against its inverse and the
// per-block reader, and every table's matmul on a repacked weight against the same table on the
// file-order weight (same 8-bit activation, the same exact integer block sums: only the order of the
// float additions differs) and against the reference. Odd row counts (a row-major tail after the
// groups), one block, odd x row counts (tile leftovers), split ranges on 1 and 2 threads, plain and
// two-phase entries, and an output with strided columns.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "quant_test_util.hpp"
#include "skainet/compute/kernel_ops.hpp"
#include "skainet/compute/kernels.hpp"
#include "skainet/core/thread_pool.hpp"

namespace skainet::kernels {
namespace {

constexpr BlockOrder kFeed = BlockOrder::Interleaved16;
constexpr GgmlType kFeedTypes[] = {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K};

// Row lengths: one block, a few, and many (odd counts of blocks).
std::vector<int64_t> lengths(GgmlType type, int64_t many) {
  const int64_t e = type_traits(type).block_elements;
  return {e, 3 * e, many + e};
}

std::vector<std::byte> quantized(GgmlType type, int64_t rows, int64_t k, uint32_t seed) {
  const int64_t rb = static_cast<int64_t>(row_bytes(type, k));
  std::vector<std::byte> out(static_cast<size_t>(rows * rb));
  const std::vector<float> w = test::weights_like(static_cast<size_t>(rows * k), seed, 0.05f);
  for (int64_t r = 0; r < rows; ++r) ref::quantize_row(type, w.data() + r * k, out.data() + r * rb, k);
  return out;
}

TEST(FeedOrder, RepackUnpackAndBlockReaderAgree) {
  for (GgmlType type : kFeedTypes) {
    ASSERT_TRUE(ref::can_repack(type, kFeed));
    EXPECT_FALSE(ref::can_repack(type, BlockOrder::RowMajor));
    const int64_t bb = type_traits(type).block_bytes;
    for (int64_t rows : {1, 15, 16, 17, 33, 48}) {
      for (int64_t k : lengths(type, 256)) {
        SCOPED_TRACE(std::string(type_name(type)) + " rows=" + std::to_string(rows) + " k=" + std::to_string(k));
        const std::vector<std::byte> file = quantized(type, rows, k, static_cast<uint32_t>(rows * 1000 + k));
        std::vector<std::byte> feed(file.size()), back(file.size());
        ref::repack_rows(type, kFeed, file.data(), feed.data(), rows, k);
        ref::unpack_rows(type, kFeed, feed.data(), back.data(), rows, k);
        EXPECT_EQ(back, file);
        if (rows >= 16) {
          EXPECT_NE(feed, file) << "a whole group must move";
        }
        std::vector<std::byte> block(static_cast<size_t>(bb));
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t b = 0; b < k / type_traits(type).block_elements; ++b) {
            ref::feed_block(type, kFeed, feed.data(), rows, k, r, b, block.data());
            ASSERT_EQ(0, std::memcmp(block.data(), file.data() + r * static_cast<int64_t>(row_bytes(type, k)) + b * bb,
                                     static_cast<size_t>(bb)))
                << "row " << r << " block " << b;
          }
      }
    }
  }
}

// A [rows, k] weight tensor over `bytes` (whole: a kernel-feed weight has no views).
Tensor weight(std::vector<std::byte>& bytes, GgmlType type, int64_t rows, int64_t k, BlockOrder order) {
  return Tensor(Storage::borrow(bytes.data(), bytes.size(), false, "w"), Shape{rows, k}, type, 0, order);
}

// x [n, k] inside a wider buffer at a 4-byte offset: rows neither aligned nor packed.
struct X {
  std::vector<float> v;
  Tensor t;
};
X make_x(int64_t n, int64_t k, uint32_t seed) {
  X x;
  x.v = test::weights_like(static_cast<size_t>(n * (k + 3) + 1), seed);
  x.t = Tensor(Storage::borrow(x.v.data(), x.v.size() * 4, false, "x"), Shape{n, k + 3}, GgmlType::F32, 4)
            .narrow(1, 0, k);
  return x;
}

// out [n, rows]: contiguous, or (columns_strided) a transposed view of a [rows, n] buffer.
struct Out {
  std::vector<float> v;
  Tensor t;
  float at(int64_t r, int64_t o) const {
    float f;
    std::memcpy(&f, t.raw() + r * t.stride(0) + o * t.stride(1), 4);
    return f;
  }
};
Out make_out(int64_t n, int64_t rows, bool columns_strided) {
  Out o;
  o.v.assign(static_cast<size_t>(n * rows), -1e30f);
  const Storage::Ref s = Storage::borrow(o.v.data(), o.v.size() * 4, true, "out");
  o.t = columns_strided ? Tensor(s, Shape{rows, n}, GgmlType::F32).transpose(0, 1)
                        : Tensor(s, Shape{n, rows}, GgmlType::F32);
  return o;
}

// As ops::matmul splits a kernel-feed weight: chunks of whole 16-row groups, on `threads` threads.
void run(const KernelTable& table, bool prepared, const Tensor& x, const Tensor& w, const Tensor& out, int threads) {
  base::ThreadPool pool(threads);
  const int64_t rows = w.dim(0), groups = (rows + kInterleaveRows - 1) / kInterleaveRows;
  const auto by_groups = [&](auto&& fn) {
    pool.parallel_for(groups, 1, [&](int64_t gb, int64_t ge) noexcept {
      fn(gb * kInterleaveRows, std::min(ge * kInterleaveRows, rows));
    });
  };
  const size_t need = table.matmul_scratch ? table.matmul_scratch(x, w) : 0;
  if (table.matmul_scratch) {  // the plan prices the scratch from shapes alone: the same number
    EXPECT_EQ(table.matmul_scratch_for(w.type(), w.block_order(), x.dim(0), x.dim(1)), need);
  }
  if (!prepared || need == 0) {
    by_groups([&](int64_t b, int64_t e) noexcept { table.matmul(x, w, out, b, e); });
    return;
  }
  std::vector<std::byte> scratch(need + 64);
  std::byte* s = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  pool.parallel_for(x.dim(0), 1, [&](int64_t b, int64_t e) noexcept { table.matmul_prepare(x, w, s, b, e); });
  by_groups([&](int64_t b, int64_t e) noexcept { table.matmul_prepared(x, w, out, b, e, s); });
}

TEST(FeedOrder, EveryTableMatchesFileOrder) {
  uint32_t seed = 7;
  for (IsaLevel level : kIsaLevels) {
    const KernelTable* table = table_for(level);
    if (!table) continue;
    if (level != IsaLevel::Reference) {
      ASSERT_NE(table->feeds, nullptr) << isa_level_name(level);
      // AVX2 reads Q6_K faster in file order, so it does not offer its feed order (avx_unit.hpp).
      for (GgmlType type : kFeedTypes)
        EXPECT_EQ(table->feeds(type, kFeed), !(level == IsaLevel::Avx2 && type == GgmlType::Q6_K))
            << isa_level_name(level) << " " << type_name(type);
    }
    for (GgmlType type : kFeedTypes)  // every level's feed kernels, the ones not offered included
      for (int64_t rows : {1, 16, 17, 35, 64})
        for (int64_t k : lengths(type, 4096))
          for (int64_t n : {1, 2, 3, 4, 7, 13, 37})  // 7: AVX2 tiles of 4, 2, 1; 37: two AMX tiles, a rest
            for (int threads : {1, 2}) {
              const bool prepared = (seed % 2) == 0, strided = (seed % 5) == 0;
              const std::string where = std::string(isa_level_name(level)) + " " + std::string(type_name(type)) +
                                        " rows=" + std::to_string(rows) + " k=" + std::to_string(k) +
                                        " n=" + std::to_string(n) + " threads=" + std::to_string(threads) +
                                        (prepared ? " prepared" : " plain") + (strided ? " strided-out" : "");
              std::vector<std::byte> file = quantized(type, rows, k, seed), feed(file.size());
              ref::repack_rows(type, kFeed, file.data(), feed.data(), rows, k);
              const Tensor w_file = weight(file, type, rows, k, BlockOrder::RowMajor);
              const Tensor w_feed = weight(feed, type, rows, k, kFeed);
              const X x = make_x(n, k, seed + 1);
              const Out want = make_out(n, rows, false), got = make_out(n, rows, strided),
                        refd = make_out(n, rows, false);
              run(*table, prepared, x.t, w_file, want.t, threads);
              run(*table, prepared, x.t, w_feed, got.t, threads);
              ref::matmul(x.t, w_file, refd.t, 0, rows);
              std::vector<float> wrow(static_cast<size_t>(k));
              for (int64_t o = 0; o < rows; ++o) {
                ref::dequantize_row(type, file.data() + o * row_bytes(type, k), wrow.data(), k);
                for (int64_t r = 0; r < n; ++r) {
                  const float* xr = x.v.data() + 1 + r * (k + 3);
                  double mag = 0, terms = 0, quant_bound = 0;
                  const int64_t e = type_traits(type).block_elements;  // also the activation's block
                  for (int64_t b = 0; b < k / e; ++b) {
                    float amax = 0, wmax = 0;
                    for (int64_t i = e * b; i < e * b + e; ++i) {
                      amax = std::max(amax, std::fabs(xr[i]));
                      wmax = std::max(wmax, std::fabs(wrow[static_cast<size_t>(i)]));
                    }
                    for (int64_t i = e * b; i < e * b + e; ++i) {
                      const double wi = std::fabs(wrow[static_cast<size_t>(i)]);
                      mag += wi * std::fabs(xr[i]);
                      terms += (wi + wmax) * std::fabs(xr[i]);
                      quant_bound += wi * (amax / 254.0 * 1.001 + std::fabs(xr[i]) * 0x1p-10);  // + F16 scale
                    }
                  }
                  // Same table, same activation: float order only, of terms as large as `terms` (file
                  // order adds Q4_0's -8 * d * sum(x) apart; the feed kernels fold it into the integer
                  // sum). Against the float reference: the 8-bit activation's rounding (half a step of
                  // each block's largest |x| / 127) dominates.
                  ASSERT_NEAR(got.at(r, o), want.at(r, o), 2e-6 * terms + 1e-30) << where << " r=" << r << " o=" << o;
                  ASSERT_NEAR(got.at(r, o), refd.at(r, o), quant_bound + 1e-5 * mag + 1e-30)
                      << where << " r=" << r << " o=" << o;
                }
              }
              ++seed;
            }
  }
}

}  // namespace
}  // namespace skainet::kernels
