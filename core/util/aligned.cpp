// SPDX-License-Identifier: MIT
#include "core/util/aligned.h"

#include <cstdlib>
#include <cstring>
#include <string>

#if __has_include(<sys/mman.h>)
#include <sys/mman.h>
#endif

#include "core/error.h"

namespace basalt {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

void AlignedFree::operator()(uint8_t* p) const { std::free(p); }

AlignedBytes aligned_alloc_bytes(size_t n) {
  // Large buffers (weights, the KV cache) go on 2 MiB pages where the kernel
  // allows it: decode streams hundreds of MB per token, and 4 KiB pages cost
  // a page walk every 4 KiB.
  const size_t align = n >= kHugePage ? kHugePage : 64;
  const size_t rounded = n == 0 ? 64 : (n + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (!p) throw_out_of_memory(n);
#ifdef MADV_HUGEPAGE
  if (align == kHugePage) madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure is fine
#endif
  std::memset(p, 0, rounded);
  return AlignedBytes(static_cast<uint8_t*>(p));
}

void throw_out_of_memory(size_t n) { throw Error("out of memory allocating " + std::to_string(n) + " bytes"); }

}  // namespace basalt
