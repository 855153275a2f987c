// SPDX-License-Identifier: MIT
// What the process and the machine have in memory (Linux /proc; 0 elsewhere).
#pragma once

#include <cstdint>

namespace basalt {

int64_t resident_memory_bytes();   // this process's resident set
int64_t available_memory_bytes();  // MemAvailable: what can be allocated without swapping

}  // namespace basalt
