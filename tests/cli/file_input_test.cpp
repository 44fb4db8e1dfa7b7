// The user-named text files the CLI reads (issue 24 #10): --chat-template FILE and run -f FILE accept
// only a regular file of at most a stated size (docs/cli.md: 1 MiB for a template, 64 MiB for a prompt
// file). A device (/dev/zero read to bad_alloc), a directory or a FIFO (blocked forever) is refused at
// once, exit code 1, with an error naming the file and what it is.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "cli_support.hpp"

using namespace skainet::cli_test;

namespace {

const std::string kModel = kStories.string();

void write_file(const std::filesystem::path& p, size_t bytes, char c) {
  std::ofstream out(p, std::ios::binary);
  out << std::string(bytes, c);
}

class FileInput : public ScratchTest {};

// Runs `args` (which name the FIFO `fifo`), timing it. Should the command block opening the FIFO (the
// defect), a writer that opens and closes it after 10 s ends that wait, so the test fails instead of
// hanging.
RunResult run_beside_fifo(const std::filesystem::path& fifo, const std::vector<std::string>& args,
                          const std::string& input, double& seconds) {
  std::atomic<bool> done = false;
  std::thread unblock([&] {
    for (int i = 0; i < 100 && !done.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (done.load()) return;
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  });
  const auto start = std::chrono::steady_clock::now();
  const RunResult r = run_skainet(args, input);
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  done.store(true);
  unblock.join();
  return r;
}

}  // namespace

TEST_F(FileInput, ChatTemplateThatIsADeviceIsRefusedNamingIt) {
  const RunResult r = run_skainet({"chat", "-m", kModel, "--chat-template", "/dev/zero", "-n", "2"}, "hi\n");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("/dev/zero"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("chat template"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("a character device, not a regular file"), std::string::npos) << r.err;
}

TEST_F(FileInput, ChatTemplateThatIsADirectoryIsRefused) {
  const RunResult r = run_skainet({"chat", "-m", kModel, "--chat-template", dir_.path().string(), "-n", "2"}, "hi\n");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("a directory, not a regular file"), std::string::npos) << r.err;
}

TEST_F(FileInput, ChatTemplateThatIsAFifoIsRefusedWithoutBlocking) {
  const std::filesystem::path fifo = path("template.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  double seconds = 0;
  const RunResult r =
      run_beside_fifo(fifo, {"chat", "-m", kModel, "--chat-template", fifo.string(), "-n", "2"}, "hi\n", seconds);
  EXPECT_LT(seconds, 9.0) << "the command waited on the FIFO";
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(fifo.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("a FIFO, not a regular file"), std::string::npos) << r.err;
}

TEST_F(FileInput, ChatTemplateAboveOneMebibyteIsRefusedAndOneAtTheLimitIsRead) {
  const std::filesystem::path big = path("big.jinja");
  write_file(big, (1u << 20) + 1, ' ');
  const RunResult r = run_skainet({"chat", "-m", kModel, "--chat-template", big.string(), "-n", "2"}, "hi\n");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(big.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("above the limit of 1 MiB"), std::string::npos) << r.err;

  // Exactly 1 MiB: spaces, then a template that renders the user's message.
  const std::string tail = "{% for m in messages %}{{ m['content'] }}{% endfor %}";
  const std::filesystem::path fits = path("fits.jinja");
  { std::ofstream(fits, std::ios::binary) << std::string((1u << 20) - tail.size(), ' ') << tail; }
  ASSERT_EQ(std::filesystem::file_size(fits), 1u << 20);
  const RunResult ok =
      run_skainet({"chat", "-m", kModel, "--chat-template", fits.string(), "-n", "2", "--temp", "0"}, "hi\n");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

TEST_F(FileInput, PromptFileThatIsADeviceIsRefusedNamingIt) {
  const RunResult r = run_skainet({"run", "-m", kModel, "-f", "/dev/zero", "-n", "2"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("/dev/zero"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("prompt file"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("a character device, not a regular file"), std::string::npos) << r.err;
}

TEST_F(FileInput, PromptFileThatIsAFifoIsRefusedWithoutBlocking) {
  const std::filesystem::path fifo = path("prompt.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  double seconds = 0;
  const RunResult r = run_beside_fifo(fifo, {"run", "-m", kModel, "-f", fifo.string(), "-n", "2"}, "", seconds);
  EXPECT_LT(seconds, 9.0) << "the command waited on the FIFO";
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("a FIFO, not a regular file"), std::string::npos) << r.err;
}

TEST_F(FileInput, PromptFileAbove64MebibytesIsRefused) {
  const std::filesystem::path big = path("big.txt");
  {
    std::ofstream out(big, std::ios::binary);
    out.seekp((64u << 20));  // 64 MiB + 1 byte, sparse
    out.put('x');
  }
  const RunResult r = run_skainet({"run", "-m", kModel, "-f", big.string(), "-n", "2"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(big.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("above the limit of 64 MiB"), std::string::npos) << r.err;
}
