// SPDX-License-Identifier: MIT
#include "core/util/memory.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace basalt {

int64_t resident_memory_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long pages = 0, resident = 0;
  const int got = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return got == 2 ? static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE) : 0;
}

int64_t available_memory_bytes() {
  if (const char* env = std::getenv("BASALT_MEMORY_AVAILABLE"); env && *env) return std::strtoll(env, nullptr, 10);
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char name[64];
  long long kb = 0;
  int64_t found = 0;
  while (std::fscanf(f, "%63s %lld kB", name, &kb) == 2)
    if (std::strcmp(name, "MemAvailable:") == 0) {
      found = static_cast<int64_t>(kb) * 1024;
      break;
    }
  std::fclose(f);
  return found;
}

}  // namespace basalt
