#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "skainet/core/base.hpp"

namespace skainet::base {
namespace {

using Clock = std::chrono::steady_clock;

// A rate or time left needs some history: under half a second (or nothing done) they would be noise.
bool has_rate(const ProgressLine& p) { return p.seconds >= 0.5 && p.done > 0; }

uint64_t bytes_per_second(const ProgressLine& p) { return static_cast<uint64_t>(p.done / p.seconds); }

// "0:09", "12:40", "1:02:03".
std::string clock_text(double seconds) {
  const auto s = static_cast<uint64_t>(std::llround(std::max(0.0, seconds)));
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
                   : fmt::format("{}:{:02}", s / 60, s % 60);
}

int percent_of(const ProgressLine& p) {
  return p.total == 0 ? 100 : static_cast<int>(std::min<uint64_t>(100, p.done * 100 / p.total));
}

// ", 85.3 MiB/s, 0:09 left" (with `sep` between the parts), or nothing while there is no rate yet.
std::string rate_and_eta(const ProgressLine& p, std::string_view sep) {
  if (!has_rate(p)) return "";
  const double rate = static_cast<double>(p.done) / p.seconds;
  std::string s = fmt::format("{}{}/s", sep, format_bytes(bytes_per_second(p)));
  if (p.done < p.total) s += fmt::format("{}{} left", sep, clock_text(static_cast<double>(p.total - p.done) / rate));
  return s;
}

}  // namespace

std::string progress_bar_text(const ProgressLine& p) {
  constexpr int kWidth = 30;
  const int percent = percent_of(p), filled = percent * kWidth / 100;
  std::string s = fmt::format("{} [{}{}] {:3d}% {} of {}", p.label, std::string(filled, '#'),
                              std::string(kWidth - filled, ' '), percent, format_bytes(p.done), format_bytes(p.total));
  s += rate_and_eta(p, "  ");
  if (!p.item.empty()) s += fmt::format("  {}", p.item);
  return s;
}

std::string progress_log_text(const ProgressLine& p) {
  std::string s = fmt::format("{}: {}%, {} of {}", p.label, percent_of(p), format_bytes(p.done), format_bytes(p.total));
  s += rate_and_eta(p, ", ");
  if (!p.item.empty()) s += fmt::format(", at {}", p.item);
  return s;
}

std::string progress_done_text(const ProgressLine& p) {
  std::string s = fmt::format("{}: {} in {:.1f} s", p.label, format_bytes(p.done), p.seconds);
  if (has_rate(p)) s += fmt::format(" ({}/s)", format_bytes(bytes_per_second(p)));
  return s;
}

namespace {

// Seconds between a piped job's lines: SKAINET_PROGRESS_EVERY (a positive decimal) or 5. Read once; a
// value that is not a positive number gives one warning on stderr naming the variable, and 5.
double progress_log_every_default() {
  static const double seconds = [] {
    constexpr double kDefault = 5.0;
    const char* text = std::getenv("SKAINET_PROGRESS_EVERY");
    if (text == nullptr) return kDefault;
    char* end = nullptr;
    const double v = std::strtod(text, &end);
    if (end != text && *end == '\0' && std::isfinite(v) && v > 0) return v;
    fmt::print(stderr, "skainet: warning: SKAINET_PROGRESS_EVERY='{}' is not a positive number of seconds; using {}\n",
               text, kDefault);
    return kDefault;
  }();
  return seconds;
}

}  // namespace

Progress::Progress(std::string label, uint64_t total)
    : Progress(std::move(label), total, Options{.log_every_seconds = progress_log_every_default()}) {}

Progress::Progress(std::string label, uint64_t total, Options options)
    : label_(std::move(label)),
      total_(total),
      stream_(options.stream ? options.stream : stderr),
      terminal_(options.output == Output::Terminal ||
                (options.output == Output::Auto && ::isatty(::fileno(stream_)) == 1)),
      log_every_(options.log_every_seconds),
      start_(Clock::now()),
      last_print_(start_) {}

Progress::~Progress() {
  if (terminal_ && printed_ && !finished_) fmt::print(stream_, "\n");
}

ProgressLine Progress::line() const {
  return {.label = label_,
          .item = item_,
          .done = done_,
          .total = total_,
          .seconds = std::chrono::duration<double>(Clock::now() - start_).count()};
}

void Progress::item(std::string_view name) {
  item_.assign(name);
  print(false);
}

void Progress::advance(uint64_t n) {
  done_ += n;
  print(false);
}

// On a terminal at most every 0.1 s; piped every log_every_ seconds. The first terminal line comes at
// once, so a job shows it started.
void Progress::print(bool force) {
  if (finished_ || total_ == 0) return;
  const Clock::time_point now = Clock::now();
  const double since = std::chrono::duration<double>(now - last_print_).count();
  if (!force && (terminal_ ? printed_ && since < 0.1 : since < log_every_)) return;
  last_print_ = now;
  printed_ = true;
  if (terminal_)
    fmt::print(stream_, "\r{}\x1b[K", progress_bar_text(line()));
  else
    fmt::print(stream_, "{}\n", progress_log_text(line()));
  std::fflush(stream_);
}

void Progress::finish() {
  if (finished_ || total_ == 0) return;
  finished_ = true;
  if (terminal_)
    fmt::print(stream_, "\r{}\x1b[K\n", progress_done_text(line()));
  else if (printed_)
    fmt::print(stream_, "{}\n", progress_done_text(line()));
  std::fflush(stream_);
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
