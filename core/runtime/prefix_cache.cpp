// SPDX-License-Identifier: MIT
#include "core/runtime/prefix_cache.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace basalt {

namespace {
constexpr int64_t B = KvCache::kBlock;

// Removes the one (key, serial) pair of an index.
void erase_serial(std::unordered_multimap<uint64_t, uint64_t>& index, uint64_t key, uint64_t serial) {
  for (auto [it, end] = index.equal_range(key); it != end; ++it)
    if (it->second == serial) {
      index.erase(it);
      return;
    }
}
}  // namespace

PrefixCache::~PrefixCache() {
  for (const auto& [serial, e] : entries_) drop(e);
}

void PrefixCache::drop(const Entry& e) {
  if (e.ring) kv_.unref_ring(e.block);
  kv_.unref(e.block);
}

void PrefixCache::keep_ring(Entry& e) {
  e.ring = kv_.has_ring(e.block);
  if (e.ring) kv_.ref_ring(e.block);
}

uint64_t PrefixCache::key(uint64_t parent, const int32_t* tokens) {
  uint64_t h = 1469598103934665603ull ^ parent;  // FNV-1a over the parent and the tokens
  for (int64_t i = 0; i < B; ++i) {
    h ^= static_cast<uint32_t>(tokens[i]);
    h *= 1099511628211ull;
  }
  return h;
}

uint64_t PrefixCache::find(uint64_t parent, const int32_t* tokens) const {
  auto [it, end] = by_key_.equal_range(key(parent, tokens));
  for (; it != end; ++it) {
    const Entry& e = entries_.at(it->second);
    if (e.parent == parent && e.tokens.size() == B && std::equal(e.tokens.begin(), e.tokens.end(), tokens)) return it->second;
  }
  return 0;
}

PrefixCache::Cursor PrefixCache::attach(int seq, const int32_t* tokens, int64_t n_tokens, int64_t max_blocks) {
  std::vector<uint64_t> chain;
  std::vector<int32_t> blocks;
  for (uint64_t parent = 0; static_cast<int64_t>(chain.size()) < std::min(max_blocks, n_tokens / B);) {
    parent = find(parent, tokens + static_cast<int64_t>(chain.size()) * B);
    if (!parent) break;
    chain.push_back(parent);
    blocks.push_back(entries_.at(parent).block);
  }
  // Sliding-window layers continue only where their window before the match's end is still in the rings.
  while (!chain.empty() && !kv_.window_kept(blocks.data(), static_cast<int64_t>(chain.size()) * B)) chain.pop_back();
  Cursor c;
  ++clock_;
  for (uint64_t serial : chain) {
    Entry& e = entries_.at(serial);
    e.last_used = clock_;
    kv_.share(seq, e.block);
    c.parent = serial;
    ++c.blocks;
  }
  return c;
}

PrefixCache::Partial PrefixCache::partial(const Cursor& c, const int32_t* tokens, int64_t n) {
  Partial best;
  Entry* used = nullptr;
  n = std::min(n, B);
  for (auto [it, end] = children_.equal_range(c.parent); it != end; ++it) {
    Entry& e = entries_.at(it->second);
    if (kv_.ring_blocks() > 0 && !kv_.has_ring(e.block)) continue;  // a copy needs its sliding-window layers' too
    const auto stop = e.tokens.begin() + std::min<int64_t>(n, static_cast<int64_t>(e.tokens.size()));
    const int64_t m = std::mismatch(e.tokens.begin(), stop, tokens).first - e.tokens.begin();
    if (m > best.tokens) best = {e.block, m}, used = &e;
  }
  if (used) used->last_used = ++clock_;
  return best;
}

void PrefixCache::insert(Cursor& c, const int32_t* tokens, int64_t n_tokens, const std::vector<int32_t>& table) {
  const int64_t full = std::min(n_tokens / B, static_cast<int64_t>(table.size()));
  ++clock_;
  for (; c.blocks < full; ++c.blocks) {
    const int32_t* t = tokens + c.blocks * B;
    if (const uint64_t serial = find(c.parent, t)) {  // computed by another request too: keep the first...
      Entry& e = entries_.at(serial);
      e.last_used = clock_;
      c.parent = serial;
      const int32_t mine = table[static_cast<size_t>(c.blocks)];
      if (!e.ring && mine != e.block && kv_.has_ring(mine)) {  // ...unless it let go of its ring block and this one has one
        kv_.ref(mine);
        kv_.unref(std::exchange(e.block, mine));
        keep_ring(e);
      }
      continue;
    }
    const uint64_t serial = next_serial_++;
    const int32_t block = table[static_cast<size_t>(c.blocks)];
    kv_.ref(block);
    keep_ring(entries_.emplace(serial, Entry{c.parent, block, clock_, std::vector<int32_t>(t, t + B), c.blocks}).first->second);
    by_key_.emplace(key(c.parent, t), serial);
    children_.emplace(c.parent, serial);
    c.parent = serial;
  }
}

void PrefixCache::insert_tail(const Cursor& c, const int32_t* tokens, int64_t n_tokens, const std::vector<int32_t>& table) {
  const int64_t b = n_tokens / B, n = n_tokens % B;
  if (n == 0 || c.blocks != b || static_cast<int64_t>(table.size()) <= b) return;
  const int32_t* t = tokens + b * B;
  if (partial(c, t, n).tokens == n) return;  // listed already, as much or more of it
  const uint64_t serial = next_serial_++;
  kv_.ref(table[static_cast<size_t>(b)]);
  keep_ring(entries_.emplace(serial, Entry{c.parent, table[static_cast<size_t>(b)], ++clock_, std::vector<int32_t>(t, t + n), b})
                .first->second);
  children_.emplace(c.parent, serial);
}

bool PrefixCache::evict() {
  auto oldest = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (kv_.refs(it->second.block) == 1 && (oldest == entries_.end() || it->second.last_used < oldest->second.last_used))
      oldest = it;
  if (oldest == entries_.end()) return false;
  if (oldest->second.tokens.size() == B)  // a tail is not in by_key_
    erase_serial(by_key_, key(oldest->second.parent, oldest->second.tokens.data()), oldest->first);
  erase_serial(children_, oldest->second.parent, oldest->first);
  drop(oldest->second);
  entries_.erase(oldest);
  return true;
}

bool PrefixCache::evict_ring() {
  auto order = [&](const Entry& e) { return std::tuple(e.index < kv_.sink_blocks(), e.last_used, e.index); };
  auto oldest = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->second.ring && kv_.ring_refs(it->second.block) == 1 &&
        (oldest == entries_.end() || order(it->second) < order(oldest->second)))
      oldest = it;
  if (oldest == entries_.end()) return false;
  kv_.unref_ring(oldest->second.block);
  oldest->second.ring = false;
  return true;
}

int64_t PrefixCache::evictable() const {
  int64_t n = 0;
  for (const auto& [serial, e] : entries_) n += kv_.refs(e.block) == 1;
  return n;
}

}  // namespace basalt
