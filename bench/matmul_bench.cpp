// GEMV and small-batch matmul through ops::matmul_into: x [n, k] F32 against a weight [out, k] in
// each format, in file order and (the formats that have one) in the kernel-feed order, for every
// kernel table this CPU runs (reference, avx2, avx512, amx), one thread; n = 4 is a batched decode
// step, n = 128 a prefill; out = 32000 (a vocabulary head) no longer fits the caches.
// bytes_per_second counts the weight bytes streamed per call (once per call, whatever n is).
//
//   build/h-simd-rel/bench/bench_matmul --benchmark_filter='Q4_0/k2048/out5632'
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "skainet/compute/kernel_ops.hpp"
#include "skainet/compute/kernels.hpp"
#include "skainet/compute/memory.hpp"
#include "skainet/compute/ops.hpp"

using namespace skainet;

namespace {

void run(benchmark::State& state, const kernels::KernelTable* table, GgmlType type, BlockOrder order, int64_t n,
         int64_t k, int64_t out) {
  memory::ExecutionContext ctx(1, *table);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> wv(static_cast<size_t>(out * k)), xv(static_cast<size_t>(n * k));
  for (auto& v : wv) v = dist(rng);
  for (auto& v : xv) v = dist(rng) * 20.0f;
  const Tensor file = ctx.from_floats(wv, Shape{out, k}, type);
  std::vector<std::byte> fed(order == BlockOrder::RowMajor ? 0 : file.nbytes());
  if (!fed.empty()) kernels::ref::repack_rows(type, order, file.raw(), fed.data(), out, k);
  const Tensor w =
      fed.empty() ? file : Tensor(Storage::borrow(fed.data(), fed.size(), false, "w"), Shape{out, k}, type, 0, order);
  const Tensor x = ctx.from_floats(xv, Shape{n, k}, GgmlType::F32);
  const Tensor y = ctx.empty(Shape{n, out});
  for (auto _ : state) {
    ops::matmul_into(ctx, x, w, y);
    benchmark::DoNotOptimize(y.raw());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.nbytes()));
  state.SetLabel(table->name);
}

}  // namespace

int main(int argc, char** argv) {
  const GgmlType types[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,   GgmlType::Q4_0,
                            GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4_K,   GgmlType::Q5_K,
                            GgmlType::Q6_K, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS};
  for (kernels::IsaLevel level : kernels::kIsaLevels) {
    const kernels::KernelTable* table = kernels::table_for(level);
    if (!table) continue;
    for (GgmlType t : types)
      for (int64_t out : {2048, 5632, 32000})
        for (int64_t n : {1, 4, 16, 128})
          for (BlockOrder order : {BlockOrder::RowMajor, BlockOrder::Interleaved16}) {
            if (n > 1 && level == kernels::IsaLevel::Reference) continue;  // slow and not the point
            if (order != BlockOrder::RowMajor && !kernels::ref::can_repack(t, order)) continue;
            const std::string name = std::string(type_name(t)) + "/k2048/out" + std::to_string(out) + "/n" +
                                     std::to_string(n) + "/" + kernels::isa_level_name(level) +
                                     (order == BlockOrder::RowMajor ? "" : "/feed");
            benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
              run(s, table, t, order, n, 2048, out);
            })->Unit(benchmark::kMicrosecond);
          }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
