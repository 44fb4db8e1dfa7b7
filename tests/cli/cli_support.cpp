#include "cli/cli_support.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "skainet/compute/kernels.hpp"

extern char** environ;

namespace skainet::cli_test {

namespace {

RunResult run_skainet_with(const std::vector<std::string>& args, const std::string& input, char* const* envp);

}  // namespace

RunResult run_skainet(const std::vector<std::string>& args) { return run_skainet(args, ""); }

RunResult run_skainet(const std::vector<std::string>& args, const std::string& input) {
  return run_skainet_with(args, input, environ);
}

RunResult run_skainet_env(const std::vector<std::string>& args, const std::vector<std::string>& env,
                          const std::string& input) {
  // Ours replace an inherited variable of the same name (getenv would return whichever comes first).
  auto name_of = [](std::string_view v) { return v.substr(0, v.find('=')); };
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    bool replaced = false;
    for (const std::string& v : env) replaced = replaced || name_of(v) == name_of(*e);
    if (!replaced) envp.push_back(*e);
  }
  for (const std::string& v : env) envp.push_back(const_cast<char*>(v.c_str()));
  envp.push_back(nullptr);
  return run_skainet_with(args, input, envp.data());
}

namespace {

RunResult run_skainet_with(const std::vector<std::string>& args, const std::string& input, char* const* envp) {
  const test::TempDir scratch("cli-run");
  const std::string out_path = (scratch / "out").string(), err_path = (scratch / "err").string();
  const std::string in_path = (scratch / "in").string();
  std::ofstream(in_path, std::ios::binary) << input;
  const std::string binary = std::string(SKAINET_BINARY_DIR) + "/skainet";

  std::vector<std::string> argv_storage{binary};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, in_path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  RunResult r;
  const int rc = posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), envp);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    r.err = "posix_spawn failed: " + std::to_string(rc);
    return r;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.exit_code = -1000 - WTERMSIG(status);
  r.out = read_bytes(out_path);
  r.err = read_bytes(err_path);
  return r;
}

}  // namespace

std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<float> read_tensor(const gguf::Header& h, const std::string& name) {
  const gguf::TensorInfo* t = h.find_tensor(name);
  if (t == nullptr) throw std::runtime_error("no tensor " + name);
  base::FileReader file(h.path);
  std::vector<std::byte> bytes(t->bytes);
  file.read_at(t->file_offset, bytes.data(), bytes.size());
  const uint64_t row = t->shape[0], rows = t->elements() / row;
  const uint64_t stride = row_bytes(t->type, row);
  std::vector<float> values(t->elements());
  for (uint64_t r = 0; r < rows; ++r)
    kernels::ref::dequantize_row(t->type, bytes.data() + r * stride, values.data() + r * row,
                                 static_cast<int64_t>(row));
  return values;
}

double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return a.size() == b.size() && norm > 0 ? std::sqrt(diff / norm) : 1e9;
}

}  // namespace skainet::cli_test
