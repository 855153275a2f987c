// SPDX-License-Identifier: MIT
#include "cpu/work_shares.h"

#include <new>

#include "core/error.h"

namespace basalt {

namespace {
constexpr uint64_t pack(uint64_t front, uint64_t back) { return front << 32 | back; }
constexpr int64_t front_of(uint64_t r) { return static_cast<int64_t>(r >> 32); }
constexpr int64_t back_of(uint64_t r) { return static_cast<int64_t>(r & 0xffffffffu); }
std::atomic<int64_t> g_steals{0};
}  // namespace

int64_t WorkShares::steals_so_far() { return g_steals.load(std::memory_order_relaxed); }

WorkShares::WorkShares(int n_threads) { reset(n_threads); }

WorkShares::~WorkShares() {
  for (Room& r : rooms_)
    if (r.mem) {
      r.destroy(r.mem);
      ::operator delete(r.mem, std::align_val_t{64});
    }
}

void WorkShares::reset(int n_threads) {
  if (n_threads < 1 || n_threads > kMaxThreads) throw Error("internal: WorkShares for " + std::to_string(n_threads) + " threads");
  n_ = n_threads;
  for (int i = 0; i < n_; ++i) {
    shares_[i].range.store(0, std::memory_order_relaxed);
    shares_[i].ctx = nullptr;
    claims_[i] = {};
  }
}

void* WorkShares::room(int me, size_t bytes, void (*destroy)(void*), bool* fresh) {
  Room& r = rooms_[me];
  *fresh = !(r.mem && r.destroy == destroy && r.bytes >= bytes);
  if (!*fresh) return r.mem;
  if (r.mem) {
    r.destroy(r.mem);
    ::operator delete(r.mem, std::align_val_t{64});
  }
  r.mem = ::operator new(bytes, std::align_val_t{64});
  r.bytes = bytes;
  r.destroy = destroy;
  return r.mem;
}

void WorkShares::publish(int me, int64_t n_units, const void* ctx) {
  if (n_units < 0 || n_units > 0x7fffffff) throw Error("internal: WorkShares unit count out of range");
  shares_[me].ctx = ctx;
  claims_[me] = {};
  shares_[me].range.store(pack(0, static_cast<uint64_t>(n_units)), std::memory_order_release);
}

int64_t WorkShares::take(int me) {
  Claim& c = claims_[me];
  if (c.next < c.end) return c.next++;
  // One atomic add claims k units: a front pushed past the back reads as
  // empty to everyone, and a thief that cut the back meanwhile leaves fewer.
  const uint64_t seen = shares_[me].range.load(std::memory_order_relaxed);
  int64_t k = (back_of(seen) - front_of(seen)) / 16;
  k = k < 1 ? 1 : k > 8 ? 8 : k;
  const uint64_t r = shares_[me].range.fetch_add(pack(static_cast<uint64_t>(k), 0), std::memory_order_relaxed);
  const int64_t f = front_of(r), b = back_of(r);
  if (f >= b) return -1;
  c = {f + 1, f + k < b ? f + k : b};
  return f;
}

bool WorkShares::steal(int me, Stolen* out) {
  for (;;) {
    int victim = -1;
    uint64_t seen = 0;
    int64_t most = 0;
    for (int i = 0; i < n_; ++i) {
      if (i == me) continue;
      const uint64_t r = shares_[i].range.load(std::memory_order_acquire);
      if (back_of(r) - front_of(r) > most) victim = i, seen = r, most = back_of(r) - front_of(r);
    }
    if (victim < 0) return false;
    const int64_t f = front_of(seen), b = back_of(seen), cut = b - (b - f + 1) / 2;
    // Fails when the owner took a unit or another thief came first: look again.
    if (shares_[victim].range.compare_exchange_weak(seen, pack(f, cut), std::memory_order_acquire)) {
      *out = {shares_[victim].ctx, cut, b};
      g_steals.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
}

}  // namespace basalt
