// The x86 levels' rows (kernels/x86/isa.hpp) as data: one row per type, each row's activation the
// one its format's blocks take, feed kernels only where a kernel-feed order exists, and the AMX
// level composed as AVX-512's rows with the AMX units' kernels laid over them. Reads the tables
// only (no ISA code runs), so it checks every level on any x86 CPU.
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "kernels/x86/level.hpp"
#include "skainet/compute/kernels.hpp"

namespace skainet::kernels {
namespace {

using x86::Act;
using x86::FormatKernels;

bool dense(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

// The activation a format's integer dot products read: its block size's.
Act act_of(GgmlType t) {
  if (dense(t)) return Act::None;
  return type_traits(t).block_elements == 256 ? Act::Q8x256 : Act::Q8x32;
}

void check_rows(const char* level, const FormatKernels* rows, int64_t count) {
  std::set<GgmlType> seen;
  for (int64_t i = 0; i < count; ++i) {
    const FormatKernels& r = rows[i];
    const std::string where = std::string(level) + " " + std::string(type_name(r.type));
    EXPECT_TRUE(seen.insert(r.type).second) << where << ": two rows";
    EXPECT_TRUE(ref::has_reference(r.type)) << where << ": no reference kernels to fall back on";
    EXPECT_EQ(r.act, act_of(r.type)) << where;
    if (r.feed) EXPECT_TRUE(ref::can_repack(r.type, BlockOrder::Interleaved16)) << where << ": feed kernel, no repack";
    if (r.transposed || r.tiles) EXPECT_TRUE(dense(r.type)) << where << ": dense-only kernels";
  }
}

#if defined(__x86_64__)

TEST(IsaRows, EveryLevelHasOneConsistentRowPerType) {
  check_rows("avx2", x86::kAvx2Kernels.formats, x86::kAvx2Kernels.format_count);
  check_rows("avx512", x86::kAvx512Kernels.formats, x86::kAvx512Kernels.format_count);
  check_rows("amx-int8", x86::kAmxInt8Kernels.formats, x86::kAmxInt8Kernels.format_count);
  check_rows("amx-bf16", x86::kAmxBf16Kernels.formats, x86::kAmxBf16Kernels.format_count);
}

TEST(IsaRows, AvxLevelsCoverTheSameFormats) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                     GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                     GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4}) {
    EXPECT_TRUE(x86::row_of(x86::kAvx2Kernels, t).gemv) << "avx2 " << type_name(t);
    EXPECT_TRUE(x86::row_of(x86::kAvx512Kernels, t).gemv) << "avx512 " << type_name(t);
  }
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    EXPECT_TRUE(x86::row_of(x86::kAvx2Kernels, t).feed) << "avx2 " << type_name(t);
    EXPECT_TRUE(x86::row_of(x86::kAvx512Kernels, t).feed) << "avx512 " << type_name(t);
    // AVX2 reads Q6_K faster in file order: its feed kernel reads a weight repacked elsewhere, but
    // the placement is not offered the repack (avx_unit.hpp).
    EXPECT_EQ(x86::row_of(x86::kAvx2Kernels, t).feed_offered, t != GgmlType::Q6_K) << "avx2 " << type_name(t);
    EXPECT_TRUE(x86::row_of(x86::kAvx512Kernels, t).feed_offered) << "avx512 " << type_name(t);
  }
}

// Each kernel of the AMX level is the AMX units' where they have one, AVX-512's otherwise.
TEST(IsaRows, AmxLaysItsKernelsOverAvx512) {
  const x86::Level amx = x86::compose_level("amx", x86::kAvx512Kernels, {&x86::kAmxInt8Kernels, &x86::kAmxBf16Kernels});
  for (const TypeTraits& t : all_types()) {
    const FormatKernels base = x86::row_of(x86::kAvx512Kernels, t.type);
    FormatKernels over{};
    for (const x86::OverlayKernels* o : {&x86::kAmxInt8Kernels, &x86::kAmxBf16Kernels})
      for (int64_t i = 0; i < o->format_count; ++i)
        if (o->formats[i].type == t.type) over = o->formats[i];
    const FormatKernels& got = amx.row(t.type);
    const std::string where(t.name);
    EXPECT_EQ(got.gemv, over.gemv ? over.gemv : base.gemv) << where;
    EXPECT_EQ(got.feed, over.feed ? over.feed : base.feed) << where;
    EXPECT_EQ(got.transposed, base.transposed) << where;
    EXPECT_EQ(got.tiles, over.tiles) << where;
    if (base.gemv || over.gemv || over.feed) EXPECT_EQ(got.act, act_of(t.type)) << where;
  }
  // What the AMX-INT8 unit covers: the feed orders' prefill and three K formats in file order.
  EXPECT_NE(amx.row(GgmlType::Q4_0).feed, x86::row_of(x86::kAvx512Kernels, GgmlType::Q4_0).feed);
  EXPECT_EQ(amx.row(GgmlType::Q4_0).gemv, x86::row_of(x86::kAvx512Kernels, GgmlType::Q4_0).gemv);
  EXPECT_NE(amx.row(GgmlType::IQ4_XS).gemv, x86::row_of(x86::kAvx512Kernels, GgmlType::IQ4_XS).gemv);
  EXPECT_TRUE(amx.row(GgmlType::F16).tiles && amx.row(GgmlType::BF16).tiles);
  EXPECT_EQ(amx.split_bf16_pairs, x86::kAmxBf16Kernels.split_bf16_pairs);
}

#endif

}  // namespace
}  // namespace skainet::kernels
