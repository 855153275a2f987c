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

#include <sched.h>
#include <unistd.h>

namespace basalt {

int physical_core_count() {
  // The cores of the CPUs this process may run on (a container's cpuset, taskset): each
  // counted once by its SMT siblings' list, which names a core on every kernel and
  // architecture (core_id repeats across an ARM SoC's clusters).
  cpu_set_t allowed;
  const bool masked = sched_getaffinity(0, sizeof allowed, &allowed) == 0;
  std::set<std::string> cores;
  const int n_cpus = masked ? CPU_SETSIZE : static_cast<int>(std::thread::hardware_concurrency());
  for (int cpu = 0; cpu < n_cpus; ++cpu) {
    if (masked && !CPU_ISSET(cpu, &allowed)) continue;
    std::ifstream in("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list");
    std::string siblings;
    cores.insert(in >> siblings ? siblings : "cpu" + std::to_string(cpu));  // no topology: a core each
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
