// SPDX-License-Identifier: MIT
// Full KV blocks of earlier requests, found again by their tokens: a request
// whose prompt starts with blocks already computed (the same system prompt, a
// chat's history) takes them, one reference each, instead of computing them
// again. The cache keeps a reference of its own on every block it lists, so a
// block outlives the request that filled it; when the pool runs dry, the
// least recently used blocks that only the cache still holds go first.
//
// An entry is keyed by its block's tokens and by the entry of the block
// before it, so a match is always a whole prefix. Entries' serials are never
// reused: a block whose parent was evicted can no longer be found (and goes
// in its turn).
//
// With rings (the sliding-window layers' own pool, core/graph/kv_cache.h),
// an entry also keeps its block's ring block while it can: a match ends only
// where the window before its end is still there, and when the rings' pool
// runs dry, the least recently used entries let go of their ring blocks
// first (evict_ring()), keeping their blocks for longer matches.
//
// Past the last whole block a prompt shares, the entry after it that starts
// most like the prompt's rest (partial()) gives a copy of itself: a system
// prompt or a chat's history rarely ends on a block's edge, and the copy of a
// block (a few MB even for a 7B) costs far less than computing its tokens.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/graph/kv_cache.h"

namespace basalt {

class PrefixCache {
 public:
  // Where a sequence's registered blocks end: its last entry and how many.
  struct Cursor {
    uint64_t parent = 0;  // 0: the root
    int64_t blocks = 0;
  };

  explicit PrefixCache(KvCache& kv) : kv_(kv) {}
  ~PrefixCache();  // its references go
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // Gives seq (whose table must be empty) the cached blocks that hold
  // tokens[0, 64 k) for the largest k <= max_blocks (with rings: whose window
  // before 64 k is still held). The cursor says how many.
  Cursor attach(int seq, const int32_t* tokens, int64_t n_tokens, int64_t max_blocks);
  // The listed block after the cursor whose first tokens match the most of
  // tokens[0, n) (n <= 64), and how many match; {-1, 0} when none does.
  // With rings, only a block that still has its ring block.
  struct Partial {
    int32_t block = -1;
    int64_t tokens = 0;
  };
  Partial partial(const Cursor& cursor, const int32_t* tokens, int64_t n);
  // Lists seq's full blocks past the cursor: table[b] holds tokens[64 b, 64 b + 64).
  void insert(Cursor& cursor, const int32_t* tokens, int64_t n_tokens, const std::vector<int32_t>& table);
  // At a sequence's end, after insert(): lists its last block too when only
  // part of it is filled (nobody writes into it again), for partial() to copy:
  // a chat's next turn starts with all of this one.
  void insert_tail(const Cursor& cursor, const int32_t* tokens, int64_t n_tokens, const std::vector<int32_t>& table);
  // Frees the least recently used block that only the cache holds; false when there is none.
  bool evict();
  // Frees the least recently used ring block that only the cache holds, of
  // the blocks used at once (a chain matched together) the one earliest in
  // its sequence (the window before a match's end is its last blocks'),
  // attention sinks' last of all (every match needs them); false when there is none.
  bool evict_ring();
  // Blocks listed, and of those the ones only the cache holds (evict() can free them).
  int64_t blocks() const { return static_cast<int64_t>(entries_.size()); }
  int64_t evictable() const;

 private:
  struct Entry {
    uint64_t parent;
    int32_t block;
    uint64_t last_used;
    std::vector<int32_t> tokens;  // 64, or fewer for a sequence's last block (found by partial() only)
    int64_t index = 0;            // the block's in its sequence: positions [64 index, ...)
    bool ring = false;            // holds a reference to the block's ring block
  };
  void keep_ring(Entry& e);        // a reference to its block's ring block, when it has one
  void drop(const Entry& e);       // its references go
  static uint64_t key(uint64_t parent, const int32_t* tokens);
  // The entry for these tokens after parent; 0 when there is none.
  uint64_t find(uint64_t parent, const int32_t* tokens) const;

  KvCache& kv_;
  std::unordered_map<uint64_t, Entry> entries_;          // by serial
  std::unordered_multimap<uint64_t, uint64_t> by_key_;  // key() -> serial
  std::unordered_multimap<uint64_t, uint64_t> children_;  // parent's serial -> serial
  uint64_t next_serial_ = 1, clock_ = 0;
};

}  // namespace basalt
