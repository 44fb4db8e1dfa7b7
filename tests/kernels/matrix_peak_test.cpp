// The matrix peak table (issue 30): each level's unit for each arithmetic, and the peak it makes.
#include <gtest/gtest.h>

#include "skainet/compute/kernel_ops.hpp"

using namespace skainet;
using namespace skainet::kernels;

TEST(MatrixPeak, WeightsPickTheirArithmetic) {
  EXPECT_EQ(arithmetic_of(GgmlType::Q4_0), Arithmetic::Int8);
  EXPECT_EQ(arithmetic_of(GgmlType::Q4_K), Arithmetic::Int8);
  EXPECT_EQ(arithmetic_of(GgmlType::MXFP4), Arithmetic::Int8);
  EXPECT_EQ(arithmetic_of(GgmlType::F16), Arithmetic::Half);
  EXPECT_EQ(arithmetic_of(GgmlType::BF16), Arithmetic::Half);
  EXPECT_EQ(arithmetic_of(GgmlType::F32), Arithmetic::F32);
}

TEST(MatrixPeak, EachLevelNamesItsUnitAndRate) {
  base::CpuFeatures cpu;
  EXPECT_EQ(matrix_unit(IsaLevel::Amx, Arithmetic::Int8, cpu).ops_per_cycle, 2048);
  EXPECT_EQ(matrix_unit(IsaLevel::Avx512, Arithmetic::Int8, cpu).ops_per_cycle, 256);
  EXPECT_EQ(matrix_unit(IsaLevel::Avx2, Arithmetic::Int8, cpu).ops_per_cycle, 128);
  EXPECT_EQ(matrix_unit(IsaLevel::Avx2, Arithmetic::Half, cpu).ops_per_cycle, 32);
  EXPECT_EQ(matrix_unit(IsaLevel::Avx512, Arithmetic::F32, cpu).ops_per_cycle, 64);
  EXPECT_STREQ(matrix_unit(IsaLevel::Reference, Arithmetic::Int8, cpu).name, "scalar");
  // BF16 tiles only where the AMX level composes them (AMX-BF16 and AVX512-BF16); else AVX-512's FMA.
  EXPECT_EQ(matrix_unit(IsaLevel::Amx, Arithmetic::Half, cpu).ops_per_cycle, 64);
  cpu.amx_bf16 = cpu.avx512bf16 = true;
  EXPECT_EQ(matrix_unit(IsaLevel::Amx, Arithmetic::Half, cpu).ops_per_cycle, 1024);
  EXPECT_STREQ(matrix_unit(IsaLevel::Amx, Arithmetic::Half, cpu).name, "amx bf16 (tdpbf16ps)");
}

TEST(MatrixPeak, ThreadsCountUpToThePhysicalCores) {
  const MatrixPeak one = matrix_peak(best_level(), Arithmetic::Int8, 1);
  EXPECT_EQ(one.cores, 1u);
  const MatrixPeak many = matrix_peak(best_level(), Arithmetic::Int8, 4096);
  EXPECT_EQ(many.cores, base::default_threads());
  EXPECT_EQ(many.ops_per_second(), one.ops_per_second() * many.cores);
#if defined(__x86_64__)
  // Linux on x86 gives a clock one way or the other (cpufreq or /proc/cpuinfo's "cpu MHz").
  EXPECT_GT(one.clock_hz, 1e8);
#endif
}
