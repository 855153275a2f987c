// SPDX-License-Identifier: MIT
#include "core/util/memory.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

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

void require_memory(size_t bytes, const std::string& what) {
  const int64_t avail = available_memory_bytes();
  if (avail > 0 && bytes > static_cast<size_t>(avail))
    throw Error(what + " needs " + std::to_string(bytes >> 20) + " MiB, and only " + std::to_string(avail >> 20) +
                " MiB of memory is available");
}

}  // namespace basalt
