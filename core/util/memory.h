// SPDX-License-Identifier: MIT
// What the process and the machine have in memory (Linux /proc; 0 elsewhere).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace basalt {

int64_t resident_memory_bytes();   // this process's resident set
// MemAvailable: what can be allocated without swapping; BASALT_MEMORY_AVAILABLE
// (bytes) overrides it (a container whose /proc shows the host's, the tests).
int64_t available_memory_bytes();

// Error "<what> needs N MiB ..., and only M MiB of memory is available" when
// `bytes` is more than available_memory_bytes() (nothing when that is unknown):
// loaders call it before they allocate what a file asks for.
void require_memory(size_t bytes, const std::string& what);

}  // namespace basalt
