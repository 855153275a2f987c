// SPDX-License-Identifier: MIT
#include "core/util/aligned.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#if __has_include(<sys/mman.h>)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "core/error.h"

namespace basalt {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

void AlignedFree::operator()(uint8_t* p) const {
#if __has_include(<sys/mman.h>)
  if (mapped_bytes > 0) {
    munmap(p, mapped_bytes);
    return;
  }
#endif
  std::free(p);
}

namespace {

#if __has_include(<sys/mman.h>)
// n bytes from the kernel at a 2 MiB boundary: zero pages that become
// resident as they are written. They go on 2 MiB pages where the kernel
// allows it: decode streams hundreds of MB of weights a token, and 4 KiB
// pages cost a page walk every 4 KiB (on 4 KiB pages decode at depth 4096
// ran 15% slower, its f16 cache read the same way). Only whole 2 MiB pages
// are advised, so a buffer's tail does not round it up to the next 2 MiB.
AlignedBytes map_aligned(size_t n) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t length = (n + page - 1) / page * page;
  // No swap reserved up front (MAP_NORESERVE): a cache sized for a long
  // context may be larger than the machine's memory as long as what is
  // written fits (Session's KV budget checks that).
  void* raw = mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) throw_out_of_memory(n);
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) & ~(kHugePage - 1);
  if (aligned > start) munmap(raw, aligned - start);  // the slack before and after the aligned range
  const uintptr_t end = aligned + length, raw_end = start + length + kHugePage;
  if (raw_end > end) munmap(reinterpret_cast<void*>(end), raw_end - end);
  auto* p = reinterpret_cast<uint8_t*>(aligned);
#ifdef MADV_HUGEPAGE
  if (n >= kHugePage) madvise(p, n / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice only: failure is fine
#endif
  return AlignedBytes(p, AlignedFree{length});
}
#endif

}  // namespace

AlignedBytes aligned_alloc_bytes(size_t n) {
#if __has_include(<sys/mman.h>)
  if (n >= kHugePage) return map_aligned(n);
#endif
  const size_t rounded = n == 0 ? 64 : (n + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw_out_of_memory(n);
  std::memset(p, 0, rounded);
  return AlignedBytes(static_cast<uint8_t*>(p));
}

void throw_out_of_memory(size_t n) { throw Error("out of memory allocating " + std::to_string(n) + " bytes"); }

}  // namespace basalt
