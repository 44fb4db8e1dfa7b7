// read_bandwidth: the machine's streaming read ceiling for bench/compare_llama_bench.sh.
//
//   read_bandwidth [MiB=1024] [REPS=7] [THREADS...=1 2]    →  one line per thread count:  threads=2 gbps=55.3
//
// Sums a buffer of MiB mebibytes of floats with T threads, each over its own contiguous half/third/…;
// the buffer is touched once first (page faults out of the timing); prints the best of REPS passes (the
// ceiling, not the typical: other tenants only ever lower it). Built by the script with g++ -O3 -march=native.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <immintrin.h>

namespace {

float sum_range(const float* p, size_t n) {
  // Four independent accumulators so the adds are not latency-bound; the compiler vectorizes.
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
  }
  alignas(32) float t[8];
  _mm256_store_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  float s = 0;
  for (float x : t) s += x;
  for (; i < n; ++i) s += p[i];
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1024;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 7;
  std::vector<int> counts;
  for (int i = 3; i < argc; ++i) counts.push_back(std::atoi(argv[i]));
  if (counts.empty()) counts = {1, 2};
  const size_t n = mib * (1u << 20) / sizeof(float);
  float* buf = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  if (!buf) return 1;
  for (size_t i = 0; i < n; ++i) buf[i] = 1.0f;
  volatile float sink = 0;
  for (int t : counts) {
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      std::vector<float> part(static_cast<size_t>(t));
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<std::thread> pool;
      const size_t chunk = (n / t) & ~size_t{31};
      for (int k = 0; k < t; ++k)
        pool.emplace_back([&, k] {
          const size_t begin = k * chunk, end = k + 1 == t ? n : begin + chunk;
          part[k] = sum_range(buf + begin, end - begin);
        });
      for (auto& th : pool) th.join();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      for (float x : part) sink = sink + x;
    }
    std::printf("threads=%d gbps=%.2f\n", t, n * sizeof(float) / best / 1e9);
  }
  std::free(buf);
  return sink == -1.0f;
}
