// The libFuzzer target (tests/fuzz/irpa_reader_fuzzer.cpp) driven in the default suite, under any
// compiler: seeded mutations of valid archives (byte flips, field-sized overwrites with edge values,
// truncations, appended bytes). The target aborts on anything but a clean skainet::Error, so a crash
// or a broken invariant fails this test. `make fuzz` (clang, coverage-guided) goes much further.
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "irpa_support.hpp"
#include "temp_dir.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace skainet::test {
namespace {

std::vector<uint8_t> mutate(std::vector<uint8_t> v, std::mt19937_64& rng) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < edits && !v.empty(); ++i) {
    const size_t at = rng() % v.size();
    switch (rng() % 5) {
      case 0: v[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
      case 1: v[at] = static_cast<uint8_t>(rng()); break;
      case 2: {  // a field-sized edge value at an 8-byte boundary (offsets, lengths, counts)
        const uint64_t edges[] = {0, 1, 0x7fffffffffffffffull, 0xffffffffffffffffull, v.size(), v.size() + 64, 1ull << 32};
        const uint64_t x = edges[rng() % std::size(edges)];
        const size_t field = at & ~size_t{7};
        for (size_t b = 0; b < 8 && field + b < v.size(); ++b) v[field + b] = static_cast<uint8_t>(x >> (8 * b));
        break;
      }
      case 3: v.resize(at); break;
      default: v.insert(v.end(), 1 + rng() % 64, static_cast<uint8_t>(rng())); break;
    }
  }
  return v;
}

TEST(IrpaFuzzReplay, TwentyThousandMutatedArchivesEndCleanly) {
  TempDir dir("irpa-fuzz");
  std::vector<std::vector<uint8_t>> seeds;
  write_archive(dir / "a.irpa", {{"tok_embd.weight", pattern_bytes(300, 1)}, {"x", pattern_bytes(0, 2)},
                                 {"blk.0.attn_q.weight", pattern_bytes(77, 3)}});
  seeds.push_back(file_bytes(dir / "a.irpa"));
  irpa::Writer w(dir / "b.irpa");
  const std::byte pattern[] = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}};
  w.add_splat("splat", 64, pattern);
  w.add_data("d", 5, pattern);  // with metadata
  w.write(pattern_bytes(5, 9));
  w.commit();
  seeds.push_back(file_bytes(dir / "b.irpa"));

  std::mt19937_64 rng(20261203);
  for (const auto& s : seeds) LLVMFuzzerTestOneInput(s.data(), s.size());
  for (int i = 0; i < 20000; ++i) {
    const std::vector<uint8_t> input = mutate(seeds[static_cast<size_t>(i) % seeds.size()], rng);
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  SUCCEED();
}

}  // namespace
}  // namespace skainet::test
