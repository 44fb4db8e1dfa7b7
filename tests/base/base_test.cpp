#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sched.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <filesystem>
#include <fstream>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "skainet/core/base.hpp"
#include "skainet/core/utf8.hpp"
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

// Issue 10, defect 2: open() of a FIFO waits for a writer forever; it must be refused at once.
TEST(FileReader, RefusesAFifoWithoutBlocking) {
  test::TempDir dir("fifo");
  const fs::path fifo = dir / "model.gguf";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (int mapping = 0; mapping < 2; ++mapping) {
    auto opened = std::async(std::launch::async, [&] {
      try {
        if (mapping)
          base::FileMapping m(fifo, 0, 16);
        else
          base::FileReader r(fifo);
      } catch (const IoError& e) {
        return e.message();
      }
      return std::string("opened");
    });
    if (opened.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      const int unblock = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // lets the blocked open() return
      opened.wait();
      if (unblock >= 0) ::close(unblock);
      FAIL() << "opening a FIFO blocked";
    }
    const std::string message = opened.get();
    EXPECT_NE(message.find("a FIFO, not a regular file"), std::string::npos) << message;
    EXPECT_NE(message.find(fifo.string()), std::string::npos) << message;
  }
  EXPECT_THROW(base::FileReader r(dir.path()), IoError);  // a directory, too
}

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

