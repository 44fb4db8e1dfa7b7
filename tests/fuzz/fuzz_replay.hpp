// A fuzz target replayed in the default suite: its seeds, then seeded mutations of them. The same
// seed gives the same inputs on every machine, so a failure reproduces with the test alone. This is
// a smoke run (thousands of inputs, no coverage feedback); `make fuzz` goes much further.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "fuzz_target.hpp"

namespace skainet::fuzz {

// One to four edits: bit flips, random bytes, edge values over 1/2/4/8-byte little-endian fields
// (counts, lengths, offsets, ids), cuts, random runs, UTF-8 sequences (valid, cut and invalid), a
// copy of another stretch of the input, or a splice from another seed.
inline Bytes mutate(Bytes v, std::mt19937_64& rng, const std::vector<Bytes>& seeds) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < edits; ++i) {
    const size_t at = v.empty() ? 0 : rng() % v.size();
    switch (rng() % 9) {
      case 0:
        if (!v.empty()) v[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:
        if (!v.empty()) v[at] = static_cast<uint8_t>(rng());
        break;
      case 2: {
        const uint64_t edges[] = {0,
                                  1,
                                  2,
                                  0x7f,
                                  0x80,
                                  0xff,
                                  0xffff,
                                  0x7fffffff,
                                  0xffffffff,
                                  1ull << 32,
                                  0x7fffffffffffffffull,
                                  0xffffffffffffffffull,
                                  v.size(),
                                  v.size() + 64};
        const uint64_t x = edges[rng() % std::size(edges)];
        const size_t width = size_t{1} << (rng() % 4);
        for (size_t b = 0; b < width && at + b < v.size(); ++b) v[at + b] = static_cast<uint8_t>(x >> (8 * b));
        break;
      }
      case 3: v.resize(at); break;
      case 4: {
        const size_t n = 1 + rng() % 32;
        Bytes run(n);
        for (auto& b : run) b = static_cast<uint8_t>(rng());
        v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), run.begin(), run.end());
        break;
      }
      case 5: {
        const uint32_t cps[] = {0x0,      0x20, 0x0a,   0xa0,   0x3000, 0x1f600,
                                0x10ffff, 0xe9, 0x4e2d, 0x0301, 0xd800, static_cast<uint32_t>(rng() % 0x110000)};
        const uint32_t cp = cps[rng() % std::size(cps)];
        Bytes u;
        if (cp < 0x80)
          u = {static_cast<uint8_t>(cp)};
        else if (cp < 0x800)
          u = {static_cast<uint8_t>(0xc0 | (cp >> 6)), static_cast<uint8_t>(0x80 | (cp & 0x3f))};
        else if (cp < 0x10000)
          u = {static_cast<uint8_t>(0xe0 | (cp >> 12)), static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3f)),
               static_cast<uint8_t>(0x80 | (cp & 0x3f))};
        else
          u = {static_cast<uint8_t>(0xf0 | (cp >> 18)), static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3f)),
               static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3f)), static_cast<uint8_t>(0x80 | (cp & 0x3f))};
        if (rng() % 4 == 0) u.resize(u.size() - 1);  // a cut sequence
        v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), u.begin(), u.end());
        break;
      }
      case 6: {
        if (v.empty()) break;
        const size_t from = rng() % v.size();
        const size_t n = 1 + rng() % std::min<size_t>(64, v.size() - from);
        const Bytes chunk(v.begin() + static_cast<std::ptrdiff_t>(from),
                          v.begin() + static_cast<std::ptrdiff_t>(from + n));
        v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), chunk.begin(), chunk.end());
        break;
      }
      case 7: {
        const Bytes& other = seeds[rng() % seeds.size()];
        if (other.empty()) break;
        const size_t from = rng() % other.size();
        v.resize(at);
        v.insert(v.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
        break;
      }
      default:
        if (!v.empty()) v.erase(v.begin() + static_cast<std::ptrdiff_t>(at));
        break;
    }
  }
  return v;
}

// Runs every seed, then `count` mutations (each of a seed picked in turn), and returns the seconds
// it took. The target aborts on a finding, which fails the test.
template <class OneInput>
double replay(OneInput one_input, const std::vector<Bytes>& seeds, int count, uint64_t seed) {
  const auto start = std::chrono::steady_clock::now();
  std::mt19937_64 rng(seed);
  for (const Bytes& s : seeds) one_input(s.data(), s.size());
  for (int i = 0; i < count; ++i) {
    const Bytes input = mutate(seeds[static_cast<size_t>(i) % seeds.size()], rng, seeds);
    one_input(input.data(), input.size());
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace skainet::fuzz
