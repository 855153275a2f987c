// SPDX-License-Identifier: MIT
// Zeroed, 64-byte aligned memory (on 2 MiB pages when large) for weights,
// activations and the KV cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace basalt {

struct AlignedFree {
  void operator()(uint8_t* p) const;
};
using AlignedBytes = std::unique_ptr<uint8_t, AlignedFree>;
AlignedBytes aligned_alloc_bytes(size_t n);  // 64-byte aligned, zeroed; Error when out of memory
// The Error aligned_alloc_bytes throws, for code built with ISA flags that
// allocates its own (an exception's inline constructor made there could be
// the copy the linker keeps: core/util/always_inline.h).
[[noreturn]] void throw_out_of_memory(size_t n);

}  // namespace basalt
