// SPDX-License-Identifier: MIT
#include "core/util/threads.h"

#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include <unistd.h>

namespace basalt {

int physical_core_count() {
  std::set<std::pair<int, int>> cores;  // (package, core)
  for (int cpu = 0;; ++cpu) {
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream pkg(base + "physical_package_id"), core(base + "core_id");
    int p = 0, c = 0;
    if (!(pkg >> p) || !(core >> c)) break;
    cores.insert({p, c});
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

namespace {
std::atomic<bool> g_pin{false};
}

void set_thread_count(int n, bool pin) {
  omp_set_num_threads(n > 0 ? n : physical_core_count());
  const char* env = std::getenv("BASALT_CPU_AFFINITY");
  g_pin = pin || (env && env[0] == '1');
}

int thread_count() { return omp_get_max_threads(); }

bool pin_threads_wanted() { return g_pin; }

void prefer_passive_openmp(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY")) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", 0) != 0) return;
  execv("/proc/self/exe", argv);  // returns only if it failed: go on as we are
}

}  // namespace basalt