// Issue 10, defect 3: a writer killed by a signal left "<target>.tmp-<pid>-<n>" (hundreds of MiB).
namespace {

// Forks a child that writes 8 MiB through an AtomicFile and then receives `sig`; returns its status.
int killed_writer(const fs::path& target, base::AtomicFile::Temp temp, int sig) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    base::AtomicFile f(target, temp);
    std::vector<char> block(1 << 20, 'x');
    for (int i = 0; i < 8; ++i) f.write(block.data(), block.size());
    ::raise(sig);
    ::_exit(0);  // not reached: the signal terminates the child
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace

TEST(AtomicFile, CatchableSignalsRemoveTheTemporaryAndStillTerminate) {
  const test::TempDir tmp("signals");
  for (int sig : {SIGTERM, SIGINT, SIGHUP})
    for (auto temp : {base::AtomicFile::Temp::Named, base::AtomicFile::Temp::Unnamed}) {
      SCOPED_TRACE(testing::Message() << "signal " << sig << " named " << (temp == base::AtomicFile::Temp::Named));
      const int status = killed_writer(tmp / "out.gguf", temp, sig);
      ASSERT_TRUE(WIFSIGNALED(status)) << status;
      EXPECT_EQ(WTERMSIG(status), sig);
      EXPECT_TRUE(files_in(tmp.path()).empty()) << files_in(tmp.path()).front();
    }
}

TEST(AtomicFile, SigkillLeavesNothingWhereTheFilesystemHasTmpfile) {
  const test::TempDir tmp("sigkill");
  {
    base::AtomicFile probe(tmp / "probe");
    if (!probe.unnamed()) GTEST_SKIP() << "no O_TMPFILE on " << tmp.path();
    EXPECT_TRUE(probe.temp_path().empty());
    EXPECT_TRUE(files_in(tmp.path()).empty()) << "an unnamed temporary has no directory entry";
  }
  const int status = killed_writer(tmp / "out.gguf", base::AtomicFile::Temp::Unnamed, SIGKILL);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(files_in(tmp.path()).empty());
}

TEST(AtomicFile, NamedTemporariesOfDeadProcessesAreRemovedByTheNextWriter) {
  const test::TempDir tmp("stale");
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const fs::path target = tmp / "out.gguf";
  const std::string prefix = base::AtomicFile::temp_prefix(target);
  const fs::path stale = prefix + std::to_string(dead) + "-0";
  const fs::path live = prefix + std::to_string(::getpid()) + "-99";
  const fs::path other = base::AtomicFile::temp_prefix(tmp / "other.gguf") + std::to_string(dead) + "-0";
  for (const auto& p : {stale, live, other}) std::ofstream(p) << "leftover";
  {
    base::AtomicFile f(target, base::AtomicFile::Temp::Named);
    EXPECT_EQ(f.temp_path().string().rfind(prefix, 0), 0u) << f.temp_path();
  }
  EXPECT_FALSE(fs::exists(stale)) << "its process is gone";
  EXPECT_TRUE(fs::exists(live)) << "a live process's temporary is never touched";
  EXPECT_TRUE(fs::exists(other)) << "another target's temporaries are left to its own writer";
}

TEST(AtomicFile, RequireSpaceNamesPathNeededAndAvailable) {
  const test::TempDir tmp("space");
  base::AtomicFile f(tmp / "big.gguf");
  f.require_space(1);
  try {
    f.require_space(uint64_t{1} << 62);
    FAIL() << "4 EiB fit";
  } catch (const IoError& e) {
    EXPECT_NE(e.message().find((tmp / "big.gguf").string()), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("needs 4611686018427387904 bytes"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("available"), std::string::npos) << e.message();
  }
}

// Issue 10, defect 9: a mapped file truncated on disk while in use raised a bare SIGBUS.
TEST(FileMapping, TruncatedWhileMappedIsAnErrorNamingTheFile) {
  const test::TempDir tmp("sigbus");
  const fs::path file = tmp / "model.gguf";
  std::ofstream(file, std::ios::binary) << std::string(3 * 4096, 'x');
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDERR_FILENO);
    base::FileMapping m(file, 0, 3 * 4096);
    ::truncate(file.c_str(), 0);
    volatile char c = static_cast<const char*>(static_cast<const void*>(m.data()))[2 * 4096 + 5];
    (void)c;
    ::_exit(0);  // not reached: the read faults
  }
  ::close(pipe_fds[1]);
  std::string err;
  char buf[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(err.find("skainet: error: " + file.string() + ": the mapped file was truncated or rewritten"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("file offset 8197"), std::string::npos) << err;
}

TEST(AvailableMemory, ReadsMemAvailableInBytes) {
  EXPECT_EQ(base::available_memory("MemTotal:       32000000 kB\nMemFree: 1 kB\nMemAvailable:   24323360 kB\n"),
            uint64_t{24323360} * 1024);
  EXPECT_EQ(base::available_memory("MemTotal: 1 kB\n"), std::nullopt);
  const auto here = base::available_memory();
  ASSERT_TRUE(here.has_value());
  EXPECT_GT(*here, 0u);
}

TEST(AtomicFile, UnwritableDirectoryIsAnIoError) { EXPECT_THROW(base::AtomicFile{"/nonexistent-dir/x.gguf"}, IoError); }

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

TEST(Utf8, EncodesAndClampsWhatNoSequenceHolds) {
  std::string s;
  for (uint32_t cp : {0x41u, 0xE9u, 0x20ACu, 0x1F600u, 0x10FFFFu}) base::append_utf8(s, cp);
  EXPECT_EQ(s, "A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF");
  s.clear();
  base::append_utf8(s, 0x110000);  // beyond Unicode: U+FFFD, never a 4-byte form of a non-character
  base::append_utf8(s, 0xFFFFFFFF);
  EXPECT_EQ(s, "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(Utf8, SplitsAndDecodesLeniently) {
  auto decode_all = [](std::string_view s) {
    std::vector<std::pair<size_t, uint32_t>> out;  // (bytes, code point) of each sequence
    for (size_t i = 0; i < s.size();) {
      const size_t n = base::utf8_sequence_size(s, i);
      out.emplace_back(n, base::decode_utf8(s, i, n));
      i += n;
    }
    return out;
  };
  using P = std::vector<std::pair<size_t, uint32_t>>;
  EXPECT_EQ(decode_all("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"), (P{{1, 'a'}, {2, 0xE9}, {3, 0x20AC}, {4, 0x1F600}}));
  // A stray continuation byte, a lead byte cut short, and bytes that lead nothing: one U+FFFD each.
  EXPECT_EQ(decode_all("\x80"
                       "b\xE2\x82"
                       "c\xFF"),
            (P{{1, 0xFFFD}, {1, 'b'}, {1, 0xFFFD}, {1, 0xFFFD}, {1, 'c'}, {1, 0xFFFD}}));
  // Shape is what counts: an overlong form passes; a 4-byte form beyond U+10FFFF decodes to U+FFFD.
  EXPECT_EQ(decode_all("\xC0\x80\xF4\x90\x80\x80"), (P{{2, 0}, {4, 0xFFFD}}));
}
