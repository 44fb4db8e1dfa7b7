#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "skainet/core/base.hpp"

namespace skainet::base {
namespace {

// One number from a sysfs file, or -1.
long read_number(const std::string& path) {
  std::ifstream in(path);
  long v = -1;
  if (!(in >> v)) return -1;
  return v;
}

}  // namespace

unsigned default_threads() noexcept {
  try {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return std::max(1u, std::thread::hardware_concurrency());
    // Physical cores among the CPUs this process may run on: SMT siblings share one core's vector
    // units, and the matmul kernels saturate those, so a second thread per core only adds contention.
    std::set<std::pair<long, long>> cores;
    unsigned cpus = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &set)) continue;
      ++cpus;
      const std::string topology = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
      const long package = read_number(topology + "physical_package_id"), core = read_number(topology + "core_id");
      cores.insert(package < 0 || core < 0 ? std::pair{-1L, static_cast<long>(cpu)} : std::pair{package, core});
    }
    return std::max(1u, std::min(cpus, static_cast<unsigned>(cores.size())));
  } catch (...) {
    return 1;
  }
}

double nominal_clock_hz() noexcept {
  try {
    if (const long khz = read_number("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"); khz > 0)
      return static_cast<double>(khz) * 1e3;
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    double mhz = 0;
    while (std::getline(cpuinfo, line)) {
      if (!line.starts_with("cpu MHz")) continue;
      const size_t colon = line.find(':');
      if (colon != std::string::npos) mhz = std::max(mhz, std::strtod(line.c_str() + colon + 1, nullptr));
    }
    return mhz * 1e6;
  } catch (...) {
    return 0;
  }
}

}  // namespace skainet::base
