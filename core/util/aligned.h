// SPDX-License-Identifier: MIT
// Zeroed, 64-byte aligned memory (on 2 MiB pages when large) for weights,
// activations and the KV cache. Large buffers are mapped from the kernel, so
// their pages become resident as they are first written, not at allocation:
// a KV cache sized for the whole context costs memory for the positions that
// hold tokens (rounded up to a 2 MiB page per layer's keys and values).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace basalt {

struct AlignedFree {
  size_t mapped_bytes = 0;  // > 0: a mapping of this size, else from the heap
  void operator()(uint8_t* p) const;
};
using AlignedBytes = std::unique_ptr<uint8_t, AlignedFree>;
// 64-byte aligned (2 MiB when large), zeroed; Error when out of memory.
AlignedBytes aligned_alloc_bytes(size_t n);
// The Error aligned_alloc_bytes throws, for code built with ISA flags that
// allocates its own (an exception's inline constructor made there could be
// the copy the linker keeps: core/util/always_inline.h).
[[noreturn]] void throw_out_of_memory(size_t n);

}  // namespace basalt
