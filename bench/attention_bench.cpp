// ops::attention over a KV cache of `cells` visible cells, TinyLlama-1.1B's shape (32 query heads over
// 4 KV heads of 64), F16 cache: one query (a decode step) and 64 queries (a prefill chunk), for every
// kernel table this CPU runs, on 1 and 2 threads; decode over Q8_0 and Q4_0 caches too ("decode-q8_0",
// -ctk/-ctv). Real time, since the heads run on the pool.
// items_per_second counts the KV cells read per call (per layer, per token of a decode step).
// "layers22" cycles through 22 layers' caches (TinyLlama's; 44 MiB at 2,048 cells, more than the L3),
// so each call reads its cache from memory as a decode step does; the others read one cache from cache.
//
//   build/release/bench/bench_attention_bench --benchmark_filter='decode/cells2048'
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

constexpr int64_t kHeads = 32, kKvHeads = 4, kHeadDim = 64;

void run(benchmark::State& state, const kernels::KernelTable* table, int threads, int64_t n, int64_t cells,
         int64_t layers, GgmlType cache) {
  memory::ExecutionContext ctx(threads, *table);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> qv(static_cast<size_t>(n * kHeads * kHeadDim));
  std::vector<float> kv(static_cast<size_t>(cells * kKvHeads * kHeadDim));
  for (auto& v : qv) v = dist(rng);
  for (auto& v : kv) v = dist(rng);
  const Tensor q = ctx.from_floats(qv, Shape{n, kHeads * kHeadDim}, GgmlType::F32);
  std::vector<Tensor> keys, values;
  for (int64_t l = 0; l < layers; ++l) {
    keys.push_back(ctx.from_floats(kv, Shape{cells, kKvHeads * kHeadDim}, cache));
    for (auto& v : kv) v = dist(rng);
    values.push_back(ctx.from_floats(kv, Shape{cells, kKvHeads * kHeadDim}, cache));
  }
  const kernels::AttentionParams p{
      .heads = kHeads, .kv_heads = kKvHeads, .head_dim = kHeadDim, .scale = 0.125f, .offset = cells - n};
  // Scores [heads, n, cells] and the output, from one slab reset per call (as a layer does).
  const int64_t floats = kHeads * n * cells + n * kHeads * kHeadDim;
  memory::ForwardScope scope({.slab_bytes = static_cast<uint64_t>(floats * 4 + 4096)});
  int64_t l = 0;
  for (auto _ : state) {
    ctx.step(scope, [&] { benchmark::DoNotOptimize(ops::attention(ctx, q, keys[l], values[l], p).raw()); });
    l = (l + 1) % layers;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * cells);
  state.SetLabel(table->name);
}

}  // namespace

int main(int argc, char** argv) {
  for (kernels::IsaLevel level : kernels::kIsaLevels) {
    const kernels::KernelTable* table = kernels::table_for(level);
    if (!table) continue;
    for (GgmlType cache : {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0})
      for (int64_t n : {1, 64})
        for (int64_t cells : {512, 2048})
          for (int64_t layers : {int64_t{1}, n == 1 && cells == 2048 ? int64_t{22} : int64_t{0}})
            for (int threads : {1, 2}) {
              if (layers == 0 || (cache != GgmlType::F16 && n > 1)) continue;
              std::string kind = n == 1 ? "decode" : "prefill64";
              if (cache != GgmlType::F16) kind += cache == GgmlType::Q8_0 ? "-q8_0" : "-q4_0";
              const std::string name = std::string(table->name) + "/" + kind + "/cells" + std::to_string(cells) +
                                       (layers > 1 ? "/layers22" : "") + "/t" + std::to_string(threads);
              benchmark::RegisterBenchmark(name.c_str(), run, table, threads, n, cells, layers, cache)->UseRealTime();
            }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
