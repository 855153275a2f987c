// SPDX-License-Identifier: MIT
// Work sharing inside one matmul call. Each thread owns a run of units (its
// rows' tiles or tile pairs) and takes them from the front, so its read
// streams run on without a restart; a thread that has run out takes the back
// half of what another has left. A static split left one thread idle for
// part of each decode matmul (docs/PERFORMANCE.md): memory bandwidth is not
// shared evenly between cores from one moment to the next, and which core
// falls behind is random.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace basalt {

class WorkShares {
 public:
  static constexpr int kMaxThreads = 64;

  // A thief's take: units [u0, u1) of the share whose owner published ctx.
  struct Stolen {
    const void* ctx;
    int64_t u0, u1;
  };

  explicit WorkShares(int n_threads);
  // Owner: units [0, n_units) of share `me` can be taken from now on. ctx is
  // what a thief needs to run them: it must stay valid as long as these
  // shares (room() gives such a place).
  void publish(int me, int64_t n_units, const void* ctx);
  // Owner: its next unit, or -1 when none is left. Units are claimed from
  // the share a few at a time (a sixteenth of what is left, at most 8), so
  // that the atomic add is not paid per unit (a 16-sequence decode's tiles
  // are a microsecond each: 3% of its step went to the adds); a claim near the
  // end is one unit, and what is claimed can no longer be stolen.
  int64_t take(int me);
  // Thief: the back half (rounded up) of the largest share left; false when
  // every other share is empty or not yet published.
  bool steal(int me, Stolen* out);
  // Successful steals in this process (tests check that sharing happens).
  static int64_t steals_so_far();

  // For the next call: n_threads shares, all empty (rooms are kept).
  void reset(int n_threads);

  // Owner: `bytes` of memory (64-byte aligned) for share `me` that live as
  // long as these shares, for the ctx a thief reads: the thread that ran the
  // share may have moved on to another one by then. *fresh: the memory is
  // new (construct the object; destroy(room) runs when it is replaced or at
  // the end); else it holds the object the last call with the same destroy
  // left, to reuse. (Not a template: the ISA objects must not carry library
  // code, tests/python/check_isa_objects.py.)
  void* room(int me, size_t bytes, void (*destroy)(void*), bool* fresh);
  ~WorkShares();
  WorkShares(const WorkShares&) = delete;
  WorkShares& operator=(const WorkShares&) = delete;

 private:
  struct alignas(64) Share {
    std::atomic<uint64_t> range{0};  // front << 32 | back; empty while front >= back
    const void* ctx = nullptr;       // written before range is published
  };
  int n_;
  Share shares_[kMaxThreads];
  struct alignas(64) Claim {  // the owner's own: the units it claimed and has not run
    int64_t next = 0, end = 0;
  };
  Claim claims_[kMaxThreads];
  struct Room {
    void* mem = nullptr;
    size_t bytes = 0;
    void (*destroy)(void*) = nullptr;
  };
  Room rooms_[kMaxThreads];
};

}  // namespace basalt
