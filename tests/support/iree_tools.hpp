// Test support for the IREE tools of the test virtual environment (scripts/setup.sh): running a
// command with its output captured, and reading the .npy files iree-run-module writes.
//
//   auto [status, log] = test::run_command("iree-compile m.mlir -o m.vmfb", dir / "compile.log");
//   std::vector<int64_t> shape;
//   std::vector<float> y = test::read_npy_f32(dir / "out.npy", shape);
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace skainet::test {

// A little-endian f32 .npy as iree-run-module writes it: magic, version, header length, a Python
// dict header, then the data in C order.
inline std::vector<float> read_npy_f32(const std::filesystem::path& path, std::vector<int64_t>& shape) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (all.size() < 10 || all.compare(0, 6, "\x93NUMPY") != 0) throw std::runtime_error("not an .npy file");
  const int major = static_cast<unsigned char>(all[6]);
  size_t header_len, data_at;
  if (major == 1) {
    header_len = static_cast<unsigned char>(all[8]) | static_cast<unsigned char>(all[9]) << 8;
    data_at = 10 + header_len;
  } else {
    uint32_t n;
    std::memcpy(&n, all.data() + 8, 4);
    header_len = n;
    data_at = 12 + header_len;
  }
  const std::string header = all.substr(data_at - header_len, header_len);
  if (header.find("'descr': '<f4'") == std::string::npos || header.find("'fortran_order': False") == std::string::npos)
    throw std::runtime_error("not a C-order f32 .npy: " + header);
  const size_t open = header.find('(', header.find("'shape'")), close = header.find(')', open);
  std::stringstream dims(header.substr(open + 1, close - open - 1));
  shape.clear();
  for (std::string d; std::getline(dims, d, ',');)
    if (d.find_first_not_of(' ') != std::string::npos) shape.push_back(std::stoll(d));
  std::vector<float> y((all.size() - data_at) / sizeof(float));
  std::memcpy(y.data(), all.data() + data_at, y.size() * sizeof(float));
  return y;
}

// Runs a command line, its output into `log`; the exit status and the command with the log's text.
inline std::pair<int, std::string> run_command(const std::string& command, const std::filesystem::path& log) {
  const int status = std::system((command + " > '" + log.string() + "' 2>&1").c_str());
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return {status, command + "\n" + text};
}

}  // namespace skainet::test
