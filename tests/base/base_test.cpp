#include <fcntl.h>
#include <sched.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "skainet/base.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using namespace skainet;

namespace {

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
  return out;
}

}  // namespace

TEST(CheckedArithmetic, DetectsOverflowAndNamesWhat) {
  EXPECT_EQ(checked_add<uint64_t>(1, 2, "x"), 3u);
  EXPECT_EQ(checked_mul<uint64_t>(1u << 20, 1u << 20, "x"), uint64_t{1} << 40);
  try {
    checked_mul<uint64_t>(uint64_t{1} << 40, uint64_t{1} << 40, "tensor 'w' bytes");
    FAIL() << "no overflow reported";
  } catch (const OverflowError& e) {
    EXPECT_NE(e.message().find("tensor 'w' bytes"), std::string::npos);
  }
  EXPECT_THROW(checked_add<uint64_t>(std::numeric_limits<uint64_t>::max(), 1, "x"), OverflowError);
  EXPECT_EQ(checked_align_up(33, 32, "x"), 64u);
  EXPECT_EQ(checked_align_up(64, 32, "x"), 64u);
  EXPECT_EQ(checked_align_up(0, 32, "x"), 0u);
  EXPECT_THROW(checked_align_up(std::numeric_limits<uint64_t>::max() - 3, 32, "x"), OverflowError);
}

TEST(Error, ContextIsPrefixed) {
  Error e("tensor 'a' truncated");
  e.add_context("loading m.gguf");
  EXPECT_EQ(e.message(), "loading m.gguf: tensor 'a' truncated");
}

TEST(AtomicFile, CommitRenamesAndAbandonLeavesNothing) {
  const test::TempDir tmp("base");
  const fs::path& dir = tmp.path();
  const fs::path target = dir / "out.bin";
  {
    base::AtomicFile f(target);
    f.write("abc", 3);
    f.write_zeros(5);
    EXPECT_EQ(f.position(), 8u);
    EXPECT_FALSE(fs::exists(target)) << "nothing appears under the final name before commit";
    f.commit();
  }
  ASSERT_TRUE(fs::exists(target));
  EXPECT_EQ(fs::file_size(target), 8u);
  EXPECT_EQ(files_in(dir).size(), 1u);
  {
    base::AtomicFile f(target);
    f.write("partial", 7);
    // destroyed without commit: an interrupted writer
  }
  EXPECT_EQ(fs::file_size(target), 8u) << "the old file is untouched";
  EXPECT_EQ(files_in(dir).size(), 1u) << "the temporary file is removed";
}

TEST(AtomicFile, UnwritableDirectoryIsAnIoError) {
  EXPECT_THROW(base::AtomicFile{"/nonexistent-dir/x.gguf"}, IoError);
}

TEST(FileReader, CountsBytesAndReportsShortReads) {
  const test::TempDir tmp("base");
  const fs::path p = tmp / "reader.bin";
  {
    std::ofstream o(p, std::ios::binary);
    for (int i = 0; i < 100; ++i) o.put(static_cast<char>(i));
  }
  base::FileReader r(p);
  EXPECT_EQ(r.size(), 100u);
  unsigned char buf[10];
  r.read_at(90, buf, 10);
  EXPECT_EQ(buf[0], 90);
  EXPECT_EQ(buf[9], 99);
  EXPECT_EQ(r.bytes_read(), 10u);
  EXPECT_THROW(r.read_at(95, buf, 10), IoError);
  EXPECT_THROW(base::FileReader(tmp / "missing.bin"), IoError);
  EXPECT_THROW(base::FileReader{tmp.path()}, IoError) << "a directory is not a model file";
}

TEST(FileMapping, MapsAnUnalignedWindow) {
  const test::TempDir tmp("base");
  const fs::path p = tmp / "map.bin";
  {
    std::ofstream o(p, std::ios::binary);
    for (int i = 0; i < 10000; ++i) o.put(static_cast<char>(i & 0xff));
  }
  base::FileMapping m(p, 5000, 100);
  EXPECT_EQ(m.size(), 100u);
  EXPECT_EQ(static_cast<unsigned char>(m.data()[0]), 5000 & 0xff);
  EXPECT_EQ(static_cast<unsigned char>(m.data()[99]), 5099 & 0xff);
  m.release_pages(0, 100);  // advisory; the data stays readable from the file
  EXPECT_EQ(static_cast<unsigned char>(m.data()[1]), 5001 & 0xff);
}

TEST(FormatBytes, HumanUnits) {
  EXPECT_EQ(base::format_bytes(512), "512 B");
  EXPECT_EQ(base::format_bytes(6501171), "6.2 MiB");
  EXPECT_EQ(base::format_bytes(uint64_t{3} << 30), "3.0 GiB");
}

TEST(CpuFeatures, DetectionIsConsistent) {
  const auto& f = base::CpuFeatures::detected();
  EXPECT_TRUE(!f.avx512bw || f.avx512f);
  EXPECT_TRUE(!f.avx2 || f.avx);
}

// At least one thread, and never more than the CPUs this process may run on.
TEST(CpuTopology, DefaultThreadsAreTheUsablePhysicalCores) {
  const unsigned n = base::default_threads();
  EXPECT_GE(n, 1u);
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_LE(n, static_cast<unsigned>(CPU_COUNT(&set)));
}
