// Helpers shared by the .irpa tests: deterministic bytes, whole-file reads, one-call archive writing,
// and the IREE tools of the test virtual environment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "skainet/io/irpa.hpp"

namespace skainet::test {

// Bytes that differ per entry and per position, so a misplaced chunk shows.
inline std::vector<std::byte> pattern_bytes(uint64_t n, uint32_t seed) {
  std::vector<std::byte> v(static_cast<size_t>(n));
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::byte>(x >> 24);
  }
  return v;
}

inline std::vector<uint8_t> file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

struct TestEntry {
  std::string name;
  std::vector<std::byte> bytes;
};

// Declares every entry, then writes all the data in one call.
inline uint64_t write_archive(const std::filesystem::path& path, const std::vector<TestEntry>& entries) {
  irpa::Writer w(path);
  for (const TestEntry& e : entries) w.add_data(e.name, e.bytes.size());
  for (const TestEntry& e : entries) w.write(e.bytes);
  return w.commit();
}

// The IREE command-line tools installed beside the test venv's Python (iree-base-compiler/runtime).
inline std::filesystem::path iree_tool(const char* name) { return std::filesystem::path(SKAINET_IREE_BIN) / name; }

// Runs a shell command; returns its exit status and stdout+stderr.
inline int run_command(const std::string& command, std::string& output) {
  output.clear();
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
  return ::pclose(p);
}

// A path as one shell word.
inline std::string quoted(const std::filesystem::path& p) {
  std::string q(1, '\'');
  for (char c : p.string()) {
    if (c == '\'')
      q.append("'\\''");
    else
      q.push_back(c);
  }
  q.push_back('\'');
  return q;
}

}  // namespace skainet::test
