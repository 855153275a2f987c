// SPDX-License-Identifier: MIT
// What the process and the machine have in memory (Linux /proc; 0 elsewhere).
#pragma once

#include <cstdint>

namespace basalt {

int64_t resident_memory_bytes();   // this process's resident set
// MemAvailable: what can be allocated without swapping; BASALT_MEMORY_AVAILABLE
// (bytes) overrides it (a container whose /proc shows the host's, the tests).
int64_t available_memory_bytes();

}  // namespace basalt
