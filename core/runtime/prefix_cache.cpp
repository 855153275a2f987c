// SPDX-License-Identifier: MIT
#include "core/runtime/prefix_cache.h"

#include <algorithm>

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
  for (const auto& [serial, e] : entries_) kv_.unref(e.block);
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
  Cursor c;
  ++clock_;
  for (; c.blocks < std::min(max_blocks, n_tokens / B); ++c.blocks) {
    const uint64_t serial = find(c.parent, tokens + c.blocks * B);
    if (!serial) break;
    Entry& e = entries_.at(serial);
    e.last_used = clock_;
    kv_.share(seq, e.block);
    c.parent = serial;
  }
  return c;
}

PrefixCache::Partial PrefixCache::partial(const Cursor& c, const int32_t* tokens, int64_t n) {
  Partial best;
  Entry* used = nullptr;
  n = std::min(n, B);
  for (auto [it, end] = children_.equal_range(c.parent); it != end; ++it) {
    Entry& e = entries_.at(it->second);
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
    if (const uint64_t serial = find(c.parent, t)) {  // computed by another request too: keep the first
      entries_.at(serial).last_used = clock_;
      c.parent = serial;
      continue;
    }
    const uint64_t serial = next_serial_++;
    const int32_t block = table[static_cast<size_t>(c.blocks)];
    kv_.ref(block);
    entries_.emplace(serial, Entry{c.parent, block, clock_, std::vector<int32_t>(t, t + B)});
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
  entries_.emplace(serial, Entry{c.parent, table[static_cast<size_t>(b)], ++clock_, std::vector<int32_t>(t, t + n)});
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
  kv_.unref(oldest->second.block);
  entries_.erase(oldest);
  return true;
}

int64_t PrefixCache::evictable() const {
  int64_t n = 0;
  for (const auto& [serial, e] : entries_) n += kv_.refs(e.block) == 1;
  return n;
}

}  // namespace basalt
