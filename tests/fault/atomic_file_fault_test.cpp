// AtomicFile under injected I/O failures, in process (this binary links the injector, io_fault.c).
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "io_fault.h"
#include "skainet/core/base.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using namespace skainet;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Injection for one test; off again when it ends, even after a failed ASSERT.
struct Inject {
  Inject(const fs::path& dir, const char* op, long n, int err, bool persist = false) {
    skainet_iofault_configure(dir.c_str(), op, n, err, persist ? 1 : 0);
  }
  ~Inject() { skainet_iofault_configure(nullptr, nullptr, 0, 0, 0); }
};

// Writes "new contents" through an AtomicFile and commits; returns the error message, or "" on success.
std::string write_new(const fs::path& target) {
  try {
    base::AtomicFile f(target);
    f.write("new contents", 12);
    f.commit();
    return "";
  } catch (const IoError& e) {
    return e.what();
  }
}

}  // namespace

// Before: the directory's fsync was best effort and its failure silent, so a commit reported success
// for a rename the disk had not made durable.
TEST(AtomicFileFaults, DirectoryFsyncFailureIsAnErrorAfterTheRename) {
  const test::TempDir tmp("fault-dirsync");
  const fs::path target = tmp / "out.bin";
  std::ofstream(target) << "old";
  std::string err;
  {
    Inject fault(tmp.path(), "fsync", 2, EIO);  // 1: the file, 2: its directory
    err = write_new(target);
    EXPECT_TRUE(skainet_iofault_fired_on_directory());
  }
  EXPECT_NE(err.find("fsync of its directory " + tmp.path().string() + " failed: " + std::strerror(EIO)),
            std::string::npos)
      << err;
  EXPECT_NE(err.find(target.string()), std::string::npos) << err;
  EXPECT_EQ(slurp(target), "new contents") << "the rename had happened: the new file is complete in place";
  EXPECT_EQ(names_in(tmp.path()), std::vector<std::string>{"out.bin"});
}

TEST(AtomicFileFaults, CloseFailureIsAnErrorAndLeavesTheTargetAndNoTemporary) {
  const test::TempDir tmp("fault-close");
  const fs::path target = tmp / "out.bin";
  std::ofstream(target) << "old";
  std::string err;
  {
    Inject fault(tmp.path(), "close", 1, EIO);
    err = write_new(target);
    EXPECT_TRUE(skainet_iofault_fired());
    EXPECT_FALSE(skainet_iofault_fired_on_directory());
  }
  EXPECT_NE(err.find("close failed"), std::string::npos) << err;
  EXPECT_NE(err.find(target.string()), std::string::npos) << err;
  EXPECT_EQ(slurp(target), "old");
  EXPECT_EQ(names_in(tmp.path()), std::vector<std::string>{"out.bin"});
}

TEST(AtomicFileFaults, ClosingTheDirectoryMayFailWithoutConsequence) {
  const test::TempDir tmp("fault-dirclose");
  const fs::path target = tmp / "out.bin";
  {
    Inject fault(tmp.path(), "close", 2, EIO);  // 1: the file, 2: the directory after its fsync
    EXPECT_EQ(write_new(target), "");
    EXPECT_TRUE(skainet_iofault_fired_on_directory());
  }
  EXPECT_EQ(slurp(target), "new contents");
}

TEST(AtomicFileFaults, ShortWritesAreCompletedNotReported) {
  const test::TempDir tmp("fault-short");
  const fs::path target = tmp / "out.bin";
  std::string big(9u << 20, '\0');  // three flushes of the 4 MiB buffer
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131u >> 7);
  {
    Inject fault(tmp.path(), "short_write", 1, 0, /*persist=*/true);  // every write writes half
    base::AtomicFile f(target);
    f.write(big.data(), big.size());
    f.commit();
    EXPECT_GT(skainet_iofault_calls("write"), 3);
  }
  EXPECT_EQ(slurp(target), big);
}

TEST(AtomicFileFaults, EveryStepBeforeTheRenameLeavesTheOldFileAndNothingElse) {
  struct Site {
    const char* op;
    long n;
    int err;
    const char* words;
  };
  for (const Site& s : {Site{"write", 1, ENOSPC, "write failed at offset 0"}, Site{"fsync", 1, EIO, "fsync failed"},
                        Site{"fsync", 1, ENOSPC, "fsync failed"}, Site{"linkat", 1, EIO, "(linkat)"},
                        Site{"close", 1, EIO, "close failed"}, Site{"rename", 1, EIO, "cannot rename"}}) {
    SCOPED_TRACE(testing::Message() << s.op << " " << std::strerror(s.err));
    const test::TempDir tmp("fault-steps");
    const fs::path target = tmp / "out.bin";
    std::ofstream(target) << "old";
    std::string err;
    {
      // linkat: every attempt fails (AtomicFile tries /proc/self/fd, then AT_EMPTY_PATH).
      Inject fault(tmp.path(), s.op, s.n, s.err, std::strcmp(s.op, "linkat") == 0);
      err = write_new(target);
      EXPECT_TRUE(skainet_iofault_fired());
    }
    EXPECT_NE(err.find(s.words), std::string::npos) << err;
    EXPECT_NE(err.find(std::strerror(s.err)), std::string::npos) << err;
    EXPECT_EQ(err.rfind(target.string(), 0), 0u) << "the message starts with the file: " << err;
    EXPECT_EQ(slurp(target), "old");
    EXPECT_EQ(names_in(tmp.path()), std::vector<std::string>{"out.bin"});
  }
}
