// SPDX-License-Identifier: MIT
// The prefix cache on a bare KV pool: whole-prefix matches, the best partial
// block after them (an ended sequence's last block too), references counted,
// least recently used blocks evicted first, a block whose parent was
// evicted never matched again, and with rings the window before a match's end.
#include "core/runtime/prefix_cache.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace basalt {
namespace {

constexpr int64_t B = KvCache::kBlock;

ModelSpec tiny_spec() {
  ModelSpec spec;
  spec.n_layer = 1;
  spec.n_head = spec.n_head_kv = 1;
  spec.head_dim = spec.rope_dim = 4;
  spec.n_embd = 4;
  return spec;
}

std::vector<int32_t> tokens(int64_t n, int32_t first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Sequence seq takes blocks for all of t and lists its full ones.
PrefixCache::Cursor fill(KvCache& kv, PrefixCache& cache, int seq, const std::vector<int32_t>& t) {
  PrefixCache::Cursor c = cache.attach(seq, t.data(), static_cast<int64_t>(t.size()), static_cast<int64_t>(t.size()) / B);
  while (kv.capacity(seq) < static_cast<int64_t>(t.size())) EXPECT_TRUE(kv.grow(seq));
  cache.insert(c, t.data(), static_cast<int64_t>(t.size()), kv.table(seq));
  return c;
}

TEST(PrefixCache, MatchesWholeBlocksOfAPrefix) {
  KvCache kv(tiny_spec(), 8 * B, 3, 16, KvType::f16);
  PrefixCache cache(kv);
  const std::vector<int32_t> a = tokens(3 * B + 10, 100);
  fill(kv, cache, 0, a);
  EXPECT_EQ(cache.blocks(), 3);
  EXPECT_EQ(cache.evictable(), 0);  // sequence 0 still holds them

  std::vector<int32_t> b = a;
  b[2 * B + 5] = 7;  // differs inside the third block: two blocks match
  const PrefixCache::Cursor c = cache.attach(1, b.data(), static_cast<int64_t>(b.size()), 10);
  EXPECT_EQ(c.blocks, 2);
  ASSERT_EQ(kv.table(1).size(), 2u);
  EXPECT_EQ(kv.table(1)[0], kv.table(0)[0]);
  EXPECT_EQ(kv.table(1)[1], kv.table(0)[1]);
  EXPECT_EQ(kv.refs(kv.table(0)[0]), 3);  // sequences 0 and 1, and the cache

  std::vector<int32_t> d = a;
  d[0] = 1;  // the same later blocks after another first one: no match at all
  EXPECT_EQ(cache.attach(2, d.data(), static_cast<int64_t>(d.size()), 10).blocks, 0);
  EXPECT_EQ(cache.attach(2, a.data(), static_cast<int64_t>(a.size()), 1).blocks, 1);  // at most max_blocks
  kv.release(2);
}

// After the whole blocks, the listed block that starts most like the rest:
// among the children of the last matched entry only, at most n tokens.
TEST(PrefixCache, PartialFindsTheLongestStartAfterTheCursor) {
  KvCache kv(tiny_spec(), 8 * B, 4, 16, KvType::f16);
  PrefixCache cache(kv);
  const std::vector<int32_t> a = tokens(2 * B, 100);
  std::vector<int32_t> b = a;
  b[B + 40] = 1;  // a's second block and b's part ways 40 tokens in
  fill(kv, cache, 0, a);
  fill(kv, cache, 1, b);
  EXPECT_EQ(cache.blocks(), 3);

  std::vector<int32_t> c = a;
  c[B + 50] = 2;  // shares 50 tokens of a's second block, 40 of b's
  PrefixCache::Cursor cur = cache.attach(2, c.data(), 2 * B, 2);
  ASSERT_EQ(cur.blocks, 1);
  PrefixCache::Partial p = cache.partial(cur, c.data() + B, B);
  EXPECT_EQ(p.block, kv.table(0)[1]);
  EXPECT_EQ(p.tokens, 50);
  EXPECT_EQ(cache.partial(cur, c.data() + B, 30).tokens, 30);  // at most n
  std::vector<int32_t> d = b;
  d[B + 45] = 3;
  EXPECT_EQ(cache.partial(cur, d.data() + B, B).block, kv.table(1)[1]);
  EXPECT_EQ(cache.partial(cur, d.data() + B, B).tokens, 45);
  EXPECT_EQ(cache.partial(PrefixCache::Cursor{}, c.data() + B, B).tokens, 0);  // a's second block does not start a prompt
  EXPECT_EQ(cache.partial(PrefixCache::Cursor{}, c.data() + 1, B).tokens, 0);
  EXPECT_EQ(cache.partial(PrefixCache::Cursor{}, c.data(), 10).tokens, 10);
  kv.release(2);
}

// An ended sequence's part-filled last block: found by partial() (a next turn
// copies it), never as a whole block, listed once, and evicted like any other.
TEST(PrefixCache, TailOfAnEndedSequenceIsCopiedNotShared) {
  KvCache kv(tiny_spec(), 8 * B, 3, 16, KvType::f16);
  PrefixCache cache(kv);
  const std::vector<int32_t> a = tokens(B + 20, 100);
  PrefixCache::Cursor ca = fill(kv, cache, 0, a);
  cache.insert_tail(ca, a.data(), B + 20, kv.table(0));
  const int32_t tail = kv.table(0)[1];
  EXPECT_EQ(cache.blocks(), 2);
  EXPECT_EQ(kv.refs(tail), 2);
  cache.insert_tail(ca, a.data(), B + 12, kv.table(0));  // less of the same: nothing new
  cache.insert_tail(ca, a.data(), B + 20, kv.table(0));
  EXPECT_EQ(cache.blocks(), 2);
  kv.release(0);

  std::vector<int32_t> next = a;
  for (int i = 0; i < 2 * B; ++i) next.push_back(i);  // the next turn: all of a, then more
  PrefixCache::Cursor c = cache.attach(1, next.data(), static_cast<int64_t>(next.size()), 3);
  EXPECT_EQ(c.blocks, 1);  // the tail is no whole block
  const PrefixCache::Partial p = cache.partial(c, next.data() + B, B);
  EXPECT_EQ(p.block, tail);
  EXPECT_EQ(p.tokens, 20);
  kv.release(1);
  ASSERT_TRUE(cache.evict());
  ASSERT_TRUE(cache.evict());
  EXPECT_FALSE(cache.evict());
  EXPECT_EQ(kv.free_blocks(), 16);
}

TEST(PrefixCache, EvictsLeastRecentlyUsedBlocksNoOneElseHolds) {
  KvCache kv(tiny_spec(), 8 * B, 2, 8, KvType::f16);
  PrefixCache cache(kv);
  const std::vector<int32_t> a = tokens(2 * B, 0), b = tokens(2 * B, 5000);
  fill(kv, cache, 0, a);
  fill(kv, cache, 1, b);
  EXPECT_FALSE(cache.evict());  // both held by their sequences
  kv.release(0);
  kv.release(1);
  EXPECT_EQ(cache.evictable(), 4);
  EXPECT_EQ(kv.free_blocks(), 4);
  // a used again (and let go): b's blocks are now the oldest, and go first.
  EXPECT_EQ(cache.attach(0, a.data(), 2 * B, 2).blocks, 2);
  kv.release(0);
  ASSERT_TRUE(cache.evict());
  ASSERT_TRUE(cache.evict());
  EXPECT_EQ(cache.attach(1, b.data(), 2 * B, 2).blocks, 0);
  EXPECT_EQ(cache.attach(1, a.data(), 2 * B, 2).blocks, 2);
  kv.release(1);
  // a's first block used last: its second goes first, and a match stops before it.
  cache.attach(0, a.data(), 2 * B, 1);
  kv.release(0);
  ASSERT_TRUE(cache.evict());
  EXPECT_EQ(cache.attach(0, a.data(), 2 * B, 2).blocks, 1);
  kv.release(0);
  ASSERT_TRUE(cache.evict());
  EXPECT_FALSE(cache.evict());
  EXPECT_EQ(cache.blocks(), 0);
  EXPECT_EQ(kv.free_blocks(), 8);
}

// Sequence seq continues from the cache's blocks of t as a scheduler runs it
// with rings: its window held, then runs of a block, each listed as it ends.
PrefixCache::Cursor fill_ringed(KvCache& kv, PrefixCache& cache, int seq, const std::vector<int32_t>& t, int64_t max_blocks) {
  const auto n = static_cast<int64_t>(t.size());
  PrefixCache::Cursor c = cache.attach(seq, t.data(), n, max_blocks);
  EXPECT_TRUE(kv.hold_window(seq, c.blocks * B, c.blocks * B));
  for (int64_t p0 = c.blocks * B; p0 < n; p0 += B) {
    EXPECT_TRUE(kv.grow(seq));
    EXPECT_TRUE(kv.hold_window(seq, p0, p0 + B));
    cache.insert(c, t.data(), p0 + B, kv.table(seq));
  }
  return c;
}

// With rings (every layer windowed, 100 positions; runs of a block): an entry
// keeps its block's ring block; a match ends only where the window before its
// end is still held; evict_ring() lets go of the least recently used ring
// block only the cache holds, the block staying listed; a sequence that
// computes a listed block again gives the entry a ring block back; and
// partial() copies only from a block that has one.
TEST(PrefixCache, RingsKeepTheWindowBeforeAMatchsEnd) {
  ModelSpec spec = tiny_spec();
  spec.sliding_window = 100;
  KvCache kv(spec, 8 * B, 2, 16, KvType::f16, B, 8);
  ASSERT_EQ(kv.ring_blocks(), 3 + 1);
  PrefixCache cache(kv);
  const std::vector<int32_t> a = tokens(4 * B, 100);
  fill_ringed(kv, cache, 0, a, 0);
  kv.release(0);
  EXPECT_EQ(cache.blocks(), 4);
  EXPECT_EQ(kv.free_ring_blocks(), 8 - 4);  // the cache's: every block listed had one then
  EXPECT_EQ(cache.attach(1, a.data(), 4 * B, 2).blocks, 2);  // blocks 0 and 1 used last
  kv.release(1);
  ASSERT_TRUE(cache.evict_ring());  // block 2's
  EXPECT_EQ(cache.blocks(), 4);
  EXPECT_EQ(kv.free_ring_blocks(), 8 - 3);
  // 4 blocks need the window 157..255 (blocks 2, 3), 3 need 93..191 (1, 2); 2 need 29..127.
  PrefixCache::Cursor c = fill_ringed(kv, cache, 1, a, 4);
  EXPECT_EQ(c.blocks, 4);
  EXPECT_TRUE(kv.has_ring(kv.table(1)[2]));  // computed again, and listed with its ring block
  const int32_t again = kv.table(1)[2];
  kv.release(1);
  PrefixCache::Cursor d = cache.attach(0, a.data(), 4 * B, 4);
  EXPECT_EQ(d.blocks, 4);
  EXPECT_EQ(kv.table(0)[2], again);
  kv.release(0);

  // partial(): block 3 used least recently; without its ring block it is no source.
  PrefixCache::Cursor three = cache.attach(1, a.data(), 3 * B, 3);
  ASSERT_EQ(three.blocks, 3);
  EXPECT_EQ(cache.partial(three, a.data() + 3 * B, 30).tokens, 30);
  kv.release(1);
  ASSERT_EQ(cache.attach(1, a.data(), 3 * B, 3).blocks, 3);  // 0-2 used again after 3
  kv.release(1);
  ASSERT_TRUE(cache.evict_ring());
  EXPECT_EQ(cache.partial(three, a.data() + 3 * B, 30).tokens, 0);
  while (cache.evict()) {
  }
  EXPECT_EQ(kv.free_blocks(), 16);
  EXPECT_EQ(kv.free_ring_blocks(), 8);
}

// Ring blocks matched together (the same clock) go earliest block first, an
// attention sink's last: every match needs the sinks' ring blocks.
TEST(PrefixCache, RingEvictionSparesTheSinksAndTheWindowsEnd) {
  ModelSpec spec = tiny_spec();
  spec.sliding_window = 100, spec.attention_sinks = 4;
  KvCache kv(spec, 8 * B, 2, 16, KvType::f16, B, 10);
  PrefixCache cache(kv);
  const std::vector<int32_t> a = tokens(5 * B, 100);
  fill_ringed(kv, cache, 0, a, 0);
  kv.release(0);
  ASSERT_EQ(cache.attach(1, a.data(), 5 * B, 5).blocks, 5);  // all five used at once
  const std::vector<int32_t> t = kv.table(1);
  kv.release(1);
  ASSERT_TRUE(cache.evict_ring());
  EXPECT_FALSE(kv.has_ring(t[1]));
  EXPECT_EQ(cache.attach(1, a.data(), 5 * B, 5).blocks, 5);  // the window before 320 is blocks 3-4, and the sinks' 0
  kv.release(1);
  for (int b : {2, 3, 4, 0}) {
    ASSERT_TRUE(cache.evict_ring());
    EXPECT_FALSE(kv.has_ring(t[static_cast<size_t>(b)])) << "block " << b;
  }
  EXPECT_FALSE(cache.evict_ring());
}

}  // namespace
}  // namespace basalt
