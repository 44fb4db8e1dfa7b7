#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "skainet/core/base.hpp"

namespace skainet::base {

Progress::Progress(std::string label, uint64_t total)
    : label_(std::move(label)), total_(total), enabled_(::isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() { finish(); }

void Progress::advance(uint64_t n) {
  done_ += n;
  if (!enabled_ || total_ == 0) return;
  const int percent = static_cast<int>(std::min<uint64_t>(100, done_ * 100 / total_));
  if (percent == last_percent_) return;
  last_percent_ = percent;
  constexpr int kWidth = 40;
  const int filled = percent * kWidth / 100;
  fmt::print(stderr, "\r{} [{}{}] {:3d}%", label_, std::string(filled, '#'), std::string(kWidth - filled, ' '),
             percent);
  std::fflush(stderr);
}

void Progress::finish() {
  if (enabled_ && last_percent_ >= 0) {
    fmt::print(stderr, "\n");
    last_percent_ = -1;
    enabled_ = false;
  }
}

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

}  // namespace skainet::base
