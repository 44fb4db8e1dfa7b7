// The .irpa reader's fuzz target (tests/fuzz/irpa_reader_fuzzer.cpp) replayed in the default suite
// under any compiler on seeded mutations (tests/fuzz/fuzz_replay.hpp) of archives our writer makes:
// the target aborts on anything but a clean skainet::Error, so a crash or a broken invariant fails.
#include <gtest/gtest.h>

#include "fuzz_replay.hpp"
#include "irpa_support.hpp"
#include "temp_dir.hpp"

namespace skainet::fuzz {
int irpa_reader_one_input(const uint8_t* data, size_t size);
}  // namespace skainet::fuzz

namespace skainet::fuzz {
namespace {

TEST(IrpaFuzzReplay, MutatedArchivesAreReadOrRefused) {
  test::TempDir dir("irpa-fuzz");
  test::write_archive(dir / "a.irpa", {{"tok_embd.weight", test::pattern_bytes(300, 1)},
                                       {"x", test::pattern_bytes(0, 2)},
                                       {"blk.0.attn_q.weight", test::pattern_bytes(77, 3)}});
  irpa::Writer w(dir / "b.irpa");
  const std::byte pattern[] = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}};
  w.add_splat("splat", 64, pattern);
  w.add_data("d", 5, pattern);  // with metadata
  w.write(test::pattern_bytes(5, 9));
  w.commit();
  const std::vector<Bytes> seeds{test::file_bytes(dir / "a.irpa"), test::file_bytes(dir / "b.irpa")};
  const double s = replay(irpa_reader_one_input, seeds, 20000, 20261203);
  RecordProperty("seconds", std::to_string(s));
}

}  // namespace
}  // namespace skainet::fuzz
